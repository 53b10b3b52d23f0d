/* Lowering plans to per-rank programs: every message sent is received in the same order with
 * the same size, every member of a group runs the same collectives in the same order, each
 * rank runs every (microbatch, chunk) of its schedule forward and backward once, and the
 * GEMM and attention FLOPs of all programs (recomputation aside) are the model FLOPs the
 * cost model counts. Sends and receives come in closed batches (batch_end on the last;
 * nothing else while one is open), the message buffers hold the largest collective, send or
 * batch of receives, and interleaved schedules run each steady forward and its backward with
 * no message between them (Megatron's order). Reduced runs (--layers, --shrink) and bad
 * reductions; a reduced run needs the reduced model's cost model. Each group's GPU stride as
 * the cost model would place it (be_group_stride). The operand buffers hold the largest
 * GEMM or attention operand and the score buffer the largest score block, on every case and
 * on a long context (llama3-8b, 8192 tokens: 4 heads x 8192 x 8192 scores, larger than any
 * operand). ZeRO-3 (gpt3-1.3b, tp=2 dp=4): each rank runs the cost model's per-microbatch
 * gathers and reduce-scatters (cm_zero3_plan_sched) in its order, with its byte totals, and
 * the tail keeps only the optimizer. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "podplan/be.h"

static int lower(const char *model, int gpus, const char *plan, int layers, int shrink,
                 be_plan **bp, cm_result *res, pp_err *err) {
  spec_model m;
  spec_cluster c;
  spec_plan p;
  memset(&p, 0, sizeof p);
  spec_model mr;
  cm_model *cm = NULL, *rcm = NULL;
  be_lower_opts o = {layers, shrink, NULL};
  int rc = spec_model_load(model, &m, err) || spec_cluster_load("dgx-h100", gpus, &c, err) ||
           spec_plan_parse(plan, &p, err) || spec_plan_resolve(&p, &m, &c, err) ||
           cm_model_create(&m, &c, NULL, &cm, err);
  if (!rc && res) rc = cm_eval(cm, &p, res, err);
  /* a reduced run: the caller builds the cost model of the model as run */
  if (!rc && (layers || shrink > 1))
    rc = be_lower_model(&m, &o, &mr, err) || cm_model_create(&mr, &c, NULL, &rcm, err);
  o.run_cm = rcm;
  if (!rc) rc = be_lower(cm, &p, &o, bp, err);
  cm_model_destroy(rcm);
  cm_model_destroy(cm);
  spec_plan_clear(&p);
  return rc ? err->code : PP_OK;
}

/* Sends from a to b, in order, match b's receives from a. */
static int p2p_matches(const be_plan *bp) {
  int ok = 1;
  for (int a = 0; a < bp->nranks && ok; a++)
    for (int b = 0; b < bp->nranks && ok; b++) {
      const be_prog *pa = &bp->progs[a], *pb = &bp->progs[b];
      int i = 0, j = 0;
      for (;;) {
        while (i < pa->nops && !(pa->ops[i].kind == BE_OP_SEND && pa->ops[i].peer == b)) i++;
        while (j < pb->nops && !(pb->ops[j].kind == BE_OP_RECV && pb->ops[j].peer == a)) j++;
        if (i == pa->nops || j == pb->nops) {
          ok &= i == pa->nops && j == pb->nops;
          break;
        }
        ok &= pa->ops[i].bytes == pb->ops[j].bytes && pa->ops[i].mb == pb->ops[j].mb;
        i++, j++;
      }
    }
  return ok;
}

/* Every member of every group runs the same (collective, bytes) sequence on it. */
static int colls_match(const be_plan *bp) {
  for (int g = 0; g < bp->ngroups; g++) {
    const be_group *grp = &bp->groups[g];
    const be_prog *p0 = &bp->progs[grp->ranks[0]];
    for (int k = 1; k < grp->n; k++) {
      const be_prog *pk = &bp->progs[grp->ranks[k]];
      int i = 0, j = 0;
      for (;;) {
        while (i < p0->nops && !(p0->ops[i].kind == BE_OP_COLL && p0->ops[i].group == g)) i++;
        while (j < pk->nops && !(pk->ops[j].kind == BE_OP_COLL && pk->ops[j].group == g)) j++;
        if (i == p0->nops || j == pk->nops) {
          if (i != p0->nops || j != pk->nops) return 0;
          break;
        }
        if (p0->ops[i].coll != pk->ops[j].coll || p0->ops[i].bytes != pk->ops[j].bytes) return 0;
        i++, j++;
      }
    }
  }
  return 1;
}

/* The buffers are the largest operands: a GEMM's A, B or C, an attention's Q, K, V or O for
 * the operand buffers; an attention's score block (queries x keys) for the score buffer only. */
static int buffers_match(const be_plan *bp) {
  double gemm = 0, attn = 0;
  for (int r = 0; r < bp->nranks; r++)
    for (int i = 0; i < bp->progs[r].nops; i++) {
      const be_op *o = &bp->progs[r].ops[i];
      double b = o->batch;
      if (o->kind == BE_OP_GEMM)
        gemm = fmax(gemm, b * fmax((double)o->m * o->k, fmax((double)o->k * o->n, (double)o->m * o->n)));
      if (o->kind == BE_OP_ATTN) {
        gemm = fmax(gemm, b * fmax((double)o->m * o->k, (double)o->n * o->k));
        attn = fmax(attn, b * o->m * o->n);
      }
    }
  if (bp->max_gemm_elems != gemm || bp->max_attn_elems != attn)
    fprintf(stderr, "buffers: operands %.0f (largest %.0f), scores %.0f (largest %.0f)\n",
            bp->max_gemm_elems, gemm, bp->max_attn_elems, attn);
  return bp->max_gemm_elems == gemm && bp->max_attn_elems == attn;
}

static double flops(const be_op *o) {
  if (o->kind == BE_OP_GEMM) return 2.0 * o->m * o->n * o->k * o->batch;
  if (o->kind == BE_OP_ATTN) return 2.0 * o->m * o->n * o->k * o->batch * (o->causal ? 1 : 2);
  return 0;
}

/* Every send and receive is in a batch closed by batch_end before any other op; the message
 * buffers are the largest collective or send, or a batch's receives together. */
static int batches_ok(const be_plan *bp) {
  double want = 0;
  for (int r = 0; r < bp->nranks; r++) {
    const be_prog *pg = &bp->progs[r];
    int open = 0;
    double recv_b = 0;
    for (int i = 0; i < pg->nops; i++) {
      const be_op *o = &pg->ops[i];
      int msg = o->kind == BE_OP_SEND || o->kind == BE_OP_RECV;
      if (!msg && (open || o->batch_end)) {
        fprintf(stderr, "rank %d, op %d: %s with a batch open or batch_end\n", r, i,
                be_op_kind_name(o->kind));
        return 0;
      }
      if (o->kind == BE_OP_COLL || o->kind == BE_OP_SEND) want = fmax(want, o->bytes);
      if (!msg) continue;
      open = !o->batch_end;
      if (o->kind == BE_OP_RECV) recv_b += o->bytes;
      if (o->batch_end) want = fmax(want, recv_b), recv_b = 0;
    }
    if (open) return 0;
  }
  if (bp->max_msg_bytes != want)
    fprintf(stderr, "messages: %.0f bytes, largest %.0f\n", bp->max_msg_bytes, want);
  return bp->max_msg_bytes == want;
}

/* Interleaved: every rank runs its m * v - warm-up steady pairs with no message between the
 * forward and the backward (they share one batch after them, as in Megatron). */
static int pairs_unsplit(const be_plan *bp, int mb, int v) {
  int P = 0;
  for (int r = 0; r < bp->nranks; r++)
    if (bp->progs[r].stage + 1 > P) P = bp->progs[r].stage + 1;
  for (int r = 0; r < bp->nranks; r++) {
    const be_prog *pg = &bp->progs[r];
    int pairs = 0, fwd = -1, key = -1, msgs = 0;
    for (int i = 0; i < pg->nops; i++) {
      const be_op *o = &pg->ops[i];
      if (o->kind == BE_OP_SEND || o->kind == BE_OP_RECV) msgs++;
      if (o->ev != BE_EV_FORWARD && o->ev != BE_EV_BACKWARD) continue;
      int f = o->ev == BE_EV_FORWARD, k = (f * mb + o->mb) * v + o->chunk;
      if (k == key) continue;
      pairs += fwd == 1 && !f && !msgs;
      fwd = f, key = k, msgs = 0;
    }
    int want = mb * v - spec_schedule_warmup(SPEC_SCHED_INTERLEAVED, P, pg->stage, mb, v);
    if (pairs != want) {
      fprintf(stderr, "rank %d: %d unsplit pairs, %d steady\n", r, pairs, want);
      return 0;
    }
  }
  return 1;
}

/* Forward and backward steps: each (mb, chunk) once in each direction per rank. */
static int steps_once(const be_plan *bp, int mb, int v) {
  int *seen = calloc((size_t)2 * mb * v, sizeof *seen), ok = 1;
  for (int r = 0; r < bp->nranks && ok; r++) {
    memset(seen, 0, (size_t)2 * mb * v * sizeof *seen);
    const be_prog *pg = &bp->progs[r];
    int prev = -1;
    for (int i = 0; i < pg->nops; i++) {
      const be_op *o = &pg->ops[i];
      if (o->ev != BE_EV_FORWARD && o->ev != BE_EV_BACKWARD) continue;
      int key = (o->ev == BE_EV_FORWARD) * mb * v + o->mb * v + o->chunk;
      if (key != prev) seen[key]++;
      prev = key;
    }
    for (int k = 0; k < 2 * mb * v; k++) ok &= seen[k] == 1;
  }
  free(seen);
  return ok;
}

static void plans(void) {
  struct {
    const char *model, *plan;
    int gpus, mb, v;
  } cases[] = {
      {"gpt3-1.3b", "tp=2,dp=2,mbs=1,gbs=8", 4, 4, 1},
      {"gpt3-1.3b", "pp=2,dp=2,mbs=1,gbs=8", 4, 4, 1},
      {"gpt3-1.3b", "pp=4,mbs=1,gbs=8", 4, 8, 1},
      {"gpt3-1.3b", "pp=4,vpp=2,mbs=1,gbs=8", 4, 8, 2},
      {"gpt3-1.3b", "pp=4,vpp=2,mbs=1,gbs=4", 4, 4, 2},
      {"gpt3-1.3b", "pp=4,mbs=2,gbs=8,schedule=gpipe,recompute=full", 4, 4, 1},
      {"llama3-8b", "tp=2,cp=2,pp=2,mbs=1,gbs=8,sp=1,recompute=selective,zero=1", 8, 8, 1},
      {"mixtral-8x7b", "tp=2,ep=4,mbs=1,gbs=8,sp=1", 8, 2, 1},
      {"gpt3-1.3b",
       "{\"gbs\":16,\"microbatches\":8,\"stages\":[{\"layers\":[0,10],\"gpus\":[0,1],\"tp\":2},"
       "{\"layers\":[10,24],\"gpus\":[4,5,6,7],\"tp\":2,\"dp\":2}]}",
       8, 8, 1},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    be_plan *bp = NULL;
    cm_result res;
    pp_err err = {0};
    int rc = lower(cases[i].model, cases[i].gpus, cases[i].plan, 0, 1, &bp, &res, &err);
    if (rc) fprintf(stderr, "%s: %s\n", cases[i].plan, err.msg);
    CHECK_EQ(rc, PP_OK);
    if (rc) continue;
    CHECK(p2p_matches(bp));
    CHECK(colls_match(bp));
    CHECK(steps_once(bp, cases[i].mb, cases[i].v));
    CHECK(batches_ok(bp));
    if (cases[i].v > 1) CHECK(pairs_unsplit(bp, cases[i].mb, cases[i].v));
    double total = 0;
    for (int r = 0; r < bp->nranks; r++)
      for (int k = 0; k < bp->progs[r].nops; k++)
        if (!bp->progs[r].ops[k].recompute) total += flops(&bp->progs[r].ops[k]);
    /* 6N also counts the norms' and biases' parameters, which no GEMM multiplies (~1e-4);
     * integer shapes round fractional expert token counts up */
    CHECK_NEAR(total, res.model_flops, strstr(cases[i].model, "mixtral") ? 0.02 : 1e-3);
    CHECK_NEAR(bp->model_flops, res.model_flops, 1e-9);
    CHECK(bp->max_gemm_elems > 0 && bp->max_msg_bytes > 0);
    CHECK(buffers_match(bp));
    /* the tail: DP groups of more than one reduce their gradients last but the optimizer */
    const be_prog *pg = &bp->progs[0];
    CHECK_EQ(pg->ops[pg->nops - 1].ev == BE_EV_OPTIMIZER || pg->ops[pg->nops - 1].ev == BE_EV_DP, 1);
    be_plan_free(bp);
  }
}

/* A long context: the score block (heads x seq x seq) dwarfs every GEMM operand, and only the
 * score buffer is that big (it was counted in the operand buffers too: three more of it). */
static void long_context(void) {
  be_plan *bp = NULL;
  pp_err err = {0};
  CHECK_EQ(lower("llama3-8b", 8, "tp=8,mbs=1,gbs=1", 2, 1, &bp, NULL, &err), PP_OK);
  if (!bp) return;
  CHECK(buffers_match(bp));
  /* 4 heads per rank x 8192 x 8192 scores */
  CHECK_DEQ(bp->max_attn_elems, 4.0 * 8192 * 8192);
  CHECK(bp->max_gemm_elems < bp->max_attn_elems); /* the LM head's logits: half of it */
  be_plan_free(bp);
}

static void reduced(void) {
  be_plan *bp = NULL;
  pp_err err = {0};
  CHECK_EQ(lower("gpt3-1.3b", 4, "pp=2,tp=2,mbs=1,gbs=4", 4, 8, &bp, NULL, &err), PP_OK);
  if (bp) {
    CHECK_EQ(bp->model.layers, 4);
    CHECK_EQ(bp->layers_full, 24);
    CHECK_EQ(bp->model.hidden, 256);
    CHECK_EQ(bp->model.heads, 4);
    CHECK_STREQ(bp->model.name, "gpt3-1.3b.l4.w8");
    CHECK(p2p_matches(bp) && colls_match(bp));
    be_plan_free(bp);
  }
  CHECK_EQ(lower("gpt3-1.3b", 4, "tp=2,dp=2,mbs=1,gbs=4", 0, 3, &bp, NULL, &err), PP_INPUT);
  CHECK_CONTAINS(err.msg, "--shrink 3: hidden 2048 is not divisible by 3");
  CHECK_EQ(lower("gpt3-1.3b", 4, "tp=2,dp=2,mbs=1,gbs=4", 30, 1, &bp, NULL, &err), PP_INPUT);
  CHECK_CONTAINS(err.msg, "--layers 30: the model has 24");
  /* width 1/32 leaves 1 head: tp=2 no longer divides it */
  CHECK_EQ(lower("gpt3-1.3b", 4, "tp=2,dp=2,mbs=1,gbs=4", 0, 32, &bp, NULL, &err), PP_PLAN);
  CHECK_CONTAINS(err.msg, "tp divides heads");
  CHECK_EQ(lower("gpt3-1.3b", 4, "pp=4,mbs=1,gbs=4", 2, 1, &bp, NULL, &err), PP_PLAN);
  /* a reduced run priced by the whole model's cost model is refused */
  spec_model m;
  spec_cluster c;
  spec_plan p;
  cm_model *cm = NULL;
  CHECK_EQ(spec_model_load("gpt3-1.3b", &m, &err), PP_OK);
  CHECK_EQ(spec_cluster_load("dgx-h100", 4, &c, &err), PP_OK);
  CHECK_EQ(spec_plan_parse("tp=2,dp=2,mbs=1,gbs=4", &p, &err), PP_OK);
  CHECK_EQ(spec_plan_resolve(&p, &m, &c, &err), PP_OK);
  CHECK_EQ(cm_model_create(&m, &c, NULL, &cm, &err), PP_OK);
  be_lower_opts o = {4, 8, NULL};
  CHECK_EQ(be_lower(cm, &p, &o, &bp, &err), PP_INPUT);
  CHECK_CONTAINS(err.msg, "not of the model as run, gpt3-1.3b.l4.w8");
  CHECK(bp == NULL);
  cm_model_destroy(cm);
  spec_plan_clear(&p);
}

/* ZeRO-3: every rank runs, per microbatch, the collectives of the cost model's schedule
 * (cm_zero3_plan_sched, the one cm_eval times) in its order: each module's all-gathers (bf16,
 * over DP), the gradient buckets reduce-scattered when they fill, the last after the layers'
 * backward; so its bytes are the cost model's totals. The embedding and the head gather
 * nothing; the tail keeps only the optimizer (no gradient reduction, no parameter gather). */
static void zero3(void) {
  be_plan *bp = NULL;
  cm_result res;
  pp_err err = {0};
  const char *plan = "tp=2,dp=4,mbs=1,gbs=8,sp=1,zero=3";
  CHECK_EQ(lower("gpt3-1.3b", 8, plan, 0, 1, &bp, &res, &err), PP_OK);
  if (!bp) return;
  CHECK(colls_match(bp));
  spec_model m;
  spec_cluster c;
  spec_plan p;
  memset(&p, 0, sizeof p);
  cm_model *cm = NULL;
  CHECK_EQ(spec_model_load("gpt3-1.3b", &m, &err), PP_OK);
  CHECK_EQ(spec_cluster_load("dgx-h100", 8, &c, &err), PP_OK);
  CHECK_EQ(spec_plan_parse(plan, &p, &err), PP_OK);
  CHECK_EQ(spec_plan_resolve(&p, &m, &c, &err), PP_OK);
  CHECK_EQ(cm_model_create(&m, &c, NULL, &cm, &err), PP_OK);
  cm_z3_sched z;
  CHECK_EQ(cm_zero3_plan_sched(cm, &p, 0, m.layers, &z, &err), PP_OK);
  CHECK(z.n == (long)m.layers * 8 && z.reduce == CM_REDUCE_SCATTER);
  /* the schedule's collectives of one microbatch, in order: 1 gather, 2 reduce */
  int cap = (int)z.n * 2 + 1, ne = 0, *kind = malloc((size_t)cap * sizeof *kind);
  double *bytes = malloc((size_t)cap * sizeof *bytes), ag = 0, rs = 0;
  for (long t = 0; t < z.n && kind && bytes; t++) {
    for (int k = 0; k < z.mods[t].gathers; k++)
      kind[ne] = 1, bytes[ne++] = z.mods[t].gather_bytes, ag += z.mods[t].gather_bytes;
    if (z.mods[t].reduce_bytes > 0)
      kind[ne] = 2, bytes[ne++] = z.mods[t].reduce_bytes, rs += z.mods[t].reduce_bytes;
  }
  if (kind && bytes && z.last_bytes > 0) kind[ne] = 2, bytes[ne++] = z.last_bytes, rs += z.last_bytes;
  CHECK(ag > 0 && rs > 0 && ne > (int)z.n / 2);
  int mb = 8 / 4;
  for (int r = 0; r < bp->nranks && kind && bytes; r++) {
    const be_prog *pg = &bp->progs[r];
    double g = 0, s = 0;
    int grads = 0, at = 0, order = 1;
    for (int k = 0; k < pg->nops; k++) {
      const be_op *o = &pg->ops[k];
      if (o->kind != BE_OP_COLL || o->ev != BE_EV_DP) continue;
      int is = strcmp(o->name, "zero3_gather") == 0 && o->coll == CM_ALL_GATHER   ? 1
               : strcmp(o->name, "zero3_reduce") == 0 && o->coll == CM_REDUCE_SCATTER ? 2
                                                                                    : 0;
      if (is == 1) g += o->bytes;
      else if (is == 2) s += o->bytes;
      else grads++;
      if (o->mb == 0) /* microbatch 0's, in the schedule's order */
        order &= at < ne && kind[at] == is && bytes[at] == o->bytes, at++;
    }
    CHECK(order && at == ne);
    CHECK_NEAR(g, mb * ag, 1e-9);
    CHECK_NEAR(s, mb * rs, 1e-9);
    CHECK_EQ(grads, 0);
    CHECK_EQ(pg->ops[pg->nops - 1].ev, BE_EV_OPTIMIZER);
  }
  free(kind), free(bytes);
  cm_zero3_sched_free(&z);
  cm_model_destroy(cm);
  spec_plan_clear(&p);
  be_plan_free(bp);
}

/* be_group_stride on tp=2 dp=8 over two 8-GPU nodes of dgx-h100: each TP pair lies in one
 * node (stride 1); the DP group of the even GPUs starts node 0 and steps by 2 across both
 * nodes (stride 2: cm_place_group(8, 2) places it so); the odd GPUs' DP group starts at GPU 1
 * and crosses into node 1, which a placement from GPU 0 does not reproduce (0). */
static void strides(void) {
  be_plan *bp = NULL;
  pp_err err = {0};
  spec_cluster c;
  CHECK_EQ(spec_cluster_load("dgx-h100", 16, &c, &err), PP_OK);
  CHECK_EQ(lower("gpt3-1.3b", 16, "tp=2,dp=8,mbs=1,gbs=8", 2, 1, &bp, NULL, &err), PP_OK);
  if (!bp) return;
  int tp = 0, even = 0, odd = 0;
  for (int g = 0; g < bp->ngroups; g++) {
    const be_group *G = &bp->groups[g];
    int first = bp->progs[G->ranks[0]].gpu, s = be_group_stride(bp, g, &c);
    if (G->kind == SPEC_GRP_TP) {
      CHECK_EQ(s, 1);
      tp++;
    } else if (G->kind == SPEC_GRP_DP && first == 0) {
      CHECK_EQ(s, 2);
      even++;
    } else if (G->kind == SPEC_GRP_DP && first == 1) {
      CHECK_EQ(s, 0);
      odd++;
    }
  }
  CHECK_EQ(tp, 8);
  CHECK_EQ(even, 1);
  CHECK_EQ(odd, 1);
  be_plan_free(bp);
}

int main(void) {
  plans();
  strides();
  zero3();
  long_context();
  reduced();
  return check_status();
}
