/* The executor: runs one rank's program on a device, op by op through a table indexed by op
 * kind, with a timing mark after every op. Iterations start together (a barrier of the job);
 * the first may verify collectives and receives; the timed ones give per-op means. */
#include <stdlib.h>
#include <string.h>

#include "be_int.h"

typedef int (*run_fn)(const be_device *dv, be_dev *d, const be_op *op, pp_err *err);

static int run_gemm(const be_device *dv, be_dev *d, const be_op *op, pp_err *err) {
  return dv->gemm(d, op->m, op->n, op->k, op->batch, err);
}
static int run_attn(const be_device *dv, be_dev *d, const be_op *op, pp_err *err) {
  return dv->attn(d, op->batch, op->m, op->n, op->k, op->causal, err);
}
static int run_mem(const be_device *dv, be_dev *d, const be_op *op, pp_err *err) {
  return dv->mem(d, op->bytes, err);
}
static int run_coll(const be_device *dv, be_dev *d, const be_op *op, pp_err *err) {
  return dv->coll(d, op->group, op->coll, op->bytes, err);
}
static int run_send(const be_device *dv, be_dev *d, const be_op *op, pp_err *err) {
  return dv->send(d, op->peer, op->bytes, op->batch_end, err);
}
static int run_recv(const be_device *dv, be_dev *d, const be_op *op, pp_err *err) {
  return dv->recv(d, op->peer, op->bytes, op->batch_end, err);
}
static int run_barrier(const be_device *dv, be_dev *d, const be_op *op, pp_err *err) {
  (void)op;
  return dv->barrier(d, err);
}

static const run_fn run_op[BE_NOPKINDS] = {run_gemm, run_attn, run_mem,    run_coll,
                                           run_send, run_recv, run_barrier};

void be_exec_result_clear(be_exec_result *r) {
  if (!r) return;
  free(r->op_s), free(r->op_start), free(r->iter_s), free(r->marks);
  memset(r, 0, sizeof *r);
}

/* One iteration: barrier, mark 0, every op followed by its mark, fence; t gets the marks. */
static int iteration(const be_device *dv, be_dev *d, const be_prog *pg, double *t,
                     pp_err *err) {
  int rc = dv->barrier(d, err);
  if (!rc) rc = dv->mark(d, 0, err);
  for (int i = 0; i < pg->nops && !rc; i++) {
    const be_op *op = &pg->ops[i];
    rc = run_op[op->kind](dv, d, op, err);
    if (rc) {
      pp_err_prefix(err, "rank %d, op %d (%s %s, %s)", pg->rank, i, be_op_kind_name(op->kind),
                    op->name ? op->name : "", be_ev_name(op->ev));
      break;
    }
    rc = dv->mark(d, i + 1, err);
  }
  if (!rc) rc = dv->fence(d, err);
  if (!rc) rc = dv->times(d, pg->nops + 1, t, err);
  return rc;
}

int be_exec(const be_device *dv, be_dev *d, const be_prog *pg, const be_exec_opts *o,
            be_exec_result *r, pp_err *err) {
  memset(r, 0, sizeof *r);
  if (o->iters < 1 || o->warmup < 0)
    return pp_err_set(err, PP_USAGE, "backend: iterations must be >= 1 (warm-up >= 0)");
  int n = pg->nops;
  r->nops = n, r->iters = o->iters;
  r->op_s = calloc((size_t)n + 1, sizeof *r->op_s);
  r->op_start = calloc((size_t)n + 1, sizeof *r->op_start);
  r->iter_s = calloc((size_t)o->iters, sizeof *r->iter_s);
  r->marks = calloc((size_t)o->iters * ((size_t)n + 1), sizeof *r->marks);
  double *t = malloc(((size_t)n + 1) * sizeof *t);
  int rc = PP_OK;
  if (!r->op_s || !r->op_start || !r->iter_s || !r->marks || !t)
    rc = pp_err_set(err, PP_NOMEM, "backend: out of memory");
  if (!rc && o->verify) {
    dv->verify(d, 1);
    rc = iteration(dv, d, pg, t, err);
    dv->verify(d, 0);
    r->verified = rc == PP_OK;
  }
  for (int it = 0; it < o->warmup && !rc; it++) rc = iteration(dv, d, pg, t, err);
  for (int it = 0; it < o->iters && !rc; it++) {
    rc = iteration(dv, d, pg, t, err);
    if (rc) break;
    r->iter_s[it] = t[n];
    for (int i = 0; i < n; i++) r->op_s[i] += (t[i + 1] - t[i]) / o->iters;
    memcpy(r->marks + (size_t)it * ((size_t)n + 1), t, ((size_t)n + 1) * sizeof *t);
    if (it == o->iters - 1) memcpy(r->op_start, t, ((size_t)n + 1) * sizeof *t); /* + the end */
  }
  free(t);
  if (rc) be_exec_result_clear(r);
  return rc;
}
