/* The cpu device: GEMMs with OpenBLAS (fp32: the CPU has no bf16 tensor cores, so a run's
 * bytes moved equal the GPU's but its element count halves), memory-bound ops on host
 * memory, collectives and pipeline messages with MPI on one communicator per group kind
 * (MPI_Comm_split). Every communication is nonblocking and polled against the run's
 * timeout, so a dead or hung peer becomes an error instead of a hang. */
#include <cblas.h>
#include <math.h>
#include <mpi.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "be_int.h"

#define CPU_MAX_MARKS_GROW 1024

struct be_dev {
  int rank, nranks;
  MPI_Comm world;                   /* a duplicate of the job's communicator */
  MPI_Comm kind_comm[SPEC_NGRPS];   /* this rank's group of each kind (MPI_COMM_NULL) */
  const be_group *groups;
  int ngroups;
  float *a, *b, *c, *s;             /* GEMM operands, attention scores */
  size_t gemm_elems, attn_elems;
  char *sbuf, *rbuf;                /* collective buffers */
  char *pbuf;                       /* pipeline sends: only ever holds rank + 1, so the sends
                                       of a batch share it */
  size_t msg_bytes;
  MPI_Request *pending;             /* the open p2p batch's sends and receives */
  int *from;                        /* per pending request: the receive's peer, -1 a send */
  size_t *roff;                     /* per pending receive: its first float in rbuf */
  int *rcount;                      /* per pending receive: its floats */
  int npending, cappending;
  size_t rused;                     /* floats of rbuf the batch's receives take */
  double *marks;
  int nmarks;
  double timeout_s;
  int verify;
  int failed;
};

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int mpi_fail(be_dev *d, pp_err *err, const char *what, int code) {
  char s[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, s, &len);
  d->failed = 1;
  return pp_err_set(err, PP_DEVICE, "cpu: rank %d: %s: %s", d->rank, what, s);
}

/* Waits for n requests, polling until the timeout. */
static int wait_all(be_dev *d, MPI_Request *req, int n, const char *what, pp_err *err) {
  double t0 = now();
  for (long polls = 0;; polls++) {
    int done = 0;
    if (polls > 64) sched_yield(); /* ranks may share cores (mpirun --oversubscribe) */
    int e = MPI_Testall(n, req, &done, MPI_STATUSES_IGNORE);
    if (e != MPI_SUCCESS) return mpi_fail(d, err, what, e);
    if (done) return PP_OK;
    if (now() - t0 > d->timeout_s) {
      d->failed = 1;
      return pp_err_set(err, PP_DEVICE,
                        "cpu: rank %d: timed out after %g s waiting for %s (a peer died or hung?)",
                        d->rank, d->timeout_s, what);
    }
  }
}

static void *alloc_floats(size_t n) { return n ? malloc(n * sizeof(float)) : NULL; }

static int cpu_open(const be_dev_cfg *cfg, be_dev **out, pp_err *err) {
  *out = NULL;
  be_dev *d = calloc(1, sizeof *d);
  if (!d) return pp_err_set(err, PP_NOMEM, "cpu: out of memory");
  d->rank = cfg->rank, d->nranks = cfg->nranks;
  /* one BLAS thread per rank unless the user says otherwise (OPENBLAS_NUM_THREADS): a rank is
   * one core, as cpu-host's device (cpu-core) is, alone in its job too (`bench gemm`, a
   * one-rank run), and ranks of one job share the cores */
  if (!getenv("OPENBLAS_NUM_THREADS")) openblas_set_num_threads(1);
  d->groups = cfg->groups, d->ngroups = cfg->ngroups;
  d->timeout_s = cfg->timeout_s > 0 ? cfg->timeout_s : 300;
  d->world = MPI_COMM_NULL;
  for (int k = 0; k < SPEC_NGRPS; k++) d->kind_comm[k] = MPI_COMM_NULL;
  int e = MPI_Comm_dup(*(MPI_Comm *)cfg->comm, &d->world);
  if (e != MPI_SUCCESS) {
    int rc = mpi_fail(d, err, "MPI_Comm_dup", e);
    free(d);
    return rc;
  }
  /* one split per kind present: colour = this rank's group of that kind */
  for (int k = 0; k < SPEC_NGRPS; k++) {
    int present = 0, color = MPI_UNDEFINED, key = 0;
    for (int g = 0; g < cfg->ngroups; g++) {
      if (cfg->groups[g].kind != (spec_grp)k) continue;
      present = 1;
      for (int i = 0; i < cfg->groups[g].n; i++)
        if (cfg->groups[g].ranks[i] == d->rank) color = g, key = i;
    }
    if (!present) continue;
    e = MPI_Comm_split(d->world, color, key, &d->kind_comm[k]);
    if (e != MPI_SUCCESS) {
      int rc = mpi_fail(d, err, "MPI_Comm_split", e);
      be_cpu_device.close(d, 1);
      return rc;
    }
  }
  /* fp32 elements: a GPU's bf16 tensor of N elements is N floats here (twice the bytes) */
  d->gemm_elems = (size_t)cfg->max_gemm_elems;
  d->attn_elems = (size_t)cfg->max_attn_elems;
  d->msg_bytes = (size_t)cfg->max_msg_bytes + 64;
  d->a = alloc_floats(d->gemm_elems), d->b = alloc_floats(d->gemm_elems);
  d->c = alloc_floats(d->gemm_elems), d->s = alloc_floats(d->attn_elems);
  d->sbuf = malloc(d->msg_bytes), d->rbuf = malloc(d->msg_bytes), d->pbuf = malloc(d->msg_bytes);
  if ((d->gemm_elems && (!d->a || !d->b || !d->c)) || (d->attn_elems && !d->s) || !d->sbuf ||
      !d->rbuf || !d->pbuf) {
    be_cpu_device.close(d, 0);
    return pp_err_set(err, PP_NOMEM, "cpu: rank %d: cannot allocate buffers (GEMM %.3g, "
                      "attention %.3g elements, messages %.3g bytes)", cfg->rank,
                      cfg->max_gemm_elems, cfg->max_attn_elems, cfg->max_msg_bytes);
  }
  /* operands: pseudo-random in [-1, 1) (never zeros), deterministic per rank */
  uint32_t x = 2463534242u + (uint32_t)d->rank;
  float *bufs[] = {d->a, d->b, d->c};
  for (int q = 0; q < 3; q++)
    for (size_t i = 0; i < d->gemm_elems; i++) {
      x ^= x << 13, x ^= x >> 17, x ^= x << 5;
      bufs[q][i] = (float)(x >> 8) / 8388608.0f - 1.0f;
    }
  memset(d->sbuf, 0, d->msg_bytes), memset(d->rbuf, 0, d->msg_bytes);
  for (size_t i = 0; i < d->msg_bytes / sizeof(float); i++)
    ((float *)d->pbuf)[i] = (float)(d->rank + 1);
  *out = d;
  return PP_OK;
}

static void cpu_close(be_dev *d, int failed) {
  if (!d) return;
  /* after a failure peers may be gone: leave communicators to MPI_Abort/MPI_Finalize */
  if (!failed && !d->failed) {
    if (d->npending) MPI_Waitall(d->npending, d->pending, MPI_STATUSES_IGNORE);
    for (int k = 0; k < SPEC_NGRPS; k++)
      if (d->kind_comm[k] != MPI_COMM_NULL) MPI_Comm_free(&d->kind_comm[k]);
    if (d->world != MPI_COMM_NULL) MPI_Comm_free(&d->world);
  }
  free(d->a), free(d->b), free(d->c), free(d->s), free(d->sbuf), free(d->rbuf), free(d->pbuf);
  free(d->pending), free(d->from), free(d->roff), free(d->rcount), free(d->marks);
  free(d);
}

/* ---- compute --------------------------------------------------------------------------- */

static int fits(be_dev *d, double elems, size_t have, const char *what, pp_err *err) {
  if (elems <= (double)have) return PP_OK;
  return pp_err_set(err, PP_INTERNAL, "cpu: rank %d: %s needs %.0f elements, buffers hold %zu",
                    d->rank, what, elems, have);
}

static int cpu_gemm(be_dev *d, int m, int n, int k, int batch, pp_err *err) {
  double mk = (double)m * k, kn = (double)k * n, mn = (double)m * n;
  if (fits(d, batch * fmax(mk, fmax(kn, mn)), d->gemm_elems, "gemm", err)) return err->code;
  for (int i = 0; i < batch; i++)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f,
                d->a + (size_t)i * m * k, k, d->b + (size_t)i * k * n, n, 0.0f,
                d->c + (size_t)i * m * n, n);
  return PP_OK;
}

/* Row softmax over the first `len` columns of a row of `ld` scores. */
static void softmax_row(float *row, int len) {
  float mx = row[0];
  for (int j = 1; j < len; j++) mx = row[j] > mx ? row[j] : mx;
  float sum = 0;
  for (int j = 0; j < len; j++) sum += row[j] = expf(row[j] - mx);
  float inv = 1.0f / sum;
  for (int j = 0; j < len; j++) row[j] *= inv;
}

/* scores = Q K^T, softmax, out = P V per (sequence, head); causal attention splits the
 * queries into 4 blocks, block i attending to the first (i + 1) / 4 of the keys. */
static int cpu_attn(be_dev *d, int batch, int sq, int skv, int dh, int causal, pp_err *err) {
  if (fits(d, (double)batch * fmax(sq, skv) * dh, d->gemm_elems, "attention", err) ||
      fits(d, (double)batch * sq * skv, d->attn_elems, "attention scores", err))
    return err->code;
  int blocks = causal && sq >= 4 ? 4 : 1;
  for (int b = 0; b < batch; b++) {
    const float *q = d->a + (size_t)b * sq * dh, *kk = d->b + (size_t)b * skv * dh;
    const float *v = d->b + (size_t)b * skv * dh;
    float *s = d->s + (size_t)b * sq * skv, *o = d->c + (size_t)b * sq * dh;
    for (int blk = 0; blk < blocks; blk++) {
      int q0 = (int)((long)sq * blk / blocks), q1 = (int)((long)sq * (blk + 1) / blocks);
      int keys = blocks == 1 ? skv : (int)((long)skv * (blk + 1) / blocks);
      int rows = q1 - q0;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, keys, dh, 1.0f,
                  q + (size_t)q0 * dh, dh, kk, dh, 0.0f, s + (size_t)q0 * skv, skv);
      for (int r = q0; r < q1; r++) softmax_row(s + (size_t)r * skv, keys);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, dh, keys, 1.0f,
                  s + (size_t)q0 * skv, skv, v, dh, 0.0f, o + (size_t)q0 * dh, dh);
    }
  }
  return PP_OK;
}

/* Reads bytes/2 and writes bytes/2 (y = a x + b), cycling over the largest buffers. */
static int cpu_mem(be_dev *d, double bytes, pp_err *err) {
  (void)err;
  float *x = d->a, *y = d->c;
  size_t cap = d->gemm_elems;
  if (!cap) x = (float *)d->sbuf, y = (float *)d->rbuf, cap = d->msg_bytes / sizeof(float);
  size_t left = (size_t)(bytes / (2 * sizeof(float)));
  while (left > 0) {
    size_t n = left < cap ? left : cap;
    for (size_t i = 0; i < n; i++) y[i] = 0.999f * x[i] + 0.001f;
    left -= n;
  }
  return PP_OK;
}

/* ---- communication ----------------------------------------------------------------------- */

static int my_index(const be_group *g, int rank) {
  for (int i = 0; i < g->n; i++)
    if (g->ranks[i] == rank) return i;
  return -1;
}

/* Value element i of member r's input holds while verifying (small integers, exact). */
static float pattern(int r, size_t i, size_t chunk) {
  return (float)(r + 1 + (chunk ? (int)(i / chunk) % 7 : 0));
}

static int check(be_dev *d, const char *what, int g, const float *got, size_t n,
                 float (*want)(const be_group *, size_t, size_t, int), const be_group *grp,
                 size_t chunk, int me, pp_err *err) {
  for (size_t i = 0; i < n; i++) {
    float w = want(grp, i, chunk, me);
    if (fabsf(got[i] - w) > 1e-3f * fabsf(w) + 1e-3f) {
      d->failed = 1;
      return pp_err_set(err, PP_DEVICE, "cpu: rank %d: %s on group %d: element %zu is %g, "
                        "expected %g", d->rank, what, g, i, got[i], w);
    }
  }
  return PP_OK;
}

static float want_sum(const be_group *g, size_t i, size_t chunk, int me) {
  (void)me;
  float s = 0;
  for (int r = 0; r < g->n; r++) s += pattern(r, i, chunk);
  return s;
}
static float want_gather(const be_group *g, size_t i, size_t chunk, int me) {
  (void)g, (void)me;
  return pattern((int)(i / chunk), i % chunk, 0);
}
static float want_rs(const be_group *g, size_t i, size_t chunk, int me) {
  return want_sum(g, (size_t)me * chunk + i, chunk, me);
}
static float want_a2a(const be_group *g, size_t i, size_t chunk, int me) {
  (void)g;
  return (float)((int)(i / chunk) + 1) * 100 + (float)me; /* from member i/chunk, block me */
}
static float want_bcast(const be_group *g, size_t i, size_t chunk, int me) {
  (void)g, (void)me;
  return pattern(0, i, chunk);
}
static float want_ring(const be_group *g, size_t i, size_t chunk, int me) {
  return pattern((me + g->n - 1) % g->n, i, chunk);
}

static int cpu_coll(be_dev *d, int gi, cm_coll c, double bytes, pp_err *err) {
  if (gi < 0 || gi >= d->ngroups) return pp_err_set(err, PP_INTERNAL, "cpu: group %d?", gi);
  const be_group *g = &d->groups[gi];
  MPI_Comm comm = d->kind_comm[g->kind];
  int me = my_index(g, d->rank), n = g->n;
  if (me < 0 || comm == MPI_COMM_NULL)
    return pp_err_set(err, PP_INTERNAL, "cpu: rank %d is not in group %d", d->rank, gi);
  if (bytes > (double)d->msg_bytes)
    return pp_err_set(err, PP_INTERNAL, "cpu: %.0f bytes exceed the %zu-byte buffers", bytes,
                      d->msg_bytes);
  size_t total = (size_t)(bytes / sizeof(float)) / (size_t)n * (size_t)n; /* whole chunks */
  if (total < (size_t)n) total = (size_t)n;
  int chunk = (int)(total / (size_t)n);
  float *in = (float *)d->sbuf, *out = (float *)d->rbuf;
  MPI_Request req[2];
  int nreq = 1, e = MPI_SUCCESS;
  float (*want)(const be_group *, size_t, size_t, int) = NULL;
  size_t check_n = total;
  if (d->verify) {
    for (size_t i = 0; i < total; i++)
      in[i] = c == CM_ALL_TO_ALL ? (float)(me + 1) * 100 + (float)(i / (size_t)chunk)
                                 : pattern(me, i, c == CM_ALL_GATHER ? 0 : (size_t)chunk);
  }
  switch (c) {
  case CM_ALL_REDUCE:
    e = MPI_Iallreduce(in, out, (int)total, MPI_FLOAT, MPI_SUM, comm, req);
    want = want_sum;
    break;
  case CM_ALL_GATHER: /* bytes: the gathered output */
    e = MPI_Iallgather(in, chunk, MPI_FLOAT, out, chunk, MPI_FLOAT, comm, req);
    want = want_gather;
    break;
  case CM_REDUCE_SCATTER: /* bytes: the input */
    e = MPI_Ireduce_scatter_block(in, out, chunk, MPI_FLOAT, MPI_SUM, comm, req);
    want = want_rs, check_n = (size_t)chunk;
    break;
  case CM_ALL_TO_ALL:
    e = MPI_Ialltoall(in, chunk, MPI_FLOAT, out, chunk, MPI_FLOAT, comm, req);
    want = want_a2a;
    break;
  case CM_BROADCAST:
    e = MPI_Ibcast(me == 0 ? in : out, (int)total, MPI_FLOAT, 0, comm, req);
    if (me == 0) memcpy(out, in, total * sizeof(float));
    want = want_bcast;
    break;
  case CM_SEND_RECV: /* ring exchange: to the next member, from the previous */
    e = MPI_Irecv(out, (int)total, MPI_FLOAT, (me + n - 1) % n, 1, comm, &req[0]);
    if (e == MPI_SUCCESS) e = MPI_Isend(in, (int)total, MPI_FLOAT, (me + 1) % n, 1, comm, &req[1]);
    nreq = 2, want = want_ring;
    break;
  default:
    return pp_err_set(err, PP_INTERNAL, "cpu: collective %d?", (int)c);
  }
  if (e != MPI_SUCCESS) return mpi_fail(d, err, cm_coll_name(c), e);
  char what[96];
  snprintf(what, sizeof what, "%s on group %d (%s)", cm_coll_name(c), gi, spec_grp_name(g->kind));
  if (wait_all(d, req, nreq, what, err)) return err->code;
  if (d->verify) return check(d, cm_coll_name(c), gi, out, check_n, want, g, (size_t)chunk, me, err);
  return PP_OK;
}

/* Posts a message of the open batch (from: the receive's peer, -1 a send). */
static int batch_post(be_dev *d, int peer, double bytes, int from, pp_err *err) {
  if (d->npending == d->cappending) {
    int cap = d->cappending ? 2 * d->cappending : 64;
    MPI_Request *r = realloc(d->pending, (size_t)cap * sizeof *r);
    if (r) d->pending = r;
    int *f = realloc(d->from, (size_t)cap * sizeof *f);
    if (f) d->from = f;
    size_t *o = realloc(d->roff, (size_t)cap * sizeof *o);
    if (o) d->roff = o;
    int *c = realloc(d->rcount, (size_t)cap * sizeof *c);
    if (c) d->rcount = c;
    if (!r || !f || !o || !c) return pp_err_set(err, PP_NOMEM, "cpu: out of memory");
    d->cappending = cap;
  }
  int count = (int)(bytes / sizeof(float)), k = d->npending, e;
  if (from < 0) {
    e = MPI_Isend(d->pbuf, count, MPI_FLOAT, peer, 0, d->world, &d->pending[k]);
  } else {
    if ((d->rused + (size_t)count) * sizeof(float) > d->msg_bytes)
      return pp_err_set(err, PP_INTERNAL, "cpu: the receives of a p2p batch take %zu bytes: "
                        "the buffers hold %zu", (d->rused + (size_t)count) * sizeof(float),
                        d->msg_bytes);
    d->roff[k] = d->rused, d->rcount[k] = count;
    d->rused += (size_t)count;
    e = MPI_Irecv((float *)d->rbuf + d->roff[k], count, MPI_FLOAT, peer, 0, d->world,
                  &d->pending[k]);
  }
  if (e != MPI_SUCCESS) return mpi_fail(d, err, from < 0 ? "MPI_Isend" : "MPI_Irecv", e);
  d->from[k] = from;
  d->npending++;
  return PP_OK;
}

/* The batch's end: waits for all of it; while verifying, checks what each receive got. */
static int batch_wait(be_dev *d, pp_err *err) {
  int n = d->npending;
  if (wait_all(d, d->pending, n, "a batch of pipeline messages", err)) return err->code;
  d->npending = 0, d->rused = 0;
  for (int k = 0; k < n && d->verify; k++) {
    if (d->from[k] < 0) continue;
    const float *got = (const float *)d->rbuf + d->roff[k];
    for (int i = 0; i < d->rcount[k]; i++)
      if (got[i] != (float)(d->from[k] + 1)) {
        d->failed = 1;
        return pp_err_set(err, PP_DEVICE, "cpu: rank %d: message from rank %d: element %d is "
                          "%g, expected %d", d->rank, d->from[k], i, got[i], d->from[k] + 1);
      }
  }
  return PP_OK;
}

static int cpu_send(be_dev *d, int peer, double bytes, int end, pp_err *err) {
  if (batch_post(d, peer, bytes, -1, err)) return err->code;
  return end ? batch_wait(d, err) : PP_OK;
}

static int cpu_recv(be_dev *d, int peer, double bytes, int end, pp_err *err) {
  if (batch_post(d, peer, bytes, peer, err)) return err->code;
  return end ? batch_wait(d, err) : PP_OK;
}

static int cpu_barrier(be_dev *d, pp_err *err) {
  MPI_Request req;
  int e = MPI_Ibarrier(d->world, &req);
  if (e != MPI_SUCCESS) return mpi_fail(d, err, "MPI_Ibarrier", e);
  return wait_all(d, &req, 1, "the other ranks at a barrier", err);
}

/* ---- timing --------------------------------------------------------------------------------- */

static int cpu_mark(be_dev *d, int i, pp_err *err) {
  if (i >= d->nmarks) {
    int n = i + CPU_MAX_MARKS_GROW;
    double *m = realloc(d->marks, (size_t)n * sizeof *m);
    if (!m) return pp_err_set(err, PP_NOMEM, "cpu: out of memory");
    d->marks = m, d->nmarks = n;
  }
  d->marks[i] = now();
  return PP_OK;
}

/* Every batch has waited for all of its messages: one left open is the lowering's error. */
static int cpu_fence(be_dev *d, pp_err *err) {
  if (!d->npending) return PP_OK;
  return pp_err_set(err, PP_INTERNAL, "cpu: rank %d: fence with a p2p batch of %d messages "
                    "open", d->rank, d->npending);
}

static int cpu_times(be_dev *d, int n, double *t, pp_err *err) {
  if (n > d->nmarks) return pp_err_set(err, PP_INTERNAL, "cpu: %d marks asked, %d made", n, d->nmarks);
  for (int i = 0; i < n; i++) t[i] = d->marks[i] - d->marks[0];
  return PP_OK;
}

static void cpu_verify(be_dev *d, int on) { d->verify = on; }

static double cpu_peak(be_dev *d) {
  (void)d;
  return 0; /* measured by bench_backend, not known a priori */
}

const be_device be_cpu_device = {"cpu",      cpu_open,  cpu_close,  cpu_gemm,  cpu_attn,
                                 cpu_mem,    cpu_coll,  cpu_send,   cpu_recv,  cpu_barrier,
                                 cpu_mark,   cpu_fence, cpu_times,  cpu_verify, cpu_peak};
