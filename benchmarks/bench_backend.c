/* bench_backend: the CPU backend against OpenBLAS's own peak, and the executor's overhead.
 *
 *   1. OpenBLAS's peak on this machine: cblas_sgemm called directly on large squares, best of
 *      several runs, with one thread and with all of them;
 *   2. the same GEMMs, and the thin shapes tensor parallelism makes, through the cpu device
 *      (be_device.gemm with marks, as `podplan run` times them): fraction of that peak;
 *   3. the executor's cost per op: a program of zero-byte memory ops and one of 8-byte
 *      memory ops run by be_exec; (iteration time) / (ops). Target: <= 5 us per op.
 * One process (MPI singleton). usage: bench_backend [--quick] */
#include <cblas.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "podplan/be.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Best GFLOP/s of cblas_sgemm n x n x n over `runs` runs. */
static double blas_peak(int n, int runs) {
  size_t e = (size_t)n * n;
  float *a = malloc(e * sizeof *a), *b = malloc(e * sizeof *b), *c = malloc(e * sizeof *c);
  if (!a || !b || !c) {
    free(a), free(b), free(c);
    return 0;
  }
  for (size_t i = 0; i < e; i++) a[i] = (float)(i % 13) / 13.0f - 0.5f, b[i] = (float)(i % 7) / 7.0f;
  double best = 0;
  for (int r = 0; r < runs + 1; r++) {
    double t0 = now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
    double g = 2.0 * n * n * n / (now() - t0) / 1e9;
    if (r > 0 && g > best) best = g; /* the first run warms up */
  }
  free(a), free(b), free(c);
  return best;
}

/* GFLOP/s of the device's GEMM m x n x k, `reps` per timing, best of 3 timings. */
static double device_gemm(const be_device *dv, be_dev *d, int m, int n, int k, int reps) {
  pp_err err = {0};
  double best = 0, t[2];
  dv->gemm(d, m, n, k, 1, &err);
  for (int r = 0; r < 3; r++) {
    dv->mark(d, 0, &err);
    for (int i = 0; i < reps; i++) dv->gemm(d, m, n, k, 1, &err);
    dv->mark(d, 1, &err);
    dv->fence(d, &err);
    dv->times(d, 2, t, &err);
    double g = 2.0 * m * n * k * reps / t[1] / 1e9;
    if (g > best) best = g;
  }
  return err.code ? 0 : best;
}

/* Seconds per op of a program of n memory ops of `bytes`, run by the executor. */
static double exec_overhead(const be_device *dv, be_dev *d, int n, double bytes) {
  be_prog pg = {0};
  pg.ops = calloc((size_t)n, sizeof *pg.ops);
  if (!pg.ops) return -1;
  pg.nops = pg.cap = n;
  for (int i = 0; i < n; i++)
    pg.ops[i] = (be_op){.kind = BE_OP_MEM, .ev = BE_EV_FORWARD, .name = "nop", .bytes = bytes};
  be_exec_opts o = {1, 5, 0};
  be_exec_result r;
  pp_err err = {0};
  double per = -1;
  if (be_exec(dv, d, &pg, &o, &r, &err) == PP_OK) {
    double best = 1e300;
    for (int i = 0; i < r.iters; i++)
      if (r.iter_s[i] < best) best = r.iter_s[i];
    per = best / n;
    be_exec_result_clear(&r);
  } else {
    fprintf(stderr, "bench_backend: %s\n", err.msg);
  }
  free(pg.ops);
  return per;
}

int main(int argc, char **argv) {
  int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
  MPI_Init(&argc, &argv);
  int threads = openblas_get_num_threads();
  printf("bench_backend: OpenBLAS %s\n", openblas_get_config());
  int big = quick ? 1024 : 2048;
  openblas_set_num_threads(1);
  double peak1 = blas_peak(big, 3);
  openblas_set_num_threads(threads);
  double peakn = blas_peak(big, 3);
  printf("  OpenBLAS sgemm %dx%dx%d, best of 3: %.1f GFLOP/s on 1 thread, %.1f GFLOP/s on %d\n",
         big, big, big, peak1, peakn, threads);

  const be_device *dv = be_device_find("cpu");
  MPI_Comm world = MPI_COMM_WORLD;
  be_dev_cfg cfg = {0, 1, &world, NULL, 0, SPEC_DTYPE_BF16, (double)big * big, 0, 1024, 60, 0};
  be_dev *d = NULL;
  pp_err err = {0};
  if (dv->open(&cfg, &d, &err)) {
    fprintf(stderr, "bench_backend: %s\n", err.msg);
    MPI_Finalize();
    return 1;
  }
  static const int shapes[][3] = {{256, 256, 256},   {512, 512, 512},  {1024, 1024, 1024},
                                  {2048, 2048, 2048}, {2048, 768, 256}, {2048, 256, 1024},
                                  {2048, 1024, 256},  {256, 2048, 2048}};
  int used = openblas_get_num_threads(); /* the device's: one, unless OPENBLAS_NUM_THREADS */
  double peak = used == 1 ? peak1 : peakn;
  printf("  through the cpu device (%d thread(s)), %% of OpenBLAS's own peak on as many:\n",
         used);
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
    int m = shapes[i][0], n = shapes[i][1], k = shapes[i][2];
    double most = (double)big * big;
    if ((double)m * k > most || (double)k * n > most || (double)m * n > most) continue;
    double g = device_gemm(dv, d, m, n, k, quick ? 2 : 5);
    printf("    %5d x %5d x %5d  %8.1f GFLOP/s  %5.1f%%\n", m, n, k, g, 100 * g / peak);
  }
  int nops = quick ? 20000 : 200000;
  double o0 = exec_overhead(dv, d, nops, 0), o8 = exec_overhead(dv, d, nops, 8);
  printf("  executor: %.3f us per op (zero-byte ops), %.3f us per op (8-byte memory ops), "
         "%d ops per iteration, best of 5 (target <= 5 us)\n", o0 * 1e6, o8 * 1e6, nops);
  dv->close(d, 0);
  MPI_Finalize();
  return o0 < 0 || o0 > 5e-6;
}
