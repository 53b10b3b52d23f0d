/* bench_cuda: cuBLAS bf16 GEMMs and the memory-bound kernel through the cuda device, on GPU 0.
 *
 * For every shape: 3 warm-up runs, then R >= 10 runs with a mark after each; fence; the marks
 * give R per-run times. Reported (the formulas sit next to the code that computes them):
 *   GEMM   TFLOP/s = 2 m n k / mean run time / 1e12;   % of peak = that / peak_flops()
 *   memory GB/s    = bytes read + written / mean run time / 1e9
 * Before it reports, it verifies: every run time is finite and positive and the marks
 * increase (a broken timer or a GEMM that did nothing would otherwise look fast).
 *
 * The check: the best large square GEMM reaches at least 70% of the GPU's dense bf16
 * peak (exit 1 otherwise; no check when the GPU's peak is unknown). Exits 77 without a GPU.
 *
 * usage: bench_cuda [--runs R] */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "podplan/be.h"

#define WARMUP 3
#define MAX_RUNS 1000
#define PEAK_FRACTION 0.70

static struct {
  const be_device *dv;
  be_dev *d;
  int runs;
  double t[MAX_RUNS + 1];
} g;

typedef int (*op_fn)(const void *arg, pp_err *err);

/* Mean seconds per run of op, after the warm-up; -1 after an error or a failed check. */
static double timed(op_fn op, const void *arg, const char *what) {
  pp_err err = {0};
  for (int i = 0; i < WARMUP; i++)
    if (op(arg, &err)) goto fail;
  if (g.dv->mark(g.d, 0, &err)) goto fail;
  for (int i = 1; i <= g.runs; i++)
    if (op(arg, &err) || g.dv->mark(g.d, i, &err)) goto fail;
  if (g.dv->fence(g.d, &err) || g.dv->times(g.d, g.runs + 1, g.t, &err)) goto fail;
  for (int i = 1; i <= g.runs; i++)
    if (!isfinite(g.t[i]) || !(g.t[i] > g.t[i - 1])) {
      fprintf(stderr, "bench_cuda: %s: run %d took %g s (marks must increase)\n", what, i,
              g.t[i] - g.t[i - 1]);
      return -1;
    }
  return g.t[g.runs] / g.runs;
fail:
  fprintf(stderr, "bench_cuda: %s: %s\n", what, err.msg);
  return -1;
}

typedef struct gemm_shape {
  int m, n, k;
  int square;
  const char *what;
} gemm_shape;

static int run_gemm(const void *arg, pp_err *err) {
  const gemm_shape *s = arg;
  return g.dv->gemm(g.d, s->m, s->n, s->k, 1, err);
}

static int run_mem(const void *arg, pp_err *err) {
  return g.dv->mem(g.d, *(const double *)arg, err);
}

int main(int argc, char **argv) {
  g.runs = 10;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--runs") && i + 1 < argc) g.runs = atoi(argv[++i]);
    else {
      fprintf(stderr, "usage: bench_cuda [--runs R]   (R from 10 to %d)\n", MAX_RUNS);
      return 2;
    }
  }
  if (g.runs < 10 || g.runs > MAX_RUNS) {
    fprintf(stderr, "bench_cuda: --runs must be from 10 to %d\n", MAX_RUNS);
    return 2;
  }
  MPI_Init(&argc, &argv);
  pp_err err = {0};
  be_cuda_info ci;
  if (be_cuda_probe(&ci, &err)) {
    fprintf(stderr, "bench_cuda: %s\n", err.msg);
    MPI_Finalize();
    return 1;
  }
  if (ci.devices == 0) {
    printf("bench_cuda: no GPU visible: skipped\n");
    MPI_Finalize();
    return 77;
  }
  g.dv = be_device_find("cuda");
  if (!g.dv) {
    fprintf(stderr, "bench_cuda: no cuda device in this build\n");
    MPI_Finalize();
    return 1;
  }

  static const gemm_shape shapes[] = {
      {1024, 1024, 1024, 1, "square"},
      {2048, 2048, 2048, 1, "square"},
      {4096, 4096, 4096, 1, "square"},
      {8192, 8192, 8192, 1, "square"},
      {16384, 16384, 16384, 1, "square"},
      /* tensor-parallel shards of a 12288-wide model (GPT-3 175B) at tp 8, 8192 tokens */
      {8192, 1536, 12288, 0, "tp8 column shard (qkv/fc1-like)"},
      {8192, 12288, 1536, 0, "tp8 row shard (proj/fc2-like)"},
      {2048, 12288, 1536, 0, "tp8 row shard, 2048 tokens"},
      {8192, 6144, 12288, 0, "tp8 fc1 shard (4h/tp)"},
      {8192, 12288, 6144, 0, "tp8 fc2 shard (4h/tp)"},
  };
  double max_elems = 0;
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
    double m = shapes[i].m, n = shapes[i].n, k = shapes[i].k;
    max_elems = fmax(max_elems, fmax(m * k, fmax(k * n, m * n)));
  }
  MPI_Comm world = MPI_COMM_WORLD;
  be_dev_cfg cfg = {0, 1, &world, NULL, 0, SPEC_DTYPE_BF16, max_elems, 1 << 20, 1 << 22, 300, 0};
  if (g.dv->open(&cfg, &g.d, &err)) {
    fprintf(stderr, "bench_cuda: %s\n", err.msg);
    MPI_Finalize();
    return 1;
  }
  double peak = g.dv->peak_flops(g.d);
  printf("GPU 0: %s, dense bf16 peak %s%.1f TFLOP/s; %d runs after %d warm-ups per shape\n",
         ci.device0, peak > 0 ? "" : "unknown, ", peak / 1e12, g.runs, WARMUP);
  printf("%-34s %7s %7s %7s %10s %9s %7s\n", "gemm (bf16, fp32 accumulate)", "m", "n", "k",
         "time_us", "TFLOP/s", "%peak");
  int status = 0;
  double best_square = 0;
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
    const gemm_shape *s = &shapes[i];
    double sec = timed(run_gemm, s, s->what);
    if (sec < 0) {
      status = 1;
      continue;
    }
    double flops = 2.0 * s->m * s->n * s->k; /* multiply-adds count two */
    double tflops = flops / sec / 1e12;
    if (s->square && tflops * 1e12 > best_square) best_square = tflops * 1e12;
    printf("%-34s %7d %7d %7d %10.1f %9.1f %6.1f%%\n", s->what, s->m, s->n, s->k, sec * 1e6,
           tflops, peak > 0 ? 100 * tflops * 1e12 / peak : 0.0);
  }

  /* memory-bound: y = 0.999 x + 0.001 reading bytes/2 and writing bytes/2 (one pass while
   * bytes/2 fits a GEMM buffer: max_elems * 2 bytes) */
  printf("%-34s %28s %10s %9s\n", "memory-bound (read + write)", "bytes", "time_us", "GB/s");
  const double mem_bytes[] = {16e6, 64e6, 256e6, 1024e6};
  for (size_t i = 0; i < sizeof mem_bytes / sizeof mem_bytes[0]; i++) {
    if (mem_bytes[i] / 2 > max_elems * 2) continue;
    double sec = timed(run_mem, &mem_bytes[i], "memory-bound op");
    if (sec < 0) {
      status = 1;
      continue;
    }
    printf("%-34s %28.0f %10.1f %9.1f\n", "y = a x + b", mem_bytes[i], sec * 1e6,
           mem_bytes[i] / sec / 1e9);
  }
  g.dv->close(g.d, status != 0);

  if (peak > 0 && !status) {
    double frac = best_square / peak;
    printf("best square GEMM: %.1f TFLOP/s = %.1f%% of peak (check: >= %.0f%%): %s\n",
           best_square / 1e12, 100 * frac, 100 * PEAK_FRACTION,
           frac >= PEAK_FRACTION ? "ok" : "FAILED");
    if (frac < PEAK_FRACTION) status = 1;
  } else if (!status) {
    printf("peak of this GPU unknown: no check against it\n");
  }
  MPI_Finalize();
  return status;
}
