/* Microbenchmarks through a device (podplan bench): a sweep of GEMM shapes on one rank, and a
 * sweep of collective sizes over every rank of the job, each size checked before it is timed.
 * The formulas behind the reported figures are here: TFLOP/s = 2 m n k / time; algbw = bytes /
 * time and busbw = algbw * cm_coll_busbw_factor (nccl-tests' definitions). */
#include <math.h>
#include <string.h>

#include "be_int.h"

/* ---- GEMM -------------------------------------------------------------------------------- */

int be_bench_gemm_shapes(const char *device, be_bench_gemm_row *rows, int cap) {
  int cuda = strcmp(device, "cuda") == 0, n = 0;
  for (int s = cuda ? 1024 : 256; s <= (cuda ? 16384 : 2048) && n < cap; s *= 2)
    rows[n++] = (be_bench_gemm_row){.m = s, .n = s, .k = s};
  return n;
}

double be_bench_gemm_elems(const be_bench_gemm_row *rows, int n) {
  double elems = 0;
  for (int i = 0; i < n; i++)
    elems = fmax(elems, fmax((double)rows[i].m * rows[i].k,
                             fmax((double)rows[i].k * rows[i].n, (double)rows[i].m * rows[i].n)));
  return elems;
}

int be_bench_gemm(const be_device *dv, be_dev *d, be_bench_gemm_row *rows, int n, int reps,
                  pp_err *err) {
  int rc = PP_OK;
  for (int i = 0; i < n && !rc; i++) {
    be_bench_gemm_row *s = &rows[i];
    double t[2];
    for (int w = 0; w < 3 && !rc; w++) rc = dv->gemm(d, s->m, s->n, s->k, 1, err);
    if (!rc) rc = dv->mark(d, 0, err);
    for (int r = 0; r < reps && !rc; r++) rc = dv->gemm(d, s->m, s->n, s->k, 1, err);
    if (!rc) rc = dv->mark(d, 1, err);
    if (!rc) rc = dv->fence(d, err);
    if (!rc) rc = dv->times(d, 2, t, err);
    if (rc) break;
    s->time_s = t[1] / reps;
    s->tflops = 2.0 * s->m * s->n * s->k / s->time_s / 1e12;
  }
  return rc;
}

/* ---- collectives ------------------------------------------------------------------------- */

int be_bench_coll_sizes(const be_bench_coll_opts *o) {
  int n = 0;
  for (double b = o->min_bytes; b <= o->max_bytes * 1.0000001; b *= o->factor) n++;
  return n;
}

/* `runs` collectives between two marks; the mean time of one, the job's slowest rank's. */
static int time_coll(const be_device *dv, be_dev *d, cm_coll c, double bytes, int runs,
                     double *mean, pp_err *err) {
  double t[2];
  int rc = dv->barrier(d, err);
  if (!rc) rc = dv->mark(d, 0, err);
  for (int i = 0; i < runs && !rc; i++) rc = dv->coll(d, 0, c, bytes, err);
  if (!rc) rc = dv->mark(d, 1, err);
  if (!rc) rc = dv->fence(d, err);
  if (!rc) rc = dv->times(d, 2, t, err);
  return rc ? rc : be_job_max(t[1] / runs, mean, err);
}

int be_bench_coll(const be_device *dv, be_dev *d, const be_bench_coll_opts *o,
                  be_bench_coll_row *rows, int *nrows, pp_err *err) {
  int n = be_job_size(), rc = PP_OK;
  *nrows = 0;
  double f = cm_coll_busbw_factor(o->coll, n);
  for (double b = o->min_bytes; b <= o->max_bytes * 1.0000001 && !rc; b *= o->factor) {
    be_bench_coll_row *r = &rows[*nrows];
    /* whole float elements, divisible by the ranks */
    r->count = floor(b / 4 / n) * n;
    if (r->count < n) r->count = n;
    r->bytes = r->count * 4;
    /* the first run of each size checks the result */
    dv->verify(d, 1);
    rc = dv->coll(d, 0, o->coll, r->bytes, err);
    dv->verify(d, 0);
    for (int w = 0; w < o->warmup && !rc; w++) rc = dv->coll(d, 0, o->coll, r->bytes, err);
    for (int k = 0; k < 2 && !rc; k++) {
      rc = time_coll(dv, d, o->coll, r->bytes, o->iters, &r->time_s[k], err);
      r->algbw_gbps[k] = r->bytes / r->time_s[k] / 1e9;
      r->busbw_gbps[k] = r->algbw_gbps[k] * f;
    }
    if (rc) break;
    (*nrows)++;
    if (o->row) o->row(r, o->arg);
  }
  return rc;
}
