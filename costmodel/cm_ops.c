/* The ops of one rank for one microbatch, in Megatron-LM's order, with the shapes that
 * cm__layer_cost, cm__embed_cost and cm__head_cost price: the backend lowers plans to these,
 * so what runs is what was scored. Byte counts of memory-bound ops are those of the cost
 * model (two norms, two bias-dropout-residuals, the activation function, MoE permutes). */
#include <string.h>

#include "cm_int.h"

typedef struct ops {
  cm_lop *o;
  int n;
  int recompute; /* what is added now is recomputation */
} ops;

static void put(ops *L, cm_lop op) {
  if (L->n >= CM_LOPS_MAX) return; /* cannot happen: a part has fewer than 40 ops */
  op.recompute = op.recompute || L->recompute;
  L->o[L->n++] = op;
}

static void gemm(ops *L, const char *name, double m, double n, double k, double batch) {
  put(L, (cm_lop){.kind = CM_LOP_GEMM, .name = name, .m = m, .n = n, .k = k, .batch = batch});
}

/* The two backward products of a forward GEMM m x n x k: input gradient and weight gradient. */
static void gemm_bwd(ops *L, const char *name, double m, double n, double k, double batch) {
  gemm(L, name, m, k, n, batch);
  gemm(L, name, k, n, m, batch);
}

static void mem(ops *L, const char *name, double bytes) {
  put(L, (cm_lop){.kind = CM_LOP_MEM, .name = name, .bytes = bytes});
}

static void coll(ops *L, const char *name, spec_grp g, cm_coll c, double bytes) {
  put(L, (cm_lop){.kind = CM_LOP_COLL, .name = name, .group = g, .coll = c, .bytes = bytes});
}

/* Shapes of a layer on one rank. */
typedef struct shape {
  double T, Tn, h, t, a, kv, dh, f, b, s, c;
  double E, k, ep, per_expert, local, mlp_tokens;
  int swiglu, drop, moe, sp, tp, cp, flash;
} shape;

static shape layer_shape(const cm_model *cm, int tp, int cp, int ep, int mbs, int sp) {
  const spec_model *m = &cm->m;
  shape S;
  memset(&S, 0, sizeof S);
  S.t = tp, S.c = cp, S.b = mbs, S.s = m->seq_len, S.h = m->hidden;
  S.a = m->heads, S.kv = m->kv_heads, S.dh = cm->dh, S.f = m->ffn_hidden;
  S.T = S.b * S.s / S.c;
  S.sp = sp && tp > 1, S.tp = tp, S.cp = cp;
  S.Tn = S.sp ? S.T / S.t : S.T;
  S.swiglu = m->ffn == SPEC_FFN_SWIGLU, S.drop = cm->p.dropout, S.flash = cm->p.flash_attention;
  S.moe = m->experts > 0, S.E = m->experts, S.k = m->top_k, S.ep = ep;
  S.mlp_tokens = S.T;
  if (S.moe) {
    S.per_expert = S.T * S.k * ep / S.E, S.local = S.E / ep;
    S.mlp_tokens = S.T * S.k;
  }
  return S;
}

/* TP entry of a block (Megatron's f: identity forward, all-reduce backward; with SP an
 * all-gather forward, reduce-scatter backward) and exit (g: the reverse). */
static void tp_enter(ops *L, const shape *S, int fwd, double act) {
  if (S->tp <= 1) return;
  if (S->sp) coll(L, "tp", SPEC_GRP_TP, fwd ? CM_ALL_GATHER : CM_REDUCE_SCATTER, act);
  else if (!fwd) coll(L, "tp", SPEC_GRP_TP, CM_ALL_REDUCE, act);
}

static void tp_exit(ops *L, const shape *S, int fwd, double act) {
  if (S->tp <= 1) return;
  if (S->sp) coll(L, "tp", SPEC_GRP_TP, fwd ? CM_REDUCE_SCATTER : CM_ALL_GATHER, act);
  else if (fwd) coll(L, "tp", SPEC_GRP_TP, CM_ALL_REDUCE, act);
}

static void attention_fwd(ops *L, const cm_model *cm, const shape *S) {
  double kvb = 2.0 * S->b * (S->s / S->c) * S->kv * S->dh / S->t * cm->act_bytes;
  for (int i = 1; i < S->cp; i++) coll(L, "cp", SPEC_GRP_CP, CM_SEND_RECV, kvb);
  put(L, (cm_lop){.kind = CM_LOP_ATTN, .name = "attn", .m = S->s / S->c, .n = S->s, .k = S->dh,
                  .batch = S->b * S->a / S->t, .causal = 1});
}

static void attention_bwd(ops *L, const cm_model *cm, const shape *S) {
  double kvb = 2.0 * S->b * (S->s / S->c) * S->kv * S->dh / S->t * cm->act_bytes;
  cm_lop at = {.kind = CM_LOP_ATTN, .name = "attn", .m = S->s / S->c, .n = S->s, .k = S->dh,
               .batch = S->b * S->a / S->t, .causal = 1, .backward = 1};
  put(L, at);
  put(L, at);
  /* flash attention recomputes the scores: one more product of the same size */
  if (S->flash)
    put(L, (cm_lop){.kind = CM_LOP_GEMM, .name = "attn", .m = S->s / S->c, .n = S->dh,
                    .k = S->s / 2, .batch = at.batch, .recompute = 1});
  for (int i = 1; i < S->cp; i++) coll(L, "cp", SPEC_GRP_CP, CM_SEND_RECV, 2 * kvb);
}

static void mlp(ops *L, const cm_model *cm, const shape *S, int fwd) {
  double f1 = (S->swiglu ? 2 * S->f : S->f) / S->t, act_fn = (S->swiglu ? 6.0 : 4.0) *
                                                               S->mlp_tokens * S->f / S->t;
  double a2a = S->moe && S->ep > 1 ? S->Tn * S->k * S->h * cm->act_bytes : 0;
  if (fwd) {
    if (S->moe) {
      gemm(L, "router", S->T, S->E, S->h, 1);
      mem(L, "permute", 4.0 * S->T * S->k * S->h);
      if (a2a > 0) coll(L, "dispatch", SPEC_GRP_EP, CM_ALL_TO_ALL, a2a);
      gemm(L, "fc1", S->per_expert, f1, S->h, S->local);
      mem(L, "act", act_fn);
      gemm(L, "fc2", S->per_expert, S->h, S->f / S->t, S->local);
      if (a2a > 0) coll(L, "combine", SPEC_GRP_EP, CM_ALL_TO_ALL, a2a);
      mem(L, "unpermute", 4.0 * S->T * S->k * S->h);
    } else {
      gemm(L, "fc1", S->T, f1, S->h, 1);
      mem(L, "act", act_fn);
      gemm(L, "fc2", S->T, S->h, S->f / S->t, 1);
    }
    return;
  }
  if (S->moe) {
    mem(L, "unpermute", 8.0 * S->T * S->k * S->h);
    if (a2a > 0) coll(L, "combine", SPEC_GRP_EP, CM_ALL_TO_ALL, a2a);
    gemm_bwd(L, "fc2", S->per_expert, S->h, S->f / S->t, S->local);
    mem(L, "act", 2 * act_fn);
    gemm_bwd(L, "fc1", S->per_expert, f1, S->h, S->local);
    if (a2a > 0) coll(L, "dispatch", SPEC_GRP_EP, CM_ALL_TO_ALL, a2a);
    mem(L, "permute", 8.0 * S->T * S->k * S->h);
    gemm_bwd(L, "router", S->T, S->E, S->h, 1);
  } else {
    gemm_bwd(L, "fc2", S->T, S->h, S->f / S->t, 1);
    mem(L, "act", 2 * act_fn);
    gemm_bwd(L, "fc1", S->T, f1, S->h, 1);
  }
}

static void layer_fwd(ops *L, const cm_model *cm, const shape *S) {
  double act = S->T * S->h * cm->act_bytes, norm = 4.0 * S->h * S->Tn;
  double bda = (S->drop ? 7.0 : 6.0) * S->h * S->Tn;
  mem(L, "norm1", norm);
  tp_enter(L, S, 1, act);
  gemm(L, "qkv", S->T, (S->a + 2 * S->kv) * S->dh / S->t, S->h, 1);
  attention_fwd(L, cm, S);
  gemm(L, "proj", S->T, S->h, S->a * S->dh / S->t, 1);
  tp_exit(L, S, 1, act);
  mem(L, "bda1", bda);
  mem(L, "norm2", norm);
  tp_enter(L, S, 1, act);
  mlp(L, cm, S, 1);
  tp_exit(L, S, 1, act);
  mem(L, "bda2", bda);
}

static void layer_bwd(ops *L, const cm_model *cm, const shape *S, spec_recompute rc) {
  double act = S->T * S->h * cm->act_bytes, norm = 8.0 * S->h * S->Tn;
  double bda = 2.0 * (S->drop ? 7.0 : 6.0) * S->h * S->Tn;
  L->recompute = 1;
  if (rc == SPEC_RECOMPUTE_FULL) layer_fwd(L, cm, S);
  else if (rc == SPEC_RECOMPUTE_SELECTIVE) attention_fwd(L, cm, S);
  L->recompute = 0;
  mem(L, "bda2", bda);
  tp_exit(L, S, 0, act);
  mlp(L, cm, S, 0);
  tp_enter(L, S, 0, act);
  mem(L, "norm2", norm);
  mem(L, "bda1", bda);
  tp_exit(L, S, 0, act);
  gemm_bwd(L, "proj", S->T, S->h, S->a * S->dh / S->t, 1);
  attention_bwd(L, cm, S);
  gemm_bwd(L, "qkv", S->T, (S->a + 2 * S->kv) * S->dh / S->t, S->h, 1);
  tp_enter(L, S, 0, act);
  mem(L, "norm1", norm);
}

/* Embedding: a vocab-parallel lookup summed over TP (cm__embed_cost). */
static void embed(ops *L, const cm_model *cm, const shape *S, int fwd) {
  double act = S->T * S->h * cm->act_bytes;
  if (fwd) {
    mem(L, "embed", 2 * act + (S->drop ? 3 * act : 0));
    if (S->tp > 1) coll(L, "tp", SPEC_GRP_TP, S->sp ? CM_REDUCE_SCATTER : CM_ALL_REDUCE, act);
  } else {
    mem(L, "embed", 4 * act);
  }
}

/* Final norm, LM head and cross-entropy (cm__head_cost). */
static void head(ops *L, const cm_model *cm, const shape *S, int fwd) {
  double act = S->T * S->h * cm->act_bytes, V = cm->m.vocab, logits = S->T * V / S->t;
  double norm = 4.0 * S->h * S->Tn;
  if (fwd) {
    mem(L, "norm", norm);
    if (S->tp > 1 && S->sp) coll(L, "tp", SPEC_GRP_TP, CM_ALL_GATHER, act);
    gemm(L, "head", S->T, V / S->t, S->h, 1);
    for (int i = 0; i < 3 && S->tp > 1; i++) /* max, sum, target logit */
      coll(L, "loss", SPEC_GRP_TP, CM_ALL_REDUCE, 4.0 * S->T);
    mem(L, "loss", 14.0 * logits);
  } else {
    mem(L, "loss", 10.0 * logits);
    gemm_bwd(L, "head", S->T, V / S->t, S->h, 1);
    if (S->tp > 1)
      coll(L, "tp", SPEC_GRP_TP, S->sp ? CM_REDUCE_SCATTER : CM_ALL_REDUCE, act);
    mem(L, "norm", 2 * norm);
  }
}

int cm_part_ops(const cm_model *cm, cm_part part, int tp, int cp, int ep, int mbs, int sp,
                spec_recompute rc, int fwd, cm_lop *out) {
  ops L = {out, 0, 0};
  shape S = layer_shape(cm, tp, cp, ep, mbs, sp);
  if (part == CM_PART_EMBED) embed(&L, cm, &S, fwd);
  else if (part == CM_PART_HEAD) head(&L, cm, &S, fwd);
  else if (fwd) layer_fwd(&L, cm, &S);
  else layer_bwd(&L, cm, &S, rc);
  return L.n;
}

double cm_lop_flops(const cm_lop *op) {
  if (op->kind == CM_LOP_GEMM) return 2.0 * op->m * op->n * op->k * op->batch;
  if (op->kind == CM_LOP_ATTN) /* scores and output products; causal keeps half */
    return 2.0 * 2.0 * op->m * op->n * op->k * op->batch * (op->causal ? 0.5 : 1.0);
  return 0;
}

/* Attention FLOPs at the forward's or the backward's efficiency, plus one kernel. */
static double attn_s(const cm_model *cm, double flops, int backward) {
  return flops / (cm->peak_bf16_flops * (backward ? cm->p.attn_bwd_eff : cm->p.attn_fwd_eff)) +
         cm->p.kernel_us * 1e-6;
}

double cm_attn_time(const cm_model *cm, double m, double n, double k, double batch, int causal,
                    int backward) {
  cm_lop a = {.kind = CM_LOP_ATTN, .m = m, .n = n, .k = k, .batch = batch, .causal = causal};
  return attn_s(cm, cm_lop_flops(&a) * (backward ? 2.5 : 1.0), backward);
}

double cm_lop_time(const cm_model *cm, const cm_lop *op) {
  switch (op->kind) {
  case CM_LOP_GEMM: return cm__gemm(cm, op->m, op->n, op->k, op->batch, cm->peak_flops, NULL);
  case CM_LOP_ATTN: return attn_s(cm, cm_lop_flops(op), op->backward);
  case CM_LOP_MEM: return cm__mem_time(cm, op->bytes);
  default: return 0;
  }
}
