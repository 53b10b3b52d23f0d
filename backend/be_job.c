/* The job: the ranks mpirun or srun started, over MPI, so that the CLI and the searches never
 * call MPI themselves. A process no launcher started is a job of one rank, with or without MPI
 * started; every function here works in both. No state of its own: MPI's per-process state
 * (initialised, finalised) is the only state. */
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "be_int.h"

/* The variables launchers set in each rank before MPI starts. */
static const char *const rank_vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK",
                                        "SLURM_PROCID"};

/* 1 between MPI_Init and MPI_Finalize. */
static int mpi_on(void) {
  int inited = 0, finalized = 0;
  MPI_Initialized(&inited);
  if (inited) MPI_Finalized(&finalized);
  return inited && !finalized;
}

static int mpi_fail(int e, const char *what, pp_err *err) {
  char msg[MPI_MAX_ERROR_STRING] = "";
  int len = 0;
  MPI_Error_string(e, msg, &len);
  return pp_err_set(err, PP_DEVICE, "MPI: %s: %s", what, msg);
}

int be_job_launcher_rank(void) {
  for (size_t i = 0; i < sizeof rank_vars / sizeof rank_vars[0]; i++) {
    const char *v = getenv(rank_vars[i]);
    if (v && *v) return atoi(v);
  }
  return 0;
}

static int launched(void) {
  for (size_t i = 0; i < sizeof rank_vars / sizeof rank_vars[0]; i++) {
    const char *v = getenv(rank_vars[i]);
    if (v && *v) return 1;
  }
  return 0;
}

int be_job_init(int always, pp_err *err) {
  int inited = 0, finalized = 0;
  MPI_Initialized(&inited);
  MPI_Finalized(&finalized);
  if (finalized) return pp_err_set(err, PP_INTERNAL, "MPI was finalized: it cannot start again");
  if (inited || (!always && !launched())) return PP_OK;
  if (MPI_Init(NULL, NULL) != MPI_SUCCESS) return pp_err_set(err, PP_DEVICE, "MPI_Init failed");
  return PP_OK;
}

void be_job_finalize(void) {
  if (mpi_on()) MPI_Finalize();
}

int be_job_has_mpi(void) {
#ifdef PODPLAN_MPI1
  return 0;
#else
  return 1;
#endif
}

int be_job_rank(void) {
  int r = 0;
  if (mpi_on()) MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int be_job_size(void) {
  int n = 1;
  if (mpi_on()) MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

int be_job_local_rank(void) {
  MPI_Comm node;
  int lr = 0;
  if (mpi_on() && MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL,
                                      &node) == MPI_SUCCESS) {
    MPI_Comm_rank(node, &lr);
    MPI_Comm_free(&node);
  }
  return lr;
}

void be_job_abort(int status) {
  fflush(NULL);
  if (mpi_on()) MPI_Abort(MPI_COMM_WORLD, status ? status : 1);
  _exit(status ? status : 1);
}

int be_job_open(const be_device *dv, be_dev_cfg *cfg, be_dev **out, pp_err *err) {
  *out = NULL;
  if (!mpi_on())
    return pp_err_set(err, PP_INTERNAL, "backend: a device opens on a job's rank (be_job_init)");
  MPI_Comm world = MPI_COMM_WORLD; /* the devices take an MPI_Comm * (be_dev_cfg.comm) */
  cfg->rank = be_job_rank();
  cfg->nranks = be_job_size();
  cfg->local_rank = be_job_local_rank();
  cfg->comm = &world;
  int rc = dv->open(cfg, out, err);
  cfg->comm = NULL; /* it pointed here */
  return rc;
}

int be_job_max(double v, double *out, pp_err *err) {
  *out = v;
  if (!mpi_on()) return PP_OK;
  int e = MPI_Allreduce(&v, out, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return e == MPI_SUCCESS ? PP_OK : mpi_fail(e, "the job's maximum", err);
}

/* ---- broadcasting from rank 0 --------------------------------------------------------------- */

int be_job_bcast_bytes(const void *buf, size_t n, void **out, size_t *out_n, pp_err *err) {
  *out = NULL, *out_n = 0;
  if (!mpi_on()) { /* a job of one rank: rank 0 has it */
    *out_n = n;
    return PP_OK;
  }
  int rank = be_job_rank(), e;
  long long len = rank == 0 ? (n > (size_t)INT_MAX ? -1 : (long long)n) : 0;
  if ((e = MPI_Bcast(&len, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD)) != MPI_SUCCESS)
    return mpi_fail(e, "broadcasting a size", err);
  if (len < 0) return pp_err_set(err, PP_INPUT, "backend: more than 2 GiB to broadcast");
  char *b = rank == 0 ? (char *)buf : malloc(len ? (size_t)len : 1);
  double lacking = 0;
  int rc = be_job_max(b || len == 0 ? 0 : 1, &lacking, err); /* every rank learns */
  if (!rc && lacking > 0) rc = pp_err_set(err, PP_NOMEM, "backend: a rank cannot hold a broadcast");
  if (!rc && len && (e = MPI_Bcast(b, (int)len, MPI_BYTE, 0, MPI_COMM_WORLD)) != MPI_SUCCESS)
    rc = mpi_fail(e, "broadcasting bytes", err);
  if (rank == 0) {
    if (!rc) *out_n = n;
    return rc;
  }
  if (rc) {
    free(b);
    return rc;
  }
  *out = b, *out_n = (size_t)len;
  return PP_OK;
}

/* ---- gathering on rank 0 ------------------------------------------------------------------- */

/* Rank 0's verdict, the same on every rank afterwards: 0 ok, 1 out of memory, 2 too large. */
static int agree(int *status, pp_err *err) {
  int e = MPI_Bcast(status, 1, MPI_INT, 0, MPI_COMM_WORLD);
  return e == MPI_SUCCESS ? PP_OK : mpi_fail(e, "broadcasting a gather's status", err);
}

/* Per-rank byte counts and displacements as MPI's ints, on rank 0; 2 when they do not fit. */
static int counts(const long long *each, int size, int *cnt, int *displ, long long *total) {
  *total = 0;
  for (int i = 0; i < size; i++) {
    if (each[i] < 0 || each[i] > INT_MAX || *total > INT_MAX - each[i]) return 2;
    cnt[i] = (int)each[i], displ[i] = (int)*total, *total += each[i];
  }
  return 0;
}

int be_job_gather_bytes(const void *buf, size_t n, void **all, size_t *all_n, size_t *lens,
                        pp_err *err) {
  *all = NULL, *all_n = 0;
  if (!mpi_on()) { /* a job of one rank */
    if (!(*all = malloc(n ? n : 1))) return pp_err_set(err, PP_NOMEM, "backend: out of memory");
    if (n) memcpy(*all, buf, n);
    *all_n = n;
    if (lens) lens[0] = n;
    return PP_OK;
  }
  int rank = be_job_rank(), size = be_job_size(), status = 0, e, rc;
  long long mine = n > (size_t)LLONG_MAX ? -1 : (long long)n, *each = NULL, total = 0;
  int *cnt = NULL, *displ = NULL;
  char *out = NULL;
  if (rank == 0) {
    each = malloc((size_t)size * sizeof *each);
    cnt = malloc((size_t)size * sizeof *cnt);
    displ = malloc((size_t)size * sizeof *displ);
    status = !each || !cnt || !displ;
  }
  if ((rc = agree(&status, err)) || status) goto done;
  e = MPI_Gather(&mine, 1, MPI_LONG_LONG, each, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
  if (e != MPI_SUCCESS) {
    rc = mpi_fail(e, "gathering sizes", err);
    goto done;
  }
  if (rank == 0 && !(status = counts(each, size, cnt, displ, &total)))
    status = !(out = malloc(total ? (size_t)total : 1));
  if ((rc = agree(&status, err)) || status) goto done;
  e = MPI_Gatherv(buf, (int)n, MPI_BYTE, out, cnt, displ, MPI_BYTE, 0, MPI_COMM_WORLD);
  if (e != MPI_SUCCESS) {
    rc = mpi_fail(e, "gathering bytes", err);
    goto done;
  }
  if (rank == 0) {
    *all = out, *all_n = (size_t)total, out = NULL;
    for (int i = 0; lens && i < size; i++) lens[i] = (size_t)each[i];
  }
done:
  if (!rc && status == 1)
    rc = pp_err_set(err, PP_NOMEM, "backend: rank 0 cannot hold what the job's ranks send");
  else if (!rc && status)
    rc = pp_err_set(err, PP_INPUT, "backend: the job's ranks send more than 2 GiB to gather");
  free(each), free(cnt), free(displ), free(out);
  return rc;
}

/* ---- execution results ----------------------------------------------------------------------
 * Each rank sends one array of doubles: nops, iters, verified, whether marks follow, then
 * op_s[nops], op_start[nops + 1], iter_s[iters] and, when kept, marks[iters * (nops + 1)]
 * (integers are exact as doubles). */

void be_job_result_clear(be_job_result *g) {
  free(g->nops), free(g->displ), free(g->op_s), free(g->start), free(g->iter_s), free(g->job_s);
  free(g->marks), free(g->mdispl);
  memset(g, 0, sizeof *g);
}

enum { HEAD = 4 };

static size_t marks_len(int nops, int iters) { return (size_t)iters * ((size_t)nops + 1); }

static double *pack(const be_exec_result *r, size_t *n) {
  size_t k = (size_t)r->nops, nm = r->marks ? marks_len(r->nops, r->iters) : 0;
  *n = HEAD + k + k + 1 + (size_t)r->iters + nm;
  double *v = malloc(*n * sizeof *v);
  if (!v) return NULL;
  v[0] = r->nops, v[1] = r->iters, v[2] = r->verified, v[3] = r->marks != NULL;
  memcpy(v + HEAD, r->op_s, k * sizeof *v);
  memcpy(v + HEAD + k, r->op_start, (k + 1) * sizeof *v);
  memcpy(v + HEAD + 2 * k + 1, r->iter_s, (size_t)r->iters * sizeof *v);
  if (nm) memcpy(v + HEAD + 2 * k + 1 + r->iters, r->marks, nm * sizeof *v);
  return v;
}

/* Rank 0: the ranks' arrays into g (every rank the same number of iterations). */
static int unpack(const double *v, const size_t *lens, be_job_result *g, pp_err *err) {
  int total = 0, nr = g->nranks, all_marks = 1;
  size_t mtotal = 0;
  const double *at = v;
  g->nops = malloc((size_t)nr * sizeof *g->nops);
  g->displ = malloc((size_t)nr * sizeof *g->displ);
  g->mdispl = malloc((size_t)nr * sizeof *g->mdispl);
  if (!g->nops || !g->displ || !g->mdispl) return pp_err_set(err, PP_NOMEM, "backend: out of memory");
  g->verified = 1;
  for (int r = 0; r < nr; r++) {
    size_t n = lens[r] / sizeof *v;
    if (n < HEAD || (r > 0 && (int)at[1] != g->iters) ||
        n != HEAD + 2 * (size_t)at[0] + 1 + (size_t)at[1] +
                 (at[3] != 0 ? marks_len((int)at[0], (int)at[1]) : 0))
      return pp_err_set(err, PP_INTERNAL, "backend: rank %d sent a malformed result", r);
    g->iters = (int)at[1];
    g->nops[r] = (int)at[0], g->displ[r] = total, total += g->nops[r];
    g->mdispl[r] = mtotal, mtotal += marks_len(g->nops[r], g->iters);
    g->verified &= at[2] != 0;
    all_marks &= at[3] != 0;
    at += n;
  }
  g->op_s = malloc(((size_t)total + 1) * sizeof *g->op_s);
  g->start = malloc(((size_t)total + nr) * sizeof *g->start);
  g->iter_s = malloc(((size_t)nr * g->iters + 1) * sizeof *g->iter_s);
  g->job_s = calloc((size_t)g->iters + 1, sizeof *g->job_s);
  g->marks = all_marks ? malloc((mtotal + 1) * sizeof *g->marks) : NULL;
  if (!g->op_s || !g->start || !g->iter_s || !g->job_s || (all_marks && !g->marks))
    return pp_err_set(err, PP_NOMEM, "backend: out of memory");
  at = v;
  for (int r = 0; r < nr; r++) {
    size_t k = (size_t)g->nops[r];
    memcpy(g->op_s + g->displ[r], at + HEAD, k * sizeof *v);
    memcpy(g->start + g->displ[r] + r, at + HEAD + k, (k + 1) * sizeof *v);
    memcpy(g->iter_s + (size_t)r * g->iters, at + HEAD + 2 * k + 1, (size_t)g->iters * sizeof *v);
    if (g->marks)
      memcpy(g->marks + g->mdispl[r], at + HEAD + 2 * k + 1 + g->iters,
             marks_len((int)k, g->iters) * sizeof *v);
    at += lens[r] / sizeof *v;
  }
  for (int it = 0; it < g->iters; it++)
    for (int r = 0; r < nr; r++)
      if (g->iter_s[r * g->iters + it] > g->job_s[it]) g->job_s[it] = g->iter_s[r * g->iters + it];
  return PP_OK;
}

int be_job_gather(const be_exec_result *r, be_job_result *g, pp_err *err) {
  memset(g, 0, sizeof *g);
  int size = be_job_size(), rc;
  size_t n = 0, all_n = 0, *lens = be_job_rank() == 0 ? calloc((size_t)size, sizeof *lens) : NULL;
  void *all = NULL;
  double *mine = pack(r, &n);
  /* a rank short of memory still takes part, sending nothing: rank 0 then fails */
  rc = be_job_gather_bytes(mine, mine ? n * sizeof *mine : 0, &all, &all_n, lens, err);
  if (!rc && be_job_rank() == 0) {
    g->nranks = size;
    rc = lens ? unpack(all, lens, g, err) : pp_err_set(err, PP_NOMEM, "backend: out of memory");
  }
  if (rc) be_job_result_clear(g);
  free(mine), free(all), free(lens);
  return rc;
}

void be_job_iter_stats(const be_job_result *g, double *mean, double *lo, double *hi, int *slow) {
  *mean = 0, *lo = 1e300, *hi = 0, *slow = 0;
  for (int it = 0; it < g->iters; it++) {
    double t = g->job_s[it];
    *mean += t / g->iters;
    if (t < *lo) *lo = t;
    if (t > *hi) *hi = t;
  }
  double worst = -1;
  for (int r = 0; r < g->nranks; r++) {
    double s = 0;
    for (int it = 0; it < g->iters; it++) s += g->iter_s[r * g->iters + it];
    if (s > worst) worst = s, *slow = r;
  }
}

/* ---- collectives' own times ------------------------------------------------------------------ */

/* Mark i of rank r in timed iteration it. */
static double mark(const be_job_result *g, int r, int it, int i) {
  return g->marks[g->mdispl[r] + (size_t)it * ((size_t)g->nops[r] + 1) + (size_t)i];
}

/* The ops of rank r that are collectives on group grp, in program order, into at[0..cap). */
static int colls_on(const be_plan *bp, int r, int grp, int *at, int cap) {
  int k = 0;
  const be_prog *pg = &bp->progs[r];
  for (int i = 0; i < pg->nops; i++)
    if (pg->ops[i].kind == BE_OP_COLL && pg->ops[i].group == grp) {
      if (k < cap) at[k] = i;
      k++;
    }
  return k;
}

void be_job_coll_own(const be_plan *bp, const be_job_result *g, double *own) {
  size_t total = 0;
  for (int r = 0; r < g->nranks; r++) total += (size_t)g->nops[r];
  memset(own, 0, total * sizeof *own);
  if (!g->marks || bp->nranks != g->nranks || g->iters < 1) return;
  for (int grp = 0; grp < bp->ngroups; grp++) {
    const be_group *G = &bp->groups[grp];
    if (G->n < 2) continue;
    int cap = colls_on(bp, G->ranks[0], grp, NULL, 0), ok = cap > 0;
    int *idx = ok ? malloc((size_t)G->n * (size_t)cap * sizeof *idx) : NULL;
    ok = ok && idx;
    for (int m = 0; m < G->n && ok; m++) /* every member: the same number, in the same order */
      ok = G->ranks[m] < g->nranks && g->nops[G->ranks[m]] == bp->progs[G->ranks[m]].nops &&
           colls_on(bp, G->ranks[m], grp, idx + (size_t)m * cap, cap) == cap;
    for (int k = 0; k < cap && ok; k++) {
      double sum = 0;
      for (int it = 0; it < g->iters; it++) {
        double last_start = -1e300, first_end = 1e300;
        for (int m = 0; m < G->n; m++) {
          int r = G->ranks[m], i = idx[(size_t)m * cap + k];
          double s = mark(g, r, it, i), e = mark(g, r, it, i + 1);
          if (s > last_start) last_start = s;
          if (e < first_end) first_end = e;
        }
        sum += first_end > last_start ? first_end - last_start : 0;
      }
      for (int m = 0; m < G->n; m++)
        own[g->displ[G->ranks[m]] + idx[(size_t)m * cap + k]] = sum / g->iters;
    }
    free(idx);
  }
}
