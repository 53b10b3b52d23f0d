/* The cost model handle, its default parameters, and the evaluation of a plan: per-stage
 * times per microbatch from the layer costs, the pipeline schedule, the data-parallel tail
 * (gradient reduction, optimizer step, parameter gather) and memory per GPU. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cm_int.h"

void cm_params_default(const spec_model *m, cm_params *p) {
  memset(p, 0, sizeof *p);
  /* GEMM: 0.84 of peak for an ideal shape puts 8192^3 bf16 on an H200 at 80% (docs/models.md:
   * 78-81% measured with cuBLAS); cuBLAS's large tiles are 128x256 */
  p->gemm_eff = 0.84;
  p->gemm_tile_m = 128;
  p->gemm_tile_n = 256;
  p->gemm_k_half = 128;
  p->kernel_us = 2.0;
  /* FlashAttention-2 (Dao 2023), causal, head dim 128, A100: ~55% of peak forward, ~45%
   * backward (counting the backward as 2.5 forward passes, as its benchmarks do) */
  p->attn_fwd_eff = 0.55;
  p->attn_bwd_eff = 0.45;
  /* device-to-device copy: 4.3 of 4.8 TB/s on an H200 (measured; docs/models.md) */
  p->hbm_eff = 0.9;
  cm__coll_defaults(p);
  /* memory: Megatron keeps fp32 main gradients and reduces them in fp32 */
  p->mem_overhead_gib = 3.0;
  p->grad_bytes = 4;
  p->grad_comm_bytes = 4;
  /* today's Megatron-Core */
  p->flash_attention = 1;
  p->dropout = m ? m->ffn != SPEC_FFN_SWIGLU : 1; /* GPT-era models train with dropout 0.1 */
  p->overlap_grad_reduce = 1;
  p->overlap_param_gather = 1;
  p->tp_comm_overlap = 0;
  p->pp_scatter_gather = 1;
  p->pp_p2p_per_mb = 2;
  /* ZeRO-3: DeepSpeed v0.3.13-v0.5.0 defaults (deepspeed/runtime/zero/constants.py) */
  p->z3_persist_numel = 1e5;
  p->z3_prefetch_numel = 5e7;
  p->z3_live_numel = 1e9;
  p->z3_reuse_numel = 1e9;
  p->z3_bucket_numel = 5e8;
  /* today's DeepSpeed: event waits, gathers into one flat buffer, contiguous_gradients on
   * (reduce-scatter); zero3.sync=1,zero3.grad_allreduce=1 for DeepSpeed v0.3 (2021) */
  p->z3_sync = 0;
  p->z3_prefetch = 1;
  p->z3_grad_allreduce = 0;
  /* v0.3's loop over the ranks before each gather: a narrow view from Python (an eager view
   * op costs 3.3-3.4 us in PyTorch's operator micro-benchmark, pytorch/pytorch#32194) and a
   * call of torch.distributed.get_rank per rank */
  p->z3_rank_us = 4.0;
}

const spec_model *cm_model_spec(const cm_model *cm) { return &cm->m; }
const spec_cluster *cm_model_cluster(const cm_model *cm) { return &cm->c; }
const cm_params *cm_model_params(const cm_model *cm) { return &cm->p; }

int cm_model_create(const spec_model *m, const spec_cluster *c, const cm_params *p,
                    cm_model **out, pp_err *err) {
  *out = NULL;
  if (spec_model_validate(m, err) || spec_cluster_validate(c, err) ||
      spec_pair_validate(m, c, err))
    return err->code;
  cm_model *cm = calloc(1, sizeof *cm);
  if (cm) cm->cache = calloc(1, sizeof *cm->cache);
  if (!cm || !cm->cache) {
    free(cm);
    return pp_err_set(err, PP_NOMEM, "cost model: out of memory");
  }
  cm->m = *m;
  cm->c = *c;
  if (p)
    cm->p = *p;
  else
    cm_params_default(m, &cm->p);
  const spec_gpu *g = &c->gpu;
  cm->peak_bf16_flops = g->bf16_tflops * 1e12;
  cm->peak_flops = m->dtype == SPEC_DTYPE_FP8 ? g->fp8_tflops * 1e12 : cm->peak_bf16_flops;
  cm->hbm_bps = g->hbm_tbps * 1e12 * cm->p.hbm_eff;
  cm->act_bytes = 2;
  cm->gpu_bytes = g->hbm_gib * CM_GIB;
  cm->dh = m->hidden / m->heads;
  double h = m->hidden, f = m->ffn_hidden, dh = cm->dh, a = m->heads, kv = m->kv_heads;
  double mats = m->ffn == SPEC_FFN_SWIGLU ? 3 : 2;
  double attn = h * (a + 2 * kv) * dh + a * dh * h + (m->ffn == SPEC_FFN_SWIGLU ? 2 : 4) * h;
  double mlp = mats * h * f;
  if (m->experts) {
    cm->layer_dense_params = attn + h * m->experts;
    cm->layer_expert_params = m->experts * mlp;
  } else {
    cm->layer_dense_params = attn + mlp;
    cm->layer_expert_params = 0;
  }
  cm->layer_params = cm->layer_dense_params + cm->layer_expert_params;
  cm->embed_params = (double)m->vocab * h;
  cm->head_params = (double)m->vocab * h; /* a tied head still holds a copy on the last stage */
  double active = attn + (m->experts ? m->top_k * mlp + h * m->experts : mlp);
  double attn_fwd = 2.0 * m->seq_len * h; /* causal QK^T and PV per token per layer */
  cm->flops_per_token = 6.0 * (m->layers * active + (double)m->vocab * h) + 3.0 * attn_fwd * m->layers;
  cm->recompute_full_per_token = m->layers * (2.0 * active + attn_fwd);
  cm->recompute_selective_per_token = m->layers * attn_fwd;
  cm->gpn = c->gpus_per_node;
  cm->dom = c->nvlink.domain_gpus;
  cm->leaf_nodes = 1 << 30; /* no fat tree: no spine */
  if (c->network.kind == SPEC_NET_FAT_TREE) {
    int half = c->network.switch_radix / 2;
    cm->leaf_nodes = c->network.rail_optimized ? half : half / c->network.nics_per_node;
    if (cm->leaf_nodes < 1) cm->leaf_nodes = 1;
  }
  *out = cm;
  return PP_OK;
}

void cm_model_destroy(cm_model *cm) {
  if (!cm) return;
  free(cm->cache);
  free(cm);
}

/* The layer, embedding and head costs of a configuration, from the cache when the same
 * (tp, cp, ep, mbs, sp, recompute) was seen before: they depend on nothing else. */
static const cm__layer_entry *layer_costs(const cm_model *cm, const cm__cfg *g) {
  unsigned h = (unsigned)g->tp * 2654435761u ^ (unsigned)g->cp * 40503u ^ (unsigned)g->ep * 9973u ^
               (unsigned)g->mbs * 131u ^ (unsigned)g->sp * 7u ^ (unsigned)g->recompute * 3u;
  cm__layer_entry *e = &cm->cache->layer[h % CM__LAYER_CACHE];
  if (e->valid && e->tp == g->tp && e->cp == g->cp && e->ep == g->ep && e->mbs == g->mbs &&
      e->sp == g->sp && e->recompute == (int)g->recompute)
    return e;
  cm__layer_cost(cm, g, &e->layer);
  cm__embed_cost(cm, g, &e->emb_f, &e->emb_b, &e->emb_mem);
  cm__head_cost(cm, g, &e->head_f, &e->head_b, &e->head_mem);
  e->valid = 1, e->tp = g->tp, e->cp = g->cp, e->ep = g->ep, e->mbs = g->mbs, e->sp = g->sp;
  e->recompute = (int)g->recompute;
  return e;
}

void cm_dp_tail(const cm_model *cm, const cm_layer_profile *pr, const int *layers, int r, int P,
                int nvs, int dpcp, int ep, int zero, cm_tail *out) {
  double params = 0, expert = 0;
  for (int j = r; j < nvs; j += P) {
    params += layers[j] * pr->layer_params;
    expert += layers[j] * pr->layer_expert_params;
    if (j == 0) params += pr->embed_params;
    if (j == nvs - 1 && !(j == 0 && cm->m.tied_embeddings)) params += pr->head_params;
  }
  double dense = params - expert, gb = cm->p.grad_comm_bytes;
  out->reduce = zero ? CM_REDUCE_SCATTER : CM_ALL_REDUCE;
  out->dense_grad_bytes = dense * gb;
  out->expert_grad_bytes = expert * gb;
  out->shard_params = zero ? dense / dpcp + expert / ((double)dpcp / ep) : params;
  out->gather_bytes = zero ? dense * cm->act_bytes : 0;
}

double cm_optimizer_time(const cm_model *cm, double params) {
  return cm__mem_time(cm, CM_ADAM_BYTES_PER_PARAM * params);
}

static void make_cfg(const cm_model *cm, cm__cfg *g, int tp, int cp, int dp, int ep, int mbs,
                     int sp, spec_recompute rc);

int cm_layer_profile_get(cm_model *cm, int tp, int cp, int ep, int dp, int mbs, int sp,
                         spec_recompute rc, cm_layer_profile *o) {
  memset(o, 0, sizeof *o);
  if (tp < 1 || cp < 1 || ep < 1 || dp < 1 || mbs < 1 || (dp * cp) % ep) return PP_PLAN;
  cm__cfg g;
  make_cfg(cm, &g, tp, cp, dp, ep, mbs, sp && tp > 1, rc);
  const cm__layer_entry *e = layer_costs(cm, &g);
  const cm__layer *L = &e->layer;
  o->fwd_s = L->fwd_s, o->bwd_s = L->bwd_s, o->recomp_s = L->recomp_s;
  o->tp_fwd_s = L->tp_fwd_s, o->tp_bwd_s = L->tp_bwd_s, o->tp_recomp_s = L->tp_recomp_s;
  o->cp_fwd_s = L->cp_fwd_s, o->cp_bwd_s = L->cp_bwd_s;
  o->ep_fwd_s = L->ep_fwd_s, o->ep_bwd_s = L->ep_bwd_s, o->ep_recomp_s = L->ep_recomp_s;
  o->tp_sp = g.sp;
  o->tp_bytes = L->tp_bytes;
  o->tp_calls_fwd = o->tp_calls_bwd = tp > 1 ? 2 : 0;
  o->tp_calls_recomp = rc == SPEC_RECOMPUTE_FULL ? o->tp_calls_fwd : 0;
  o->cp_steps = cp - 1;
  o->cp_step_bytes = L->cp_step_bytes;
  o->ep_bytes = L->ep_bytes;
  o->ep_calls_fwd = o->ep_calls_bwd = L->ep_bytes > 0 ? 2 : 0;
  o->ep_calls_recomp = rc == SPEC_RECOMPUTE_FULL ? o->ep_calls_fwd : 0;
  o->embed_fwd_s = e->emb_f, o->embed_bwd_s = e->emb_b;
  o->head_fwd_s = e->head_f, o->head_bwd_s = e->head_b;
  o->p2p_bytes = (double)mbs * cm->m.seq_len / cp * cm->m.hidden * cm->act_bytes /
                 (cm->p.pp_scatter_gather ? tp : 1);
  o->layer_expert_params = cm->layer_expert_params / ((double)tp * ep);
  o->layer_params = cm->layer_dense_params / tp + o->layer_expert_params;
  o->embed_params = cm->embed_params / tp;
  o->head_params = cm->head_params / tp;
  return PP_OK;
}

void cm_throughput(const cm_model *cm, const spec_plan *p, double iter_time_s, cm_result *out) {
  const spec_model *m = &cm->m;
  double tokens = (double)p->gbs * m->seq_len;
  spec_recompute rc = p->nstages == 0 ? p->recompute : p->stages[0].recompute;
  out->tokens_per_s = tokens / iter_time_s;
  out->model_flops = tokens * cm->flops_per_token;
  out->hw_flops = out->model_flops +
                  tokens * (rc == SPEC_RECOMPUTE_FULL        ? cm->recompute_full_per_token
                            : rc == SPEC_RECOMPUTE_SELECTIVE ? cm->recompute_selective_per_token
                                                             : 0);
  double l = m->layers, h = m->hidden, s = m->seq_len;
  double k = rc == SPEC_RECOMPUTE_FULL ? 96 : 72;
  out->sc21_flops = k * p->gbs * s * l * h * h * (1 + s / (6 * h) + m->vocab / (16 * l * h));
  double per_gpu = iter_time_s * cm->c.gpus;
  out->model_tflops_per_gpu = out->model_flops / per_gpu / 1e12;
  out->sc21_tflops_per_gpu = out->sc21_flops / per_gpu / 1e12;
  out->mfu = out->model_flops / per_gpu / cm->peak_bf16_flops;
  out->hfu = out->hw_flops / per_gpu / cm->peak_bf16_flops;
}

/* ---- evaluation ------------------------------------------------------------------------------ */

/* One pipeline rank (or stage of a non-uniform plan) as the schedule sees it. */
typedef struct rank_cost {
  double comp, tp, cp, ep, dp; /* per microbatch, forward + backward (+ recompute) */
  double bwd;                  /* backward part of the above (slack for the DP tail) */
  double params;               /* dense parameters per GPU */
  double expert_params;        /* expert parameters per GPU */
  double layer_params;         /* parameters of its transformer layers per GPU (no embedding) */
  double act_bytes;            /* activations of one microbatch over all its layers */
  double other_bytes;          /* working set, logits, embedding output */
  double zero3_gather;         /* ZeRO-3: gathered parameters (and gradients) held at once */
  int layers;                  /* transformer layers on the rank (ZeRO-3's module sequence) */
  const cm_stage_coef *co;     /* its configuration's coefficients (degrees, DP placement) */
} rank_cost;

static double rc_total(const rank_cost *r) { return r->comp + r->tp + r->cp + r->ep + r->dp; }

/* ZeRO-3's gathered parameters held at once on a GPU of configuration g, bytes. DeepSpeed
 * gathers per submodule (each Linear) and releases it after use
 * (partitioned_param_coordinator.py): prefetching stops once the live parameters would pass
 * stage3_max_live_parameters, so it holds the largest weight w and, while w is under the
 * limit, the next one; in backward the module's unreduced gradient (w) besides. */
static double zero3_gather_bytes(const cm_model *cm, const cm__cfg *g) {
  const spec_model *m = &cm->m;
  double live = cm->p.z3_live_numel;
  double h = m->hidden, dh = cm->dh, f = m->ffn_hidden;
  double w[] = {h * (m->heads + 2.0 * m->kv_heads) * dh, m->heads * dh * h,
                h * f * (m->ffn == SPEC_FFN_SWIGLU ? 2 : 1), f * h};
  double big = 0;
  for (size_t i = 0; i < sizeof w / sizeof w[0]; i++)
    if (w[i] / g->tp > big) big = w[i] / g->tp;
  double held = big >= live ? big : fmin(2 * big, live + big);
  return (held + big) * cm->act_bytes;
}

/* The coefficients of a configuration whose layer, embedding and head costs are e. */
static void coef_from(const cm_model *cm, const cm__cfg *g, const cm__layer_entry *e,
                      cm_stage_coef *s) {
  const cm__layer *L = &e->layer;
  memset(s, 0, sizeof *s);
  s->cfg = (cm_stage_cfg){g->tp, g->cp, g->dp, g->ep, g->mbs, g->sp, g->recompute};
  s->comp_s = L->fwd_s + L->bwd_s + L->recomp_s;
  s->tp_s = L->tp_fwd_s + L->tp_bwd_s + L->tp_recomp_s;
  s->cp_s = L->cp_fwd_s + L->cp_bwd_s;
  s->ep_s = L->ep_fwd_s + L->ep_bwd_s + L->ep_recomp_s;
  s->bwd_s = L->bwd_s + L->recomp_s + L->tp_bwd_s + L->tp_recomp_s + L->cp_bwd_s + L->ep_bwd_s +
             L->ep_recomp_s;
  s->params = cm->layer_dense_params / g->tp;
  s->expert_params = cm->layer_expert_params / ((double)g->tp * g->ep);
  s->act_bytes = L->act_bytes;
  s->work_bytes = L->work_bytes;
  s->zero3_gather_bytes = zero3_gather_bytes(cm, g);
  s->recomp_s = L->recomp_s + L->tp_recomp_s + L->ep_recomp_s;
  s->embed_comp_s = e->emb_f + e->emb_b;
  s->embed_bwd_s = e->emb_b;
  s->embed_params = cm->embed_params / g->tp;
  s->embed_mem_bytes = e->emb_mem;
  s->head_comp_s = e->head_f + e->head_b;
  s->head_bwd_s = e->head_b;
  s->head_params = cm->head_params / g->tp;
  s->head_mem_bytes = e->head_mem;
  s->tp_pl = g->tp_pl, s->cp_pl = g->cp_pl, s->ep_pl = g->ep_pl;
  s->dp_pl = g->dp_pl, s->edp_pl = g->edp_pl;
}

/* Adds `layers` layers (and the embedding or the head) of a stage's coefficients to a rank:
 * the one place a rank's cost is assembled (cm_eval and cm_stage_time/memory). */
static void add_chunk(const cm_model *cm, const cm_stage_coef *s, int layers, int embed,
                      int head, rank_cost *r) {
  double n = layers;
  r->comp += n * s->comp_s;
  r->tp += n * s->tp_s;
  r->cp += n * s->cp_s;
  r->ep += n * s->ep_s;
  r->bwd += n * s->bwd_s;
  r->params += n * s->params;
  r->expert_params += n * s->expert_params;
  r->layer_params += n * (s->params + s->expert_params);
  r->act_bytes += n * s->act_bytes;
  if (s->work_bytes > r->other_bytes) r->other_bytes = s->work_bytes;
  r->zero3_gather = s->zero3_gather_bytes;
  r->layers += layers;
  if (embed) {
    r->comp += s->embed_comp_s;
    r->bwd += s->embed_bwd_s;
    r->params += s->embed_params;
    r->other_bytes += s->embed_mem_bytes;
  }
  if (head) {
    r->comp += s->head_comp_s;
    r->bwd += s->head_bwd_s;
    if (!(embed && cm->m.tied_embeddings)) r->params += s->head_params; /* own copy */
    r->other_bytes += s->head_mem_bytes;
  }
}

/* Where a uniform plan's groups sit: the groups of its first rank, by the layout's rule
 * (spec_grp_rules). Groups of one kind have one shape and tile the cluster, so they are placed
 * by count and stride, at the copy that spans the most NVLink domains and nodes (the one every
 * copy waits for; cm_place_group). (Non-uniform stages: cm_stage_coef_get, from their GPU
 * ids.) */
static void place_groups(const cm_model *cm, cm__cfg *g) {
  spec_grp_rule r[SPEC_NGRPS];
  spec_grp_rules(g->tp, g->cp, g->dp, g->ep, r);
  cm_place *pl[SPEC_NGRPS] = {[SPEC_GRP_TP] = &g->tp_pl, [SPEC_GRP_CP] = &g->cp_pl,
                              [SPEC_GRP_DP] = &g->dp_pl, [SPEC_GRP_EP] = &g->ep_pl,
                              [SPEC_GRP_EDP] = &g->edp_pl};
  for (int k = 0; k < SPEC_NGRPS; k++) cm_place_group(cm, r[k].count, r[k].stride, pl[k]);
}

static void make_cfg(const cm_model *cm, cm__cfg *g, int tp, int cp, int dp, int ep, int mbs,
                     int sp, spec_recompute rc) {
  g->tp = tp, g->cp = cp, g->dp = dp, g->ep = ep, g->mbs = mbs, g->sp = sp, g->recompute = rc;
  place_groups(cm, g);
}

/* Time of the data-parallel gradient reduction of one rank (and the parameter all-gather of
 * the distributed optimizer, returned apart). */
static void dp_times(const cm_model *cm, const rank_cost *r, int zero, double *reduce,
                     double *gather) {
  const cm_stage_coef *g = r->co;
  double gb = cm->p.grad_comm_bytes, ab = cm->act_bytes;
  *reduce = *gather = 0;
  if (zero == 0) {
    *reduce = cm_coll_best(cm, CM_ALL_REDUCE, r->params * gb, &g->dp_pl, NULL) +
              cm_coll_best(cm, CM_ALL_REDUCE, r->expert_params * gb, &g->edp_pl, NULL);
  } else {
    *reduce = cm_coll_best(cm, CM_REDUCE_SCATTER, r->params * gb, &g->dp_pl, NULL) +
              cm_coll_best(cm, CM_REDUCE_SCATTER, r->expert_params * gb, &g->edp_pl, NULL);
    *gather = cm_coll_best(cm, CM_ALL_GATHER, r->params * ab, &g->dp_pl, NULL) +
              cm_coll_best(cm, CM_ALL_GATHER, r->expert_params * ab, &g->edp_pl, NULL);
  }
}

/* Memory of one rank with `inflight` microbatches of activations (and `chunks_inflight`
 * chunk-microbatches for interleaving, 0 otherwise). */
static void rank_memory(const cm_model *cm, const rank_cost *r, int zero, double inflight_bytes,
                        cm_memory *mem) {
  const cm_params *p = &cm->p;
  double D = (double)r->co->cfg.dp * r->co->cfg.cp, E = D / r->co->cfg.ep;
  double P = r->params, X = r->expert_params;
  double w = 2.0 * (P + X), gr = p->grad_bytes * (P + X), opt = 12.0 * (P + X);
  if (zero >= 1) opt = 12.0 * (P / D + X / E);
  if (zero >= 2) gr = p->grad_bytes * (P / D + X / E);
  if (zero >= 3) w = 2.0 * (P / D + X / E);
  /* fp8 GEMMs on bf16 weights: Transformer Engine keeps an fp8 copy of each weight and its
   * transpose between microbatches; fp8 parameters replace the bf16 weight instead (1 B and
   * a 1 B transpose: the same 2 B) */
  else if (cm->m.dtype == SPEC_DTYPE_FP8 && !p->fp8_params) w += 2.0 * r->layer_params;
  mem->weights_gib = w / CM_GIB;
  mem->grads_gib = gr / CM_GIB;
  mem->optimizer_gib = opt / CM_GIB;
  mem->activations_gib = inflight_bytes / CM_GIB;
  mem->other_gib = (r->other_bytes + (zero >= 3 ? r->zero3_gather : 0)) / CM_GIB;
  mem->overhead_gib = p->mem_overhead_gib;
  mem->total_gib = mem->weights_gib + mem->grads_gib + mem->optimizer_gib +
                   mem->activations_gib + mem->other_gib + mem->overhead_gib;
}

/* ---- ZeRO-3 as DeepSpeed runs it -------------------------------------------------------------
 * Hooks on every module gather that module's parameters before its forward, again before its
 * recomputed forward and before its backward (unless stage3_max_reuse_distance keeps them),
 * prefetching the next parameters of the step's trace up to stage3_prefetch_bucket_size
 * elements; parameters under stage3_param_persistence_threshold stay whole. Gradients go to
 * buckets of reduce_bucket_size elements, reduced when the next gradient would overflow; the
 * last bucket after the backward. Collectives of one group run one after another on
 * ProcessGroupNCCL's stream. Every microbatch repeats all of it.
 * DeepSpeed v0.3.13-v0.5.0 (March-August 2021; deepspeed/runtime/zero/stage3.py,
 * partition_parameters.py), zero3.sync = 1: one all-gather per parameter into a list of n
 * views of a freshly zeroed buffer, made by a Python loop over the ranks (a narrow view and
 * get_rank each, zero3.rank_us) before the gather is launched; PyTorch copies the result out,
 * one copy kernel per rank, launched while the collective runs (the launches are taken as
 * hidden behind it; the copies' GPU time, kernel_us each, is on the stream); each
 * fetch and each gather launch synchronises the device, so a prefetched gather overlaps one
 * module's compute and no more; no prefetch while stage3_max_live_parameters elements are
 * gathered; gradient buckets all-reduced (contiguous_gradients off by default).
 * Today's DeepSpeed (partitioned_param_coordinator.py), zero3.sync = 0: gathers into one
 * buffer, modules wait on events, the host runs ahead; gradient buckets reduce-scattered.
 * zero3.prefetch = 0: nothing is prefetched or kept for reuse, every gather starts when its
 * module does. So DeepSpeed ran from v0.3.13 to v0.5.10: the root module's own pre-forward
 * hook increments the step before the hook that resets it runs (both are registered on the
 * root, that one first), so every later module's step is off by one against the trace, and
 * get_params_to_prefetch and the reuse distance report "Tracing failed" (DeepSpeed issue
 * #1069, May 2021; the coordinator was rewritten in v0.6.0). */

#define Z3_UNITS CM_Z3_UNITS

/* The parameters gathered for one layer, in forward order, per rank. */
typedef struct z3_unit {
  double numel;    /* elements of one parameter */
  int count;       /* parameters of this shape (local experts), gathered one after another */
  double share;    /* its part of the layer's compute */
  double gather_s; /* the all-gathers of all `count` of them, on the stream */
  double host_s;   /* the host before launching them: the loop over the ranks (v0.3) */
} z3_unit;

/* One module of a layer's pattern: forward, recomputed forward or backward of a unit. */
typedef struct z3_mod {
  double c;        /* its compute */
  double gather_s, host_s, numel; /* the gather it needs (0 when its parameters are there) */
  double grad;     /* gradient elements its backward hands to the buckets */
  int phase;       /* 0 forward, 1 recomputed forward, 2 backward */
  int kept;        /* recomputed forward or backward of a unit kept in between */
  int unit;        /* its unit */
} z3_mod;

typedef struct z3_step {
  const cm_model *cm;
  const cm_stage_coef *co;
  z3_unit u[Z3_UNITS];
  z3_mod pat[3 * Z3_UNITS]; /* one layer's forward modules, then its backward ones */
  int nu, nb;               /* forward and backward modules per layer */
  long total;               /* modules of one microbatch */
  int layers;
  cm_z3_mod *mods;          /* the schedule (cm_z3_sched.mods) */
  double *red_s;            /* per module: the time of the bucket reduced at its start */
} z3_step;

/* One all-gather of `numel` fp16/bf16 elements as DeepSpeed issues it, on the stream: today,
 * the collective into one flat buffer; in v0.3 also a zeroed output and PyTorch's copy of each
 * rank's part out of its own flat buffer (the output is a list of n views; one kernel each):
 * the seconds besides the collective. */
static double z3_gather_extra(const cm_model *cm, double numel, const cm_place *pl) {
  if (!cm->p.z3_sync) return 0;
  return pl->ranks * cm->p.kernel_us * 1e-6 + cm__mem_time(cm, 3 * numel * cm->act_bytes);
}

static double z3_gather_time(const cm_model *cm, double numel, const cm_place *pl) {
  if (pl->ranks <= 1) return 0;
  double S = numel * cm->act_bytes;
  if (!cm->p.z3_sync) return cm_coll_best(cm, CM_ALL_GATHER, S, pl, NULL); /* in place */
  return cm_coll_best(cm, CM_ALL_GATHER, S, pl, NULL) + z3_gather_extra(cm, numel, pl);
}

/* One gradient bucket of `numel` elements: flattened, scaled, reduced, copied back (the
 * copies: the seconds besides the collective). */
static double z3_reduce_extra(const cm_model *cm, double numel) {
  return cm__mem_time(cm, (cm->p.z3_grad_allreduce ? 6 : 4) * numel * cm->p.grad_comm_bytes);
}

static cm_coll z3_reduce_coll(const cm_model *cm) {
  return cm->p.z3_grad_allreduce ? CM_ALL_REDUCE : CM_REDUCE_SCATTER;
}

static double z3_reduce_time(const cm_model *cm, double numel, const cm_place *pl) {
  if (pl->ranks <= 1 || numel <= 0) return 0;
  double S = numel * cm->p.grad_comm_bytes;
  return cm_coll_best(cm, z3_reduce_coll(cm), S, pl, NULL) + z3_reduce_extra(cm, numel);
}

/* Whether unit i of a layer is an expert's (gathered over the expert-data-parallel group). */
static int z3_expert(const cm_model *cm, int i) { return cm->m.experts && i >= 3; }

/* Megatron's layer: QKV, projection, fc1 (gate and up fused under SwiGLU), fc2; MoE: the
 * router and each local expert's fc1 and fc2, weighted by the tokens they see. */
static int z3_units(const cm_model *cm, const cm_stage_coef *s, z3_unit *u) {
  const spec_model *m = &cm->m;
  double tp = s->cfg.tp, h = m->hidden, f = m->ffn_hidden, dh = cm->dh;
  double up = m->ffn == SPEC_FFN_SWIGLU ? 2 : 1;
  int n = 0;
  u[n++] = (z3_unit){h * (m->heads + 2.0 * m->kv_heads) * dh / tp, 1, 1, 0, 0};
  u[n++] = (z3_unit){m->heads * dh * h / tp, 1, 1, 0, 0};
  if (m->experts) {
    int local = m->experts / s->cfg.ep;
    double w = (double)m->top_k * s->cfg.ep / m->experts;
    u[n++] = (z3_unit){h * m->experts, 1, 1, 0, 0};
    u[n++] = (z3_unit){up * h * f / tp, local, w, 0, 0};
    u[n++] = (z3_unit){h * f / tp, local, w, 0, 0};
  } else {
    u[n++] = (z3_unit){up * h * f / tp, 1, 1, 0, 0};
    u[n++] = (z3_unit){h * f / tp, 1, 1, 0, 0};
  }
  double sum = 0;
  for (int i = 0; i < n; i++) sum += u[i].numel * u[i].count * u[i].share;
  for (int i = 0; i < n; i++) {
    u[i].share = u[i].numel * u[i].count * u[i].share / sum;
    const cm_place *pl = z3_expert(cm, i) ? &s->edp_pl : &s->dp_pl;
    if (u[i].numel < cm->p.z3_persist_numel || pl->ranks <= 1) continue;
    u[i].gather_s = u[i].count * z3_gather_time(cm, u[i].numel, pl);
    u[i].host_s = cm->p.z3_sync ? u[i].count * pl->ranks * cm->p.z3_rank_us * 1e-6 : 0;
  }
  return n;
}

int cm_zero3_units(const cm_model *cm, const cm_stage_coef *s, cm_z3_unit *out) {
  z3_unit u[Z3_UNITS];
  int n = z3_units(cm, s, u);
  for (int i = 0; i < n; i++)
    out[i] = (cm_z3_unit){u[i].numel, u[i].count, z3_expert(cm, i),
                          u[i].numel >= cm->p.z3_persist_numel};
  return n;
}

/* Module t of a microbatch's trace (every layer's forward, then every layer's backward in
 * reverse; the pattern is the same for every layer). */
static const z3_mod *z3_at(const z3_step *z, long t) {
  long fwd = (long)z->layers * z->nu;
  return t < fwd ? &z->pat[t % z->nu] : &z->pat[z->nu + (t - fwd) % z->nb];
}

/* Under full recompute a unit stays gathered from its recomputed forward to its backward when
 * the parameters used in between (the later units, recomputed then back-propagated) are
 * fewer than stage3_max_reuse_distance. */
static int z3_kept(const cm_model *cm, const z3_unit *u, int nu, int unit) {
  double between = 0;
  for (int k = unit + 1; k < nu; k++) between += 2 * u[k].numel * u[k].count;
  return between < cm->p.z3_reuse_numel;
}

/* One layer's module pattern from its units and the stage's per-layer pass times. */
static void z3_pattern(z3_step *z, int rc) {
  const cm_stage_coef *co = z->co;
  const z3_unit *u = z->u;
  double recomp = rc ? co->recomp_s : 0, bwd = co->bwd_s - recomp;
  double fwd = co->comp_s + co->tp_s + co->cp_s + co->ep_s - co->bwd_s;
  int n = 0;
  for (int ph = 0; ph < 3; ph++) {
    if (ph == 1 && !rc) continue;
    for (int k = 0; k < z->nu; k++) {
      int un = ph == 2 ? z->nu - 1 - k : k;
      const z3_unit *x = &u[un];
      int kept = ph != 0 && rc && z->cm->p.z3_prefetch && z3_kept(z->cm, u, z->nu, un);
      int need = x->gather_s > 0 && !(ph == 2 && kept);
      z->pat[n++] = (z3_mod){
          .c = x->share * (ph == 0 ? fwd : ph == 1 ? recomp : bwd),
          .gather_s = need ? x->gather_s : 0, .host_s = need ? x->host_s : 0,
          .numel = need ? x->numel * x->count : 0, .grad = ph == 2 ? x->numel * x->count : 0,
          .phase = ph, .kept = kept, .unit = un};
    }
  }
  z->nb = n - z->nu;
}

/* The bucket reduced when `grad` more elements arrive (DeepSpeed reduces the bucket when the
 * next gradient would overflow it): its elements, 0 when none. */
static double z3_bucket(const z3_step *z, double grad, double *bucket) {
  double full = 0;
  if (grad <= 0) return 0;
  if (*bucket > 0 && *bucket + grad > z->cm->p.z3_bucket_numel) {
    full = *bucket;
    *bucket = 0;
  }
  *bucket += grad;
  return full;
}

/* The schedule's modules from the pattern: compute, gathers, the buckets their starts reduce;
 * every gather issued by its own module (z3_issue_* move the prefetched ones). Returns the
 * elements of the last bucket. */
static double z3_fill(z3_step *z) {
  const cm_model *cm = z->cm;
  long fwd = (long)z->layers * z->nu;
  double bucket = 0;
  for (long t = 0; t < z->total; t++) {
    const z3_mod *m = z3_at(z, t);
    const z3_unit *u = &z->u[m->unit];
    int ex = z3_expert(cm, m->unit);
    const cm_place *pl = ex ? &z->co->edp_pl : &z->co->dp_pl;
    double red = z3_bucket(z, m->grad, &bucket);
    z->red_s[t] = z3_reduce_time(cm, red, &z->co->dp_pl);
    z->mods[t] = (cm_z3_mod){
        .pat = t < fwd ? (int)(t % z->nu) : z->nu + (int)((t - fwd) % z->nb),
        .layer = t < fwd ? (int)(t / z->nu) : z->layers - 1 - (int)((t - fwd) / z->nb),
        .comp_s = m->c, .gathers = m->gather_s > 0 ? u->count : 0,
        .gather_bytes = m->gather_s > 0 ? u->numel * cm->act_bytes : 0,
        .group = ex ? SPEC_GRP_EDP : SPEC_GRP_DP,
        .gather_extra_s = m->gather_s > 0 ? z3_gather_extra(cm, u->numel, pl) : 0,
        .host_s = m->host_s, .issue = t,
        .reduce_bytes = red * cm->p.grad_comm_bytes,
        .reduce_extra_s = red > 0 ? z3_reduce_extra(cm, red) : 0};
  }
  return bucket;
}

#define Z3_AHEAD 64

/* Today's DeepSpeed with prefetch: a gather is issued when the module
 * stage3_prefetch_bucket_size elements earlier starts (at least one module ahead). */
static void z3_issue_pipelined(z3_step *z) {
  const cm_params *p = &z->cm->p;
  if (!p->z3_prefetch) return;
  double acc = 0;
  long j = 0; /* the module whose start issues this gather: acc = gathered elements j..t-1 */
  for (long t = 1; t < z->total; t++) {
    acc += z3_at(z, t - 1)->numel;
    for (;;) {
      double first = z3_at(z, j)->numel;
      if (j >= t - 1 || (acc - first < p->z3_prefetch_numel && t - j < Z3_AHEAD - 1)) break;
      acc -= first;
      j++;
    }
    z->mods[t].issue = j;
  }
}

/* DeepSpeed v0.3: a module's fetch launches the gathers of the next modules up to
 * stage3_prefetch_bucket_size elements, unless stage3_max_live_parameters are gathered. */
static void z3_issue_synced(z3_step *z) {
  const cm_params *p = &z->cm->p;
  double kept_live = 0;
  long pf = 0; /* the next module whose gather has not been issued */
  for (long t = 0; t < z->total; t++) {
    const z3_mod *m = z3_at(z, t);
    if (pf <= t) pf = t + 1; /* not prefetched: its own */
    /* gathered now: a kept unit (in kept_live until its backward) or this module's */
    if (m->phase == 2 && m->kept) kept_live -= m->grad;
    double live = kept_live + (m->phase == 2 && m->kept ? m->grad : m->numel);
    if (p->z3_prefetch && live < p->z3_live_numel)
      for (double acc = 0; pf < z->total && acc < p->z3_prefetch_numel; pf++) {
        z->mods[pf].issue = t;
        acc += z3_at(z, pf)->numel;
      }
    if (m->phase == 1 && m->kept) kept_live += m->numel;
  }
}

/* DeepSpeed v0.3 (zero3.sync = 1). Each module's window is the host launching the gathers it
 * prefetches (each launch synchronises the device, so all but the last are waited for), then
 * the longer of its compute and, on the stream, the last gather and the gradient bucket its
 * backward hook reduces (the next module's fetch synchronises the device); a gather nobody
 * prefetched is waited for in full. Returns the seconds beyond the compute. */
static double z3_synced(const z3_step *z) {
  double exposed = 0;
  long pf = 0; /* the next module whose gather has not been issued */
  for (long t = 0; t < z->total; t++) {
    const z3_mod *m = z3_at(z, t);
    double q = 0;
    if (pf <= t) {
      exposed += m->host_s + m->gather_s; /* not prefetched: waited for */
      pf = t + 1;
    }
    for (; pf < z->total && z->mods[pf].issue == t && pf > t; pf++) {
      const z3_mod *g = z3_at(z, pf);
      if (g->gather_s <= 0) continue;
      exposed += q + g->host_s;
      q = g->gather_s;
    }
    q += z->red_s[t]; /* behind the gather on the stream */
    exposed += fmax(0, q - m->c);
  }
  return exposed;
}

/* Today's DeepSpeed (zero3.sync = 0): a module waits for its own gather only (events, no
 * device-wide synchronisation) and the host runs ahead, so the stream gathers a module's
 * parameters as soon as it is free and the module that issues it has started; a gradient
 * bucket (earlier modules' gradients) joins the stream when the module whose hook reduces it
 * starts. Returns the seconds beyond the compute. */
static double z3_pipelined(const z3_step *z, double *start) {
  double stream = 0, done = 0, comp = 0;
  for (long t = 0; t < z->total; t++) {
    const z3_mod *m = z3_at(z, t);
    double ready = done;
    if (m->gather_s > 0) {
      long j = z->mods[t].issue;
      stream = fmax(stream, j == t ? done : start[j]) + m->gather_s;
      ready = fmax(ready, stream);
    }
    start[t] = ready;
    done = ready + m->c;
    comp += m->c;
    if (z->red_s[t] > 0) stream = fmax(stream, ready) + z->red_s[t];
  }
  return fmax(0, done - comp);
}

void cm_zero3_sched_free(cm_z3_sched *s) {
  free(s->mods);
  memset(s, 0, sizeof *s);
}

/* Builds the schedule of a rank of `layers` layers of stage coefficients co and times it. */
static int z3_sched(const cm_model *cm, const cm_stage_coef *co, int layers, cm_z3_sched *out) {
  memset(out, 0, sizeof *out);
  if (layers <= 0 || co->cfg.dp * co->cfg.cp <= 1) return PP_OK;
  z3_step z = {.cm = cm, .co = co, .layers = layers};
  z.nu = z3_units(cm, co, z.u);
  z3_pattern(&z, co->cfg.recompute == SPEC_RECOMPUTE_FULL);
  z.total = (long)z.layers * (z.nu + z.nb);
  z.mods = calloc((size_t)z.total, sizeof *z.mods);
  z.red_s = calloc(2 * (size_t)z.total, sizeof *z.red_s); /* and the starts */
  if (!z.mods || !z.red_s) {
    free(z.mods), free(z.red_s);
    return PP_NOMEM;
  }
  double last = z3_fill(&z);
  if (cm->p.z3_sync) z3_issue_synced(&z);
  else z3_issue_pipelined(&z);
  double exposed = cm->p.z3_sync ? z3_synced(&z) : z3_pipelined(&z, z.red_s + z.total);
  *out = (cm_z3_sched){.sync = cm->p.z3_sync, .reduce = z3_reduce_coll(cm), .nu = z.nu,
                       .nb = z.nb, .layers = layers, .n = z.total, .mods = z.mods,
                       .last_bytes = last * cm->p.grad_comm_bytes,
                       .last_extra_s = last > 0 ? z3_reduce_extra(cm, last) : 0,
                       .exposed_s = exposed + z3_reduce_time(cm, last, &co->dp_pl)};
  free(z.red_s);
  return PP_OK;
}

int cm_zero3_sched(const cm_model *cm, const cm_stage_coef *s, int layers, cm_z3_sched *out,
                   pp_err *err) {
  if (z3_sched(cm, s, layers, out)) return pp_err_set(err, PP_NOMEM, "cost model: out of memory");
  return PP_OK;
}

int cm_zero3_plan_sched(cm_model *cm, const spec_plan *p, int stage, int layers,
                        cm_z3_sched *out, pp_err *err) {
  cm_stage_coef co;
  memset(out, 0, sizeof *out);
  if (p->nstages == 0) { /* as cm_eval: the groups placed by their strides */
    cm__cfg g;
    make_cfg(cm, &g, p->tp, p->cp, p->dp, p->ep, p->mbs, p->sp, p->recompute);
    coef_from(cm, &g, layer_costs(cm, &g), &co);
  } else {
    if (stage < 0 || stage >= p->nstages)
      return pp_err_set(err, PP_PLAN, "plan: no stage %d", stage);
    const spec_stage *st = &p->stages[stage];
    cm_stage_cfg g = {st->tp, st->cp, st->dp, st->ep, p->gbs / p->microbatches / st->dp, p->sp,
                      st->recompute};
    int rc = cm_stage_coef_get(cm, &g, st->gpus, st->ngpus, &co, err);
    if (rc) return rc;
  }
  return cm_zero3_sched(cm, &co, layers, out, err);
}

/* Seconds of ZeRO-3 communication one microbatch exposes on a rank: the gathers and gradient
 * reductions its compute does not hide, and the last bucket, reduced after the backward
 * (-1 when out of memory). */
static double zero3_exposed(const cm_model *cm, const rank_cost *r) {
  cm_z3_sched s;
  if (z3_sched(cm, r->co, r->layers, &s)) return -1;
  double t = s.exposed_s;
  cm_zero3_sched_free(&s);
  return t;
}

int cm_stage_coef_get(cm_model *cm, const cm_stage_cfg *g, const int *gpus, int n,
                      cm_stage_coef *out, pp_err *err) {
  if (g->tp < 1 || g->cp < 1 || g->dp < 1 || g->ep < 1 || g->mbs < 1 ||
      (long long)g->tp * g->cp * g->dp != n || (g->dp * g->cp) % g->ep)
    return pp_err_set(err, PP_PLAN, "stage: tp=%d cp=%d dp=%d ep=%d mbs=%d on %d GPUs", g->tp,
                      g->cp, g->dp, g->ep, g->mbs, n);
  cm__cfg c = {.tp = g->tp, .cp = g->cp, .dp = g->dp, .ep = g->ep, .mbs = g->mbs,
               .sp = g->sp && g->tp > 1, .recompute = g->recompute};
  /* the groups of the stage's first rank, from its GPU ids (spec_grp_rules) */
  int stack[256], *tmp = n <= 256 ? stack : malloc((size_t)n * sizeof *tmp);
  if (!tmp) return pp_err_set(err, PP_NOMEM, "cost model: out of memory");
  spec_grp_rule r[SPEC_NGRPS];
  spec_grp_rules(c.tp, c.cp, c.dp, c.ep, r);
  cm_place *pl[SPEC_NGRPS] = {[SPEC_GRP_TP] = &c.tp_pl, [SPEC_GRP_CP] = &c.cp_pl,
                              [SPEC_GRP_DP] = &c.dp_pl, [SPEC_GRP_EP] = &c.ep_pl,
                              [SPEC_GRP_EDP] = &c.edp_pl};
  for (int k = 0; k < SPEC_NGRPS; k++)
    cm_place_list(cm, tmp, spec_grp_members(&r[k], gpus, 0, tmp), pl[k]);
  if (tmp != stack) free(tmp);
  cm__layer_entry e = {0};
  cm__layer_cost(cm, &c, &e.layer);
  cm__embed_cost(cm, &c, &e.emb_f, &e.emb_b, &e.emb_mem);
  cm__head_cost(cm, &c, &e.head_f, &e.head_b, &e.head_mem);
  coef_from(cm, &c, &e, out);
  return PP_OK;
}

double cm_stage_time(cm_model *cm, const cm_stage_coef *s, int layers, int first, int last,
                     int zero) {
  rank_cost r = {.co = s};
  add_chunk(cm, s, layers, first, last, &r);
  if (zero >= 3) r.dp = zero3_exposed(cm, &r);
  return r.dp < 0 ? NAN : rc_total(&r);
}

void cm_stage_memory(const cm_model *cm, const cm_stage_coef *s, int layers, int first, int last,
                     int zero, double inflight, cm_memory *out) {
  rank_cost r = {.co = s};
  add_chunk(cm, s, layers, first, last, &r);
  rank_memory(cm, &r, zero, inflight * r.act_bytes, out);
}

double cm_stage_p2p(const cm_model *cm, const int *a, int na, int tp_a, const int *b, int nb,
                    double samples) {
  const spec_model *m = &cm->m;
  int pair[2] = {a[0], b[0]};
  cm_place pl;
  cm_place_list(cm, pair, 2, &pl);
  int senders = na < cm->gpn ? na : cm->gpn;
  for (int l = CM_LVL_NVLINK_UP; l <= CM_LVL_SPINE; l++)
    pl.bw_gbps[l] = pl.bw_gbps[l] * pl.sharing / senders;
  int ranks = na < nb ? na : nb;
  double bytes = samples * m->seq_len * m->hidden * cm->act_bytes / ranks *
                 (cm->p.pp_scatter_gather ? 1 : tp_a);
  return cm_coll_best(cm, CM_SEND_RECV, bytes, &pl, NULL);
}


/* What a rank adds after its last backward: the gradient reduction (red) not hidden by the
 * backward it overlaps with (its own and, as `slack`, the later-finishing ranks'), the
 * distributed optimizer's gather (gat) when not overlapped, and the optimizer step. */
static double rank_dp_exposed(const cm_model *cm, const rank_cost *r, int zero, double red,
                              double gat, double slack) {
  if (zero >= 3) red = gat = 0; /* already paid per microbatch */
  double hide = slack + (cm->p.overlap_grad_reduce ? r->bwd : 0);
  return fmax(0, red - hide) + (cm->p.overlap_param_gather ? 0 : gat);
}

/* The optimizer step: Adam on fp32 master weights (read weight, grad, m, v; write weight, m,
 * v, bf16 copy) of the rank's shard. */
static double rank_optimizer(const cm_model *cm, const rank_cost *r, int zero) {
  double D = (double)r->co->cfg.dp * r->co->cfg.cp, E = D / r->co->cfg.ep;
  double shard = zero >= 1 ? r->params / D + r->expert_params / E : r->params + r->expert_params;
  return cm__mem_time(cm, CM_ADAM_BYTES_PER_PARAM * shard);
}

static void rank_tail(const cm_model *cm, const rank_cost *r, int zero, double red, double gat,
                      double slack, double *dp_exp, double *opt) {
  *dp_exp = rank_dp_exposed(cm, r, zero, red, gat, slack);
  *opt = rank_optimizer(cm, r, zero);
}

double cm_stage_tail(const cm_model *cm, const cm_stage_coef *s, int layers, int first, int last,
                     int zero, double slack_s) {
  rank_cost r = {.co = s};
  add_chunk(cm, s, layers, first, last, &r);
  double red, gat, dp_exp, opt;
  dp_times(cm, &r, zero >= 3 ? 1 : zero, &red, &gat);
  rank_tail(cm, &r, zero, red, gat, slack_s, &dp_exp, &opt);
  return dp_exp + opt;
}

#define MAX_STACK_RANKS 256

/* How much of the fabric the pair (a, b) crosses: 4 an NVLink domain, 2 a node, 1 a leaf (by
 * its node span, as fill_levels counts the spine). */
static int pair_cross(const cm_model *cm, int a, int b) {
  int lo = a < b ? a : b, hi = a < b ? b : a;
  int dom = cm->dom > 1 ? cm->dom : 1, span = hi / cm->gpn - lo / cm->gpn + 1;
  return (lo / dom != hi / dom) * 4 + (lo / cm->gpn != hi / cm->gpn) * 2 + (span > cm->leaf_nodes);
}

/* Boundary i -> i+1 of a uniform pipeline (stage i holds GPUs [iS, (i+1)S); interleaved, the
 * last stage sends to the first, its next chunk): GPU iS + r sends to (i+1)S + r. A domain or
 * node edge between them lies in reach of r = 0 or r = S - 1 if of any r, so the worse of
 * those two pairs is the boundary's slowest: it goes to pair, its crossing is returned. */
static int boundary_cross(const cm_model *cm, int P, int S, int i, int pair[2]) {
  int a = i * S, b = (i + 1) % P * S;
  int c0 = pair_cross(cm, a, b), c1 = pair_cross(cm, a + S - 1, b + S - 1);
  pair[0] = c1 > c0 ? a + S - 1 : a, pair[1] = c1 > c0 ? b + S - 1 : b;
  return c1 > c0 ? c1 : c0;
}

/* The placement of the pair (a, b), with a cache key of its own (bit 62; groups use bit 63):
 * cm_coll_best keeps its times like a group's. */
static void place_pair(const cm_model *cm, const int pair[2], cm_place *pl) {
  cm_place_list(cm, pair, 2, pl);
  pl->key = 1ull << 62 | (unsigned long long)(unsigned)pair[0] << 31 | (unsigned)pair[1];
}

/* The ranks of a uniform plan (coefficients g, layer counts per virtual stage) and the
 * p2p time per message across each boundary of its pipeline. A rank's chunks add up linearly: its layers are summed,
 * then the rank added once; ranks of the same layer count, neither first nor last, are
 * alike, so the previous such one is copied. */
static void uniform_ranks(cm_model *cm, const spec_plan *p, int P, int nvs, const int *counts,
                          const cm_stage_coef *co, rank_cost *rk, double *p2p) {
  const spec_model *m = &cm->m;
  int like = -1;
  for (int i = 0; i < P; i++) {
    int layers = 0;
    for (int j = i; j < nvs; j += P) layers += counts[j];
    int first = i == 0, last = (nvs - 1) % P == i;
    if (!first && !last && like >= 0 && rk[like].layers == layers) {
      rk[i] = rk[like];
      continue;
    }
    rk[i].co = co;
    add_chunk(cm, co, layers, first, last, &rk[i]);
    if (!first && !last) like = i;
  }
  /* each boundary's message time, priced once per kind of crossing */
  int S = p->tp * p->cp * p->dp, nb = P - 1 + (nvs > P);
  double bytes = (double)p->mbs * m->seq_len / p->cp * m->hidden * cm->act_bytes /
                 (cm->p.pp_scatter_gather ? p->tp : 1), by_cross[8];
  for (int k = 0; k < 8; k++) by_cross[k] = -1;
  for (int i = 0; i < P; i++) {
    int pair[2], k = i < nb ? boundary_cross(cm, P, S, i, pair) : -1;
    p2p[i] = 0;
    if (k < 0) continue;
    if (by_cross[k] < 0) {
      cm_place pl;
      place_pair(cm, pair, &pl);
      by_cross[k] = cm_coll_best(cm, CM_SEND_RECV, bytes, &pl, NULL);
    }
    p2p[i] = by_cross[k];
  }
}

/* The coefficients cm_eval evaluates stage i of p with: a uniform plan's stages share one set
 * (its groups placed by count and stride), a non-uniform stage's come from its GPU ids. */
static int plan_stage_coef(cm_model *cm, const spec_plan *p, int i, cm_stage_coef *out,
                           pp_err *err) {
  if (p->nstages == 0) {
    cm__cfg g;
    make_cfg(cm, &g, p->tp, p->cp, p->dp, p->ep, p->mbs, p->sp, p->recompute);
    coef_from(cm, &g, layer_costs(cm, &g), out);
    return PP_OK;
  }
  const spec_stage *st = &p->stages[i];
  cm_stage_cfg g = {st->tp, st->cp, st->dp, st->ep, p->gbs / p->microbatches / st->dp, p->sp,
                    st->recompute};
  return cm_stage_coef_get(cm, &g, st->gpus, st->ngpus, out, err);
}

int cm_stage_places(cm_model *cm, const spec_plan *p, int stage, cm_place out[SPEC_NGRPS],
                    pp_err *err) {
  if (stage < 0 || stage >= (p->nstages == 0 ? p->pp : p->nstages))
    return pp_err_set(err, PP_PLAN, "plan: no stage %d", stage);
  cm_stage_coef co;
  int rc = plan_stage_coef(cm, p, stage, &co, err);
  if (rc) return rc;
  out[SPEC_GRP_TP] = co.tp_pl, out[SPEC_GRP_CP] = co.cp_pl, out[SPEC_GRP_DP] = co.dp_pl;
  out[SPEC_GRP_EP] = co.ep_pl, out[SPEC_GRP_EDP] = co.edp_pl;
  return PP_OK;
}

/* The ranks of a non-uniform plan, one per stage (coefs: its coefficients, filled here), and
 * each stage's p2p time to the next. */
static int stage_ranks(cm_model *cm, const spec_plan *p, int P, cm_stage_coef *coefs,
                       rank_cost *rk, double *p2p, pp_err *err) {
  int samples = p->gbs / p->microbatches, rc;
  for (int i = 0; i < P; i++) {
    const spec_stage *st = &p->stages[i];
    if ((rc = plan_stage_coef(cm, p, i, &coefs[i], err))) return rc;
    rk[i].co = &coefs[i];
    add_chunk(cm, &coefs[i], st->layer_end - st->layer_begin, i == 0, i == P - 1, &rk[i]);
    p2p[i] = 0;
    if (i + 1 < P) {
      const spec_stage *nx = &p->stages[i + 1];
      p2p[i] = cm_stage_p2p(cm, st->gpus, st->ngpus, st->tp, nx->gpus, nx->ngpus, samples);
    }
  }
  return PP_OK;
}

/* The p2p time per message of stage i, from the boundary times b (b[i]: stage i to i+1; with
 * wrap, b[P-1]: the last stage to the first): per microbatch a stage waits for its input from
 * the previous stage and for its gradient from the next, a message across each of its two
 * boundaries, so the mean of the two; a first or last stage without wrap has one boundary,
 * taken for both. */
static double stage_p2p(const double *b, int P, int wrap, int i) {
  double sum = 0;
  int n = 0;
  if (i > 0 || wrap) sum += b[(i + P - 1) % P], n++;
  if (i < P - 1 || wrap) sum += b[i], n++;
  return n ? sum / n : 0;
}

/* The pipeline: mb microbatches at the slowest rank's pace, the bubble, the p2p messages on
 * the critical path (the stage that waits longest per microbatch); fills the breakdown from
 * the slowest rank. p2p: the boundary times (stage_p2p). Returns the seconds. */
static double pipeline_time(const cm_model *cm, const rank_cost *rk, const double *p2p, int P,
                            int mb, int v, cm_result *out) {
  double tmax = 0, sum = 0, p2p_max = 0;
  int bott = 0;
  for (int i = 0; i < P; i++) {
    double t = rc_total(&rk[i]), q = stage_p2p(p2p, P, v > 1, i);
    sum += t;
    if (t > tmax) tmax = t, bott = i;
    if (q > p2p_max) p2p_max = q;
  }
  double p2p_total = 0;
  if (P > 1) p2p_total = cm->p.pp_p2p_per_mb * ((double)mb * v + P - 2) * p2p_max;
  /* the bubble: every other rank's work once (1/v of it when interleaved); sum >= tmax in
   * floating point too (tmax is one of the non-negative terms), so it is never negative */
  double bubble = (sum - tmax) / v;
  const rank_cost *B = &rk[bott];
  out->t.compute_s = mb * B->comp;
  out->t.tp_comm_s = mb * B->tp;
  out->t.cp_comm_s = mb * B->cp;
  out->t.ep_comm_s = mb * B->ep;
  out->t.dp_comm_s = mb * B->dp;
  out->t.pp_bubble_s = bubble;
  out->t.pp_p2p_s = p2p_total;
  out->bottleneck_stage = bott;
  return mb * tmax + bubble + p2p_total;
}

/* The data-parallel tail: each rank reduces its gradients when its own last backward is done
 * (stage i finishes before stage 0 by the backward of stages 0..i-1), overlapped with that
 * backward when the software does so; then the optimizer step and, for the distributed
 * optimizer, the parameter all-gather. Adds the longest rank's to the breakdown; returns it.
 * Ranks of a uniform plan differ only in layer counts and the embedding/head: a few distinct
 * parameter counts, so the DP collectives and the step are computed once per distinct one. */
static double dp_tail(const cm_model *cm, const rank_cost *rk, int P, int zero, cm_result *out) {
  double tail = 0, tail_dp = 0, tail_opt = 0, slack = 0;
  struct dp_memo {
    const cm_stage_coef *co;
    double params, expert, red, gat, opt;
  } memo[8];
  int nmemo = 0;
  for (int i = 0; i < P; i++) {
    const rank_cost *r = &rk[i];
    double red = 0, gat = 0, opt;
    int k;
    for (k = 0; k < nmemo; k++)
      if (memo[k].co == r->co && memo[k].params == r->params &&
          memo[k].expert == r->expert_params)
        break;
    if (k < nmemo) {
      red = memo[k].red, gat = memo[k].gat, opt = memo[k].opt;
    } else {
      dp_times(cm, r, zero >= 3 ? 1 : zero, &red, &gat);
      opt = rank_optimizer(cm, r, zero);
      if (nmemo < 8)
        memo[nmemo++] = (struct dp_memo){r->co, r->params, r->expert_params, red, gat, opt};
    }
    double dp_exp = rank_dp_exposed(cm, r, zero, red, gat, slack);
    if (dp_exp + opt > tail) tail = dp_exp + opt, tail_dp = dp_exp, tail_opt = opt;
    slack += r->bwd;
  }
  out->t.dp_comm_s += tail_dp;
  out->t.optimizer_s = tail_opt;
  return tail;
}

/* Activation bytes rank i of P holds at its fullest under the plan's schedule. */
static double rank_inflight(const spec_plan *p, int i, int P, int mb, int v, double act_bytes) {
  if (p->schedule == SPEC_SCHED_GPIPE) return mb * act_bytes;
  if (v > 1) {
    double chunks = 2.0 * (P - i - 1) + (v - 1.0) * P + 1;
    if (chunks > (double)mb * v) chunks = (double)mb * v;
    return chunks * act_bytes / v;
  }
  double k = P - i < mb ? P - i : mb;
  return k * act_bytes;
}

/* Memory: the fullest rank's breakdown in out->mem. Ranks alike but for their activations
 * (the same configuration, parameters and working set) share everything else: that part is
 * computed once, and a rank's whole breakdown only where it may be the fullest. */
static void fullest_rank(const cm_model *cm, const spec_plan *p, const rank_cost *rk, int P,
                         int mb, int v, int zero, cm_result *out) {
  double worst = -1;
  struct mem_memo {
    const cm_stage_coef *co;
    double params, expert, layer, other, gather, rest_gib;
  } mm[8];
  int nmm = 0;
  for (int i = 0; i < P; i++) {
    const rank_cost *r = &rk[i];
    double inflight = rank_inflight(p, i, P, mb, v, r->act_bytes);
    int k;
    for (k = 0; k < nmm; k++)
      if (mm[k].co == r->co && mm[k].params == r->params && mm[k].expert == r->expert_params &&
          mm[k].layer == r->layer_params && mm[k].other == r->other_bytes &&
          mm[k].gather == r->zero3_gather)
        break;
    double rest;
    cm_memory mem;
    if (k < nmm) {
      rest = mm[k].rest_gib;
    } else {
      rank_memory(cm, r, zero, 0, &mem);
      rest = mem.total_gib;
      if (nmm < 8)
        mm[nmm++] = (struct mem_memo){r->co, r->params, r->expert_params, r->layer_params,
                                      r->other_bytes, r->zero3_gather, rest};
    }
    /* within rounding of the fullest so far: the breakdown decides, as it always did */
    if (rest + inflight / CM_GIB < worst - 1e-9) continue;
    rank_memory(cm, r, zero, inflight, &mem);
    if (mem.total_gib > worst) worst = mem.total_gib, out->mem = mem;
  }
  out->mem_gib_per_gpu = out->mem.total_gib;
  out->feasible = out->mem.total_gib <= cm->c.gpu.hbm_gib;
  out->mem_excess_gib = out->feasible ? 0 : out->mem.total_gib - cm->c.gpu.hbm_gib;
}

int cm_eval(cm_model *cm, const spec_plan *p, cm_result *out, pp_err *err) {
  memset(out, 0, sizeof *out);
  const spec_model *m = &cm->m;
  int uniform = p->nstages == 0;
  int P = uniform ? p->pp : p->nstages, v = uniform ? p->vpp : 1;
  int mb = spec_plan_microbatches(p);
  if (mb < 1 || P < 1) return pp_err_set(err, PP_PLAN, "plan: no microbatches or no stages");
  if (uniform && (long long)p->tp * p->pp * p->dp * p->cp != cm->c.gpus)
    return pp_err_set(err, PP_PLAN, "plan: tp*pp*dp*cp does not match the %d GPUs of %s",
                      cm->c.gpus, cm->c.name);

  rank_cost stack[MAX_STACK_RANKS], *rk = stack;
  cm_stage_coef coef_u, *coefs = NULL;
  int nvs = P * v;
  int counts_stack[MAX_STACK_RANKS], *counts = counts_stack;
  double *p2p = NULL, p2p_stack[MAX_STACK_RANKS];
  int rc = PP_OK;
  if (P > MAX_STACK_RANKS || nvs > MAX_STACK_RANKS) {
    rk = calloc((size_t)P, sizeof *rk);
    counts = calloc((size_t)nvs, sizeof *counts);
    p2p = calloc((size_t)P, sizeof *p2p);
    if (!rk || !counts || !p2p) {
      rc = pp_err_set(err, PP_NOMEM, "cost model: out of memory");
      goto done;
    }
  } else {
    memset(rk, 0, (size_t)P * sizeof *rk);
    p2p = p2p_stack;
  }

  int zero = p->zero;
  if (uniform) {
    plan_stage_coef(cm, p, 0, &coef_u, err);
    spec_plan_stage_layers(p, m, counts);
    uniform_ranks(cm, p, P, nvs, counts, &coef_u, rk, p2p);
  } else if (!(coefs = calloc((size_t)P, sizeof *coefs))) {
    rc = pp_err_set(err, PP_NOMEM, "cost model: out of memory");
    goto done;
  } else if ((rc = stage_ranks(cm, p, P, coefs, rk, p2p, err))) {
    goto done;
  }

  /* ZeRO-3 gathers parameters for every forward and backward and reduce-scatters gradients
   * every microbatch; what the compute of the microbatch does not hide is exposed */
  if (zero >= 3)
    for (int i = 0; i < P; i++)
      if ((rk[i].dp = zero3_exposed(cm, &rk[i])) < 0) {
        rc = pp_err_set(err, PP_NOMEM, "cost model: out of memory");
        goto done;
      }

  double pipe = pipeline_time(cm, rk, p2p, P, mb, v, out);
  out->iter_time_s = pipe + dp_tail(cm, rk, P, zero, out);
  fullest_rank(cm, p, rk, P, mb, v, zero, out);
  out->microbatches = mb;
  cm_throughput(cm, p, out->iter_time_s, out);

done:
  if (rk != stack) free(rk);
  if (counts != counts_stack) free(counts);
  if (p2p != p2p_stack) free(p2p);
  free(coefs);
  return rc;
}
