/* Megatron-LM arguments out: a uniform plan as the command-line arguments of Megatron-LM's
 * training scripts (megatron/training/arguments.py, checked against NVIDIA/Megatron-LM
 * d98e8a64). The parallel degrees, the batch, the layer split, recomputation and the optimizer
 * sharding; the model's shape and everything else stay the user's. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "podplan/tr.h"

/* Activation recomputation by spec_recompute: Megatron's selective recomputation is the core
 * attention (what the cost model charges); full recomputes every layer from its input. */
static const char *const recompute_args[] = {
    [SPEC_RECOMPUTE_NONE] = NULL,
    [SPEC_RECOMPUTE_SELECTIVE] = "--recompute-granularity selective",
    [SPEC_RECOMPUTE_FULL] =
        "--recompute-granularity full --recompute-method uniform --recompute-num-layers 1",
};

/* Optimizer sharding by ZeRO stage: the distributed optimizer shards the optimizer states
 * (ZeRO-1); Megatron-FSDP's sharding strategies add gradients (ZeRO-2) and parameters
 * (ZeRO-3). */
static const char *const zero_args[] = {
    NULL,
    "--use-distributed-optimizer",
    "--use-distributed-optimizer --use-megatron-fsdp --data-parallel-sharding-strategy "
    "optim_grads",
    "--use-distributed-optimizer --use-megatron-fsdp --data-parallel-sharding-strategy "
    "optim_grads_params",
};

typedef struct buf {
  char *s;
  size_t len, cap;
  int oom;
} buf;

static void put(buf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static void put(buf *b, const char *fmt, ...) {
  if (b->oom) return;
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b->s ? b->s + b->len : NULL, b->s ? b->cap - b->len : 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
      b->oom = 1;
      return;
    }
    if (b->s && b->len + (size_t)n < b->cap) {
      b->len += (size_t)n;
      return;
    }
    size_t cap = b->cap ? b->cap : 256;
    while (cap <= b->len + (size_t)n) cap *= 2;
    char *ns = realloc(b->s, cap);
    if (!ns) {
      b->oom = 1;
      return;
    }
    b->s = ns;
    b->cap = cap;
  }
}

int tr_megatron_args(const spec_plan *p, const spec_model *m, char **out, pp_err *err) {
  *out = NULL;
  if (p->nstages)
    return pp_err_set(err, PP_INPUT,
                      "a non-uniform plan (%d stages, each with its own degrees and GPUs) has no "
                      "Megatron-LM arguments: Megatron-LM runs one tp/cp/dp on every pipeline "
                      "stage; use --format json",
                      p->nstages);
  if (p->dp < 1) return pp_err_set(err, PP_INTERNAL, "Megatron-LM arguments: unresolved plan");
  if (p->schedule == SPEC_SCHED_GPIPE && p->pp > 1)
    return pp_err_set(err, PP_INPUT,
                      "schedule gpipe has no Megatron-LM arguments: Megatron-LM runs 1F1B and "
                      "interleaved 1F1B only");
  if ((unsigned)p->recompute > SPEC_RECOMPUTE_FULL || p->zero < 0 || p->zero > 3)
    return pp_err_set(err, PP_INTERNAL, "Megatron-LM arguments: recompute %d, zero %d",
                      (int)p->recompute, p->zero);
  int S = p->pp * p->vpp;
  int *counts = malloc((size_t)S * sizeof *counts);
  if (!counts) return pp_err_set(err, PP_NOMEM, "Megatron-LM arguments: out of memory");
  spec_plan_stage_layers(p, m, counts);
  int even = m->layers % S == 0;

  buf b = {0};
  put(&b, "--tensor-model-parallel-size %d --pipeline-model-parallel-size %d", p->tp, p->pp);
  if (!even) {
    /* Megatron splits layers evenly unless told: the layout names each virtual stage's layers
     * in virtual-stage order (stage j = chunk j / pp of pipeline rank j % pp), E the
     * embedding, t a transformer layer, L the loss */
    put(&b, " --pipeline-model-parallel-layout \"E");
    for (int j = 0; j < S; j++) put(&b, "%st*%d", j ? "|" : "", counts[j]);
    put(&b, ",L\"");
  } else if (p->vpp > 1) {
    put(&b, " --num-layers-per-virtual-pipeline-stage %d", counts[0]);
  }
  put(&b, " --context-parallel-size %d", p->cp);
  if (m->experts > 0 || p->ep > 1) put(&b, " --expert-model-parallel-size %d", p->ep);
  if (p->sp && p->tp > 1) put(&b, " --sequence-parallel");
  put(&b, " --micro-batch-size %d --global-batch-size %d", p->mbs, p->gbs);
  if (recompute_args[p->recompute]) put(&b, " %s", recompute_args[p->recompute]);
  if (zero_args[p->zero]) put(&b, " %s", zero_args[p->zero]);
  free(counts);
  if (b.oom) {
    free(b.s);
    return pp_err_set(err, PP_NOMEM, "Megatron-LM arguments: out of memory");
  }
  *out = b.s;
  return PP_OK;
}
