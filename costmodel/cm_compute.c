/* Compute of one transformer layer after sharding: GEMMs through an efficiency model,
 * attention (flash-style or Megatron-2021 unfused), memory-bound ops; the TP/SP, CP and EP
 * communication of the layer; activation memory per Korthikanti et al. 2022, generalised to
 * grouped-query attention, SwiGLU and MoE.
 *
 * GEMM efficiency: eff = gemm_eff * wave * pad * k/(k + k_half), where wave is the fraction of
 * the last wave of output tiles the SMs fill (tiles / (ceil(tiles / SMs) * SMs)), pad the
 * fraction of tile area that holds real output, and the k term the prologue/epilogue cost of a
 * short k-loop. The better of the tile and its transpose is taken, as cuBLAS's heuristics do.
 * On CPU ranks (the CPU backend's host) there is no tile term: BLAS blocks are a few elements.
 * gemm_eff is the efficiency of an ideal shape; with the defaults an 8192^3 bf16 GEMM on an
 * H200 comes out at 80% of peak, as measured (78-81% with cuBLAS; docs/models.md). */
#include <math.h>

#include "cm_int.h"

static double tile_eff(double m, double n, double tm, double tn, double batch, int sms) {
  double gm = ceil(m / tm), gn = ceil(n / tn), tiles = gm * gn * batch;
  double pad = (m * n) / (gm * tm * gn * tn);
  double wave = 1;
  if (sms > 0) wave = tiles / (ceil(tiles / sms) * sms);
  return pad * wave;
}

double cm__gemm(const cm_model *cm, double m, double n, double k, double batch, double peak,
                double *eff) {
  if (m <= 0 || n <= 0 || k <= 0 || batch <= 0) {
    if (eff) *eff = 0;
    return 0;
  }
  const cm_params *p = &cm->p;
  double tm = p->gemm_tile_m, tn = p->gemm_tile_n;
  /* CPU ranks (device "cpu"): BLAS register blocks of 4-16 elements, no tiles to pad */
  double w = cm->c.gpu.cpu ? 1
                           : fmax(tile_eff(m, n, tm, tn, batch, cm->c.gpu.sms),
                                  tile_eff(m, n, tn, tm, batch, cm->c.gpu.sms));
  double e = p->gemm_eff * w * k / (k + p->gemm_k_half);
  double t = 2.0 * m * n * k * batch / (peak * e);
  /* a GEMM cannot beat the time to read its inputs and write its output (roofline) */
  double in = cm->m.dtype == SPEC_DTYPE_FP8 && peak > cm->peak_bf16_flops ? 1.0 : cm->act_bytes;
  double mem = ((m * k + k * n) * in + m * n * cm->act_bytes) * batch / cm->hbm_bps;
  if (mem > t) t = mem, e = 2.0 * m * n * k * batch / (peak * t);
  /* fp8 GEMMs (Transformer Engine) first cast their bf16 inputs: read 2, write 1 byte each */
  if (in == 1.0) t += 3.0 * (m * k + k * n) * batch / cm->hbm_bps;
  if (eff) *eff = e;
  return t + p->kernel_us * 1e-6;
}

double cm_gemm_time(const cm_model *cm, double m, double n, double k, double *eff) {
  return cm__gemm(cm, m, n, k, 1, cm->peak_flops, eff);
}

double cm__mem_time(const cm_model *cm, double bytes) {
  return bytes > 0 ? bytes / cm->hbm_bps + cm->p.kernel_us * 1e-6 : 0;
}

/* Forward GEMM and its two backward GEMMs (dgrad m x k x n, wgrad k x n x m). */
typedef struct gemm3 {
  double fwd, bwd;
} gemm3;

static gemm3 gemm_fb(const cm_model *cm, double m, double n, double k, double batch) {
  gemm3 g;
  double pk = cm->peak_flops;
  g.fwd = cm__gemm(cm, m, n, k, batch, pk, NULL);
  g.bwd = cm__gemm(cm, m, k, n, batch, pk, NULL) + cm__gemm(cm, k, n, m, batch, pk, NULL);
  return g;
}

/* Exposed time of a collective that TP overlap hides behind a GEMM. */
static double exposed(const cm_model *cm, double comm, double gemm) {
  if (!cm->p.tp_comm_overlap) return comm;
  return comm > gemm ? comm - gemm : 0;
}

void cm__layer_cost(const cm_model *cm, const cm__cfg *g, cm__layer *L) {
  const spec_model *m = &cm->m;
  const cm_params *p = &cm->p;
  double t = g->tp, c = g->cp, b = g->mbs, s = m->seq_len, h = m->hidden;
  double a = m->heads, kv = m->kv_heads, dh = cm->dh, f = m->ffn_hidden;
  int swiglu = m->ffn == SPEC_FFN_SWIGLU, drop = p->dropout;
  double T = b * s / c;               /* tokens of this rank in the layer */
  double Tn = g->sp ? T / t : T;      /* tokens of the replicated (norm, dropout) parts */
  double E = m->experts, k = m->top_k;
  int moe = m->experts > 0;

  /* GEMMs (forward, backward) */
  gemm3 qkv = gemm_fb(cm, T, (a + 2 * kv) * dh / t, h, 1);
  gemm3 proj = gemm_fb(cm, T, h, a * dh / t, 1);
  gemm3 fc1, fc2, router = {0, 0};
  double mlp_tokens = T;
  if (moe) {
    double per_expert = T * k * g->ep / E, local = E / g->ep;
    fc1 = gemm_fb(cm, per_expert, (swiglu ? 2 * f : f) / t, h, local);
    fc2 = gemm_fb(cm, per_expert, h, f / t, local);
    router = gemm_fb(cm, T, E, h, 1);
    mlp_tokens = T * k;
  } else {
    fc1 = gemm_fb(cm, T, (swiglu ? 2 * f : f) / t, h, 1);
    fc2 = gemm_fb(cm, T, h, f / t, 1);
  }

  /* attention core */
  double attn_f, attn_b, heads = b * a / t;
  if (p->flash_attention) { /* causal: half of 4 b a s^2 dh, CP-balanced */
    attn_f = cm_attn_time(cm, s / c, s, dh, heads, 1, 0);
    attn_b = cm_attn_time(cm, s / c, s, dh, heads, 1, 1);
  } else {
    double elems = heads * (s / c) * s;
    gemm3 qk = gemm_fb(cm, s / c, s, dh, heads), pv = gemm_fb(cm, s / c, dh, s, heads);
    attn_f = qk.fwd + pv.fwd + cm__mem_time(cm, elems * (drop ? 9 : 4));
    attn_b = qk.bwd + pv.bwd + cm__mem_time(cm, elems * (drop ? 11 : 6));
  }

  /* memory-bound: two norms, two bias-dropout-residual, the activation function */
  double eb = (8.0 + (drop ? 14.0 : 12.0)) * h * Tn + (swiglu ? 6.0 : 4.0) * mlp_tokens * f / t;
  if (moe) eb += 8.0 * T * k * h; /* permute and unpermute the routed tokens */
  double ew_f = cm__mem_time(cm, eb), ew_b = cm__mem_time(cm, 2 * eb);

  L->fwd_s = qkv.fwd + proj.fwd + fc1.fwd + fc2.fwd + router.fwd + attn_f + ew_f;
  L->bwd_s = qkv.bwd + proj.bwd + fc1.bwd + fc2.bwd + router.bwd + attn_b + ew_b;

  /* TP / SP collectives: 2 in forward, 2 in backward (Megatron's f and g operators); with
   * sequence parallelism each all-reduce becomes an all-gather and a reduce-scatter */
  double act = T * h * cm->act_bytes, tp_f = 0, tp_b = 0;
  if (g->tp > 1) {
    if (g->sp) {
      double ag = cm_coll_best(cm, CM_ALL_GATHER, act, &g->tp_pl, NULL);
      double rs = cm_coll_best(cm, CM_REDUCE_SCATTER, act, &g->tp_pl, NULL);
      tp_f = exposed(cm, ag, qkv.fwd) + exposed(cm, rs, proj.fwd) + exposed(cm, ag, fc1.fwd) +
             exposed(cm, rs, fc2.fwd);
      tp_b = exposed(cm, ag, qkv.bwd / 2) + exposed(cm, rs, qkv.bwd / 2) +
             exposed(cm, ag, fc1.bwd / 2) + exposed(cm, rs, fc1.bwd / 2);
    } else {
      double ar = cm_coll_best(cm, CM_ALL_REDUCE, act, &g->tp_pl, NULL);
      tp_f = exposed(cm, ar, proj.fwd) + exposed(cm, ar, fc2.fwd);
      tp_b = exposed(cm, ar, qkv.bwd) + exposed(cm, ar, fc1.bwd);
    }
  }

  /* CP: ring attention passes K and V blocks c-1 times (and dK, dV back in backward),
   * overlapped with the attention of the block in hand */
  double cp_f = 0, cp_b = 0;
  if (g->cp > 1) {
    double kvb = 2.0 * b * (s / c) * kv * dh / t * cm->act_bytes;
    double step = cm_coll_best(cm, CM_SEND_RECV, kvb, &g->cp_pl, NULL);
    double stepb = cm_coll_best(cm, CM_SEND_RECV, 2 * kvb, &g->cp_pl, NULL);
    cp_f = (c - 1) * fmax(0, step - attn_f / c);
    cp_b = (c - 1) * fmax(0, stepb - attn_b / c);
  }

  /* EP: dispatch and combine all-to-alls in forward, both again in backward */
  double ep_f = 0, ep_b = 0;
  if (moe && g->ep > 1) {
    double bytes = (g->sp ? T / t : T) * k * h * cm->act_bytes;
    double a2a = cm_coll_best(cm, CM_ALL_TO_ALL, bytes, &g->ep_pl, NULL);
    ep_f = 2 * a2a;
    ep_b = 2 * a2a;
  }

  L->tp_bytes = g->tp > 1 ? act : 0;
  L->cp_step_bytes = g->cp > 1 ? 2.0 * b * (s / c) * kv * dh / t * cm->act_bytes : 0;
  L->ep_bytes = moe && g->ep > 1 ? (g->sp ? T / t : T) * k * h * cm->act_bytes : 0;
  L->tp_fwd_s = tp_f;
  L->tp_bwd_s = tp_b;
  L->cp_fwd_s = cp_f;
  L->cp_bwd_s = cp_b;
  L->ep_fwd_s = ep_f;
  L->ep_bwd_s = ep_b;
  L->recomp_s = L->tp_recomp_s = L->ep_recomp_s = 0;
  if (g->recompute == SPEC_RECOMPUTE_FULL) {
    L->recomp_s = L->fwd_s;
    L->tp_recomp_s = tp_f;
    L->ep_recomp_s = ep_f;
    L->cp_bwd_s += cp_f;
  } else if (g->recompute == SPEC_RECOMPUTE_SELECTIVE) {
    L->recomp_s = attn_f;
  }

  /* activations kept for backward (bytes), Korthikanti et al. 2022 Sec. 4 generalised. With
   * fp8, Transformer Engine's Linear keeps the fp8-cast input of each GEMM (or its fp8
   * transpose) for the weight gradient instead of the bf16 input: 1 byte per element (gin) */
  double ab = cm->act_bytes, mask = drop ? 1.0 : 0.0;
  double gin = m->dtype == SPEC_DTYPE_FP8 ? 1.0 : ab;
  /* inputs of LN1 and LN2 (bf16), of QKV and FC1 (GEMM inputs), and the two dropout masks,
   * on the replicated tokens */
  double replicated = 2.0 * (ab + gin) * h * Tn + 2.0 * mask * h * Tn;
  double qkv_out = ab * T * (a + 2 * kv) * dh / t;
  /* the projection's input; flash attention keeps the same tensor (its output) in bf16 for
   * its own backward, beside the GEMM's fp8 copy */
  double proj_in = (gin + (p->flash_attention && gin != ab ? ab : 0)) * T * a * dh / t;
  double mlp = mlp_tokens * (ab * (swiglu ? 2 * f : f) / t + gin * f / t); /* act-fn in, FC2 in */
  double scores = p->flash_attention ? 4.0 * heads * (s / c) /* log-sum-exp, fp32 */
                                     : heads * (s / c) * s * (drop ? 5.0 : 2.0);
  double full = replicated + qkv_out + proj_in + mlp + scores;
  if (moe) full += T * k * h * ab; /* routed tokens kept for the expert backward */
  double input = ab * h * Tn;
  switch (g->recompute) {
  case SPEC_RECOMPUTE_FULL: L->act_bytes = input; break;
  case SPEC_RECOMPUTE_SELECTIVE: L->act_bytes = p->flash_attention ? full : full - scores; break;
  default: L->act_bytes = full; break;
  }
  /* backward of one layer holds its gradients beside the activations; with full recompute
   * the whole layer is rebuilt first */
  double grads = 2.0 * ab * mlp_tokens * (swiglu ? 2 * f : f) / t;
  L->work_bytes = (g->recompute == SPEC_RECOMPUTE_FULL ? full : 0) + grads;
}

void cm__embed_cost(const cm_model *cm, const cm__cfg *g, double *fwd_s, double *bwd_s,
                    double *mem_bytes) {
  double T = (double)g->mbs * cm->m.seq_len / g->cp, h = cm->m.hidden;
  double act = T * h * cm->act_bytes;
  double comm = 0;
  if (g->tp > 1) /* vocab-parallel embedding: partial lookups are summed over TP */
    comm = cm_coll_best(cm, g->sp ? CM_REDUCE_SCATTER : CM_ALL_REDUCE, act, &g->tp_pl, NULL);
  *fwd_s = cm__mem_time(cm, 2 * act + (cm->p.dropout ? 3 * act : 0)) + comm;
  *bwd_s = cm__mem_time(cm, 4 * act);
  *mem_bytes = act * (g->sp ? 1.0 / g->tp : 1.0);
}

void cm__head_cost(const cm_model *cm, const cm__cfg *g, double *fwd_s, double *bwd_s,
                   double *mem_bytes) {
  double t = g->tp, T = (double)g->mbs * cm->m.seq_len / g->cp, h = cm->m.hidden;
  double V = cm->m.vocab, Tn = g->sp ? T / t : T;
  double act = T * h * cm->act_bytes, logits = T * V / t;
  gemm3 head = gemm_fb(cm, T, V / t, h, 1);
  double norm = cm__mem_time(cm, 4.0 * h * Tn);
  double ce_f = cm__mem_time(cm, 14.0 * logits), ce_b = cm__mem_time(cm, 10.0 * logits);
  double comm_f = 0, comm_b = 0;
  if (g->tp > 1) {
    comm_f = 3 * cm_coll_best(cm, CM_ALL_REDUCE, 4.0 * T, &g->tp_pl, NULL); /* max, sum, target */
    if (g->sp) {
      comm_f += cm_coll_best(cm, CM_ALL_GATHER, act, &g->tp_pl, NULL);
      comm_b = cm_coll_best(cm, CM_REDUCE_SCATTER, act, &g->tp_pl, NULL);
    } else {
      comm_b = cm_coll_best(cm, CM_ALL_REDUCE, act, &g->tp_pl, NULL);
    }
  }
  *fwd_s = norm + head.fwd + ce_f + comm_f;
  *bwd_s = 2 * norm + head.bwd + ce_b + comm_b;
  *mem_bytes = logits * (cm->act_bytes + 4.0) + act; /* bf16 and fp32 logits, head input */
}
