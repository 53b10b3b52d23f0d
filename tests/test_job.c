/* The job helpers (be_job_*): a process no launcher started is rank 0 of 1 and MPI stays off
 * unless asked; gathering bytes and execution results on rank 0, and broadcasting rank 0's
 * bytes, works alone and, run under mpirun with 3 ranks, across ranks (each rank sends a
 * different length; rank 0 gets them concatenated in rank order with their lengths; every
 * rank gets rank 0's bytes; every iteration's op marks come back unless a rank kept none),
 * and with MPI started for a job of one. A collective's own time from its members' marks
 * (be_job_coll_own) on a hand-made job.
 * argv: none (ctest test_job: alone); MPIEXEC (test_job_mpi: only the 3-rank part, exit 77,
 * skipped, when MPIEXEC is "no-mpiexec" or not there); "--ranks" is the part mpirun starts. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "podplan/be.h"
#include "testutil.h"

/* A rank's result: rank + 1 ops of (rank + 1) * 0.5 s each, 2 iterations of rank + 1 s;
 * rank 1 keeps no marks, the others mark op i of iteration it at 10 * rank + it + i. */
static void fake_result(int rank, be_exec_result *r, double *op_s, double *start, double *iter,
                        double *marks) {
  memset(r, 0, sizeof *r);
  r->nops = rank + 1, r->iters = 2, r->verified = rank != 1;
  for (int i = 0; i < r->nops; i++) op_s[i] = (rank + 1) * 0.5, start[i] = i;
  start[r->nops] = r->nops;
  iter[0] = rank + 1, iter[1] = 2 * (rank + 1);
  for (int it = 0; it < 2; it++)
    for (int i = 0; i <= r->nops; i++) marks[it * (r->nops + 1) + i] = 10 * rank + it + i;
  r->op_s = op_s, r->op_start = start, r->iter_s = iter, r->marks = rank == 1 ? NULL : marks;
}

/* Every check on every rank of the job, whatever its size. */
static void job_checks(void) {
  pp_err err = {0};
  int rank = be_job_rank(), size = be_job_size();
  /* bytes: rank r sends r + 1 copies of 'a' + r */
  char mine[8];
  memset(mine, 'a' + rank, sizeof mine);
  void *all = NULL;
  size_t n = 0, lens[8] = {0};
  CHECK_EQ(be_job_gather_bytes(mine, (size_t)rank + 1, &all, &n, lens, &err), PP_OK);
  if (rank == 0) {
    char want[64] = "";
    for (int r = 0; r < size; r++) {
      size_t at = strlen(want);
      memset(want + at, 'a' + r, (size_t)r + 1);
      want[at + (size_t)r + 1] = '\0';
      CHECK_EQ(lens[r], r + 1);
    }
    CHECK_EQ(n, strlen(want));
    CHECK(all && memcmp(all, want, n) == 0);
  } else {
    CHECK(all == NULL);
    CHECK_EQ(n, 0);
  }
  free(all);
  /* nothing at all from some ranks */
  CHECK_EQ(be_job_gather_bytes(NULL, 0, &all, &n, NULL, &err), PP_OK);
  CHECK_EQ(n, 0);
  free(all);
  /* execution results */
  double op_s[8], start[9], iter[2], marks[18];
  be_exec_result r;
  fake_result(rank, &r, op_s, start, iter, marks);
  be_job_result g;
  CHECK_EQ(be_job_gather(&r, &g, &err), PP_OK);
  if (rank == 0) {
    CHECK_EQ(g.nranks, size);
    CHECK_EQ(g.iters, 2);
    CHECK_EQ(g.verified, size < 2);
    for (int k = 0; k < size; k++) {
      CHECK_EQ(g.nops[k], k + 1);
      CHECK_DEQ(g.op_s[g.displ[k]] * 2, k + 1);
      CHECK_DEQ(g.start[g.displ[k] + k + g.nops[k]], k + 1);
      CHECK_DEQ(g.iter_s[k * 2 + 1], 2 * (k + 1));
    }
    CHECK_DEQ(g.job_s[0], size);
    CHECK_DEQ(g.job_s[1], 2 * size);
    if (size == 1) { /* rank 0's marks, every iteration */
      CHECK(g.marks != NULL);
      if (g.marks) CHECK_DEQ(g.marks[g.mdispl[0] + 1 * 2 + 1], 2);
    } else {
      CHECK(g.marks == NULL); /* rank 1 kept none */
    }
    double mean, lo, hi;
    int slow;
    be_job_iter_stats(&g, &mean, &lo, &hi, &slow);
    CHECK_NEAR(mean, 1.5 * size, 1e-12);
    CHECK_DEQ(lo, size);
    CHECK_DEQ(hi, 2 * size);
    CHECK_EQ(slow, size - 1);
  } else {
    CHECK(g.nops == NULL);
  }
  be_job_result_clear(&g);
  double max = 0;
  CHECK_EQ(be_job_max(rank, &max, &err), PP_OK);
  CHECK_DEQ(max, size - 1);
  /* rank 0's bytes to every rank (what the others send is not looked at) */
  const char *text = rank == 0 ? "from rank 0" : "ignored";
  void *got = NULL;
  size_t gn = 0;
  CHECK_EQ(be_job_bcast_bytes(text, strlen(text) + 1, &got, &gn, &err), PP_OK);
  CHECK_EQ(gn, strlen("from rank 0") + 1);
  if (rank == 0)
    CHECK(got == NULL);
  else
    CHECK_STREQ(got, "from rank 0");
  free(got);
  CHECK_EQ(be_job_bcast_bytes(NULL, 0, &got, &gn, &err), PP_OK);
  CHECK_EQ(gn, 0);
  free(got);
}

/* be_job_coll_own on a hand-made job of 3 ranks, 2 timed iterations: ranks 0 and 1 share
 * group 0, all three group 1. Rank 0 runs [GEMM, coll g0, coll g1], rank 1 [coll g0, GEMM,
 * coll g1], rank 2 [coll g1]. Group 0: rank 0 from 1 to 3 s, rank 1 from 0 to 2.5 s: its own
 * time 2.5 - 1 = 1.5 s in both iterations. Group 1: starts 3, 3.5, 0 and ends 6, 6.5, 7:
 * 6 - 3.5 = 2.5 s in the first iteration; in the second rank 2 starts at 6.2, after rank 0
 * ended (marks that do not overlap count 0): the mean 1.25 s. GEMMs get 0. */
static void own_times(void) {
  be_op r0[3] = {{.kind = BE_OP_GEMM}, {.kind = BE_OP_COLL, .group = 0},
                 {.kind = BE_OP_COLL, .group = 1}};
  be_op r1[3] = {{.kind = BE_OP_COLL, .group = 0}, {.kind = BE_OP_GEMM},
                 {.kind = BE_OP_COLL, .group = 1}};
  be_op r2[1] = {{.kind = BE_OP_COLL, .group = 1}};
  be_prog progs[3] = {{.rank = 0, .ops = r0, .nops = 3}, {.rank = 1, .ops = r1, .nops = 3},
                      {.rank = 2, .ops = r2, .nops = 1}};
  int g0[2] = {0, 1}, g1[3] = {0, 1, 2};
  be_group groups[2] = {{SPEC_GRP_TP, 2, g0}, {SPEC_GRP_DP, 3, g1}};
  be_plan bp = {.nranks = 3, .progs = progs, .ngroups = 2, .groups = groups};
  int nops[3] = {3, 3, 1}, displ[3] = {0, 3, 6};
  size_t mdispl[3] = {0, 8, 16};
  double marks[20] = {0, 1, 3, 6,   0, 1, 3, 6,      /* rank 0, iterations 0 and 1 */
                      0, 2.5, 3.5, 6.5, 0, 2.5, 3.5, 6.5, /* rank 1 */
                      0, 7,   6.2, 7};                /* rank 2 */
  be_job_result g = {.nranks = 3, .iters = 2, .nops = nops, .displ = displ, .marks = marks,
                     .mdispl = mdispl};
  double own[7];
  be_job_coll_own(&bp, &g, own);
  CHECK_DEQ(own[0], 0);
  CHECK_NEAR(own[1], 1.5, 1e-12);
  CHECK_NEAR(own[3], 1.5, 1e-12);
  CHECK_NEAR(own[2], 1.25, 1e-12);
  CHECK_NEAR(own[5], 1.25, 1e-12);
  CHECK_NEAR(own[6], 1.25, 1e-12);
  CHECK_DEQ(own[4], 0);
  g.marks = NULL; /* a rank kept none: nothing to say */
  be_job_coll_own(&bp, &g, own);
  CHECK_DEQ(own[1], 0);
}

int main(int argc, char **argv) {
  pp_err err = {0};
  own_times();
  if (argc > 1 && strcmp(argv[1], "--ranks") == 0) { /* started by mpirun */
    CHECK_EQ(be_job_init(0, &err), PP_OK);            /* launched: MPI starts */
    CHECK_EQ(be_job_size(), 3);
    CHECK_EQ(be_job_rank(), be_job_launcher_rank());
    job_checks();
    be_job_finalize();
    return check_status();
  }
  if (argc > 1) { /* test_job_mpi: the same under mpirun, 3 ranks */
    if (strcmp(argv[1], "no-mpiexec") == 0 || access(argv[1], X_OK) != 0) {
      fprintf(stderr, "%s: not there: skipped\n", argv[1]);
      return 77;
    }
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    char *a[] = {argv[1], "-n", "3", "--oversubscribe", argv[0], "--ranks", NULL};
    tu_run r;
    tu_exec(a, &r);
    if (r.status) fprintf(stderr, "mpirun -n 3: %s%s\n", r.out, r.err);
    CHECK_EQ(r.status, 0);
    tu_run_free(&r);
    return check_status();
  }
  /* alone, MPI off: rank 0 of 1 */
  unsetenv("OMPI_COMM_WORLD_RANK"), unsetenv("PMIX_RANK"), unsetenv("PMI_RANK");
  unsetenv("SLURM_PROCID");
  CHECK_EQ(be_job_launcher_rank(), 0);
  CHECK_EQ(be_job_init(0, &err), PP_OK);
  CHECK_EQ(be_job_rank(), 0);
  CHECK_EQ(be_job_size(), 1);
  CHECK_EQ(be_job_local_rank(), 0);
  job_checks();
  /* asked to: MPI starts without a launcher (a job of one; the stand-in in builds without MPI) */
  CHECK_EQ(be_job_init(1, &err), PP_OK);
  CHECK_EQ(be_job_size(), 1);
  job_checks();
  be_job_finalize();
  CHECK_EQ(be_job_init(1, &err), PP_INTERNAL); /* MPI does not start twice */
  return check_status();
}
