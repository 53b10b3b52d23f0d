/* The CPU backend for real: `mpirun -n 4 podplan run` on a small model with tp=2 x dp=2,
 * pp=2 x dp=2, pp=4 (1F1B) and pp=4 with 2 chunks (interleaved): every collective and message
 * verified, a trace with a track per rank, a score and measurements in the store. A rank that
 * exits or hangs takes the job down with a clear error within the timeout; a job of the wrong
 * size and an unknown device are refused. `bench coll` prints nccl-tests' format, which
 * `import nccl-tests` reads back; `bench gemm --cluster cpu-host` stores its shapes as that
 * cluster's GEMM measurements and gives each a fraction of the cluster's device figure.
 * argv: podplan, mpiexec, fixtures/backend. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "testutil.h"

static const char *podplan, *mpiexec, *fixtures;

static void mpirun(int n, char **args, tu_run *r) {
  char np[16];
  snprintf(np, sizeof np, "%d", n);
  char *argv[48] = {(char *)mpiexec, "-n", np, "--oversubscribe", (char *)podplan};
  int k = 5;
  for (int i = 0; args[i] && k < 47; i++) argv[k++] = args[i];
  argv[k] = NULL;
  tu_exec(argv, r);
}

int main(int argc, char **argv) {
  if (argc < 4) return 2;
  podplan = argv[1], mpiexec = argv[2], fixtures = argv[3];
  /* CI runs as root (Open MPI's leak suppressions come from tests/CMakeLists.txt) */
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  char *dir = tu_tmpdir("backend"), *db = tu_path(dir, "run.db");
  char *model = tu_path(fixtures, "tiny.json");
  const char *plans[] = {"tp=2,dp=2,mbs=1,gbs=8", "pp=2,dp=2,mbs=1,gbs=8",
                         "pp=4,mbs=1,gbs=8", "pp=4,vpp=2,mbs=1,gbs=8"};
  tu_run r;
  for (int i = 0; i < 4; i++) {
    char name[32];
    snprintf(name, sizeof name, "trace%d.json", i);
    char *trace = tu_path(dir, name);
    char *a[] = {"run", "--model", model, "--cluster", "dgx-h100", "--gpus", "4", "--plan",
                 (char *)plans[i], "--db", db, "--trace", trace, "--iters", "2", "--warmup",
                 "1", "--timeout", "60", "--json", NULL};
    mpirun(4, a, &r);
    if (r.status) fprintf(stderr, "%s: %s\n", plans[i], r.err);
    CHECK_EQ(r.status, 0);
    CHECK_CONTAINS(r.out, "\"verified\": true");
    CHECK_CONTAINS(r.out, "\"ranks\": 4");
    CHECK_CONTAINS(r.out, "\"device\": \"cpu\"");
    tu_run_free(&r);
    char *t = tu_read(trace, NULL);
    CHECK_CONTAINS(t, "\"traceEvents\"");
    CHECK_CONTAINS(t, "\"rank 3\"");
    CHECK_CONTAINS(t, i == 0 ? "\"all_reduce\"" : "\"send\"");
    free(t), free(trace);
  }
  CHECK_EQ(tu_sql_int(db, "SELECT count(*) FROM scores WHERE source = 'backend' AND "
                          "iter_time_s > 0"), 4);
  CHECK(tu_sql_int(db, "SELECT count(*) FROM measurements WHERE device = 'cpu' AND "
                       "kind = 'gemm'") > 100);
  CHECK(tu_sql_int(db, "SELECT count(*) FROM measurements WHERE kind = 'p2p'") > 10);
  CHECK_EQ(tu_sql_int(db, "SELECT count(*) FROM measurements WHERE kind = 'iter'"), 8);
  CHECK(tu_sql_int(db, "SELECT count(*) FROM measurements WHERE kind = 'coll' AND ranks = 2 "
                       "AND busbw_gbps > 0") > 10);

  /* a rank that exits: the job ends, non-zero, saying which rank */
  char *fail[] = {"run", "--model", model, "--cluster", "dgx-h100", "--gpus", "4", "--plan",
                  "pp=4,mbs=1,gbs=8", "--db", db, "--timeout", "20", "--inject", "fail:2", NULL};
  mpirun(4, fail, &r);
  CHECK(r.status != 0);
  CHECK_CONTAINS(r.err, "rank 2: exits on purpose");
  tu_run_free(&r);
  /* a rank that hangs: its peers time out, say so and abort the job */
  char *hang[] = {"run", "--model", model, "--cluster", "dgx-h100", "--gpus", "4", "--plan",
                  "pp=4,mbs=1,gbs=8", "--db", db, "--timeout", "3", "--inject", "hang:2", NULL};
  mpirun(4, hang, &r);
  CHECK(r.status != 0);
  CHECK_CONTAINS(r.err, "timed out after 3 s");
  tu_run_free(&r);
  /* no new scores from the failed runs */
  CHECK_EQ(tu_sql_int(db, "SELECT count(*) FROM scores WHERE source = 'backend'"), 4);

  /* wrong job size, unknown device */
  char *size[] = {"run", "--model", model, "--cluster", "dgx-h100", "--gpus", "4", "--plan",
                  "tp=2,dp=2,mbs=1,gbs=8", "--db", db, NULL};
  mpirun(2, size, &r);
  CHECK(r.status != 0);
  CHECK_CONTAINS(r.err, "the plan uses 4 ranks; this job has 2");
  tu_run_free(&r);
  char *dev[] = {(char *)podplan, "run", "--model", model, "--cluster", "dgx-h100", "--gpus",
                 "1", "--plan", "tp=1,gbs=1", "--device", "tpu", "--db", db, NULL};
  tu_exec(dev, &r);
  CHECK_EQ(r.status, 2);
  CHECK_CONTAINS(r.err, "--device: 'tpu' is not one of this build's devices");
  CHECK_EQ(tu_lines(r.err), 1);
  tu_run_free(&r);

  /* bench coll: nccl-tests' table, every size checked */
  char *coll[] = {"bench", "coll", "--op", "all_reduce", "-b", "1K", "-e", "64K", "--iters",
                  "3", "--warmup", "1", "--db", db, NULL};
  mpirun(4, coll, &r);
  CHECK_EQ(r.status, 0);
  CHECK_CONTAINS(r.out, "# Avg bus bandwidth");
  CHECK_CONTAINS(r.out, "# Out of bounds values : 0 OK");
  CHECK_CONTAINS(r.out, "       65536        16384    float    sum");
  /* ... which podplan import reads back: same collective, ranks, rows */
  char *log = tu_write(dir, "coll.txt", r.out, strlen(r.out));
  tu_run_free(&r);
  char *imp[] = {(char *)podplan, "import", "nccl-tests", log, "--db", db, "--json", NULL};
  tu_exec(imp, &r);
  CHECK_EQ(r.status, 0);
  CHECK_CONTAINS(r.out, "\"collective\": \"all_reduce\"");
  CHECK_CONTAINS(r.out, "\"collective_from\": \"header line\"");
  CHECK_CONTAINS(r.out, "\"ranks\": 4");
  CHECK_CONTAINS(r.out, "\"ranks_from\": \"device lines\"");
  CHECK_CONTAINS(r.out, "\"rows\": 7");
  tu_run_free(&r);
  free(log);
  CHECK_EQ(tu_sql_int(db, "SELECT count(*) FROM measurements WHERE source = 'podplan bench coll'"),
           14);

  /* bench gemm on one rank of cpu-host: the shapes stored as GEMM measurements of that
   * cluster, "of peak" against its device's figure (cpu-core, 128 GFLOP/s) */
  char *gemm[] = {(char *)podplan, "bench", "gemm", "--cluster", "cpu-host", "--shapes",
                  "64x64x64,256x128x512", "--reps", "2", "--db", db, "--json", NULL};
  tu_exec(gemm, &r);
  CHECK_EQ(r.status, 0);
  CHECK_CONTAINS(r.out, "\"peak_flops\": 1.28e11");
  CHECK_CONTAINS(r.out, "\"peak_fraction\": "); /* its value: the core's speed, not asserted */
  tu_run_free(&r);
  CHECK_EQ(tu_sql_int(db, "SELECT count(*) FROM measurements m JOIN clusters c ON "
                          "m.cluster_id = c.id WHERE m.source = 'podplan bench gemm' AND "
                          "m.kind = 'gemm' AND c.name = 'cpu-host'"), 2);

  free(db), free(model);
  tu_rmtree(dir);
  free(dir);
  return check_status();
}
