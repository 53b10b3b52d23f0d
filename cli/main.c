/* podplan: the driver. One table of subcommands; each lives in its own cmd_*.c with its
 * usage text at the top. */
#include <sqlite3.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "podplan/be.h"
#include "podplan/store.h"

static const struct {
  const char *name;
  cli_fn fn;
  const char *summary;
} commands[] = {
    {"presets", cmd_presets, "list built-in models, GPUs and clusters"},
    {"check", cmd_check, "validate specs and a plan; print canonical JSON and hashes"},
    {"predict", cmd_predict, "score a plan with the analytical cost model"},
    {"simulate", cmd_simulate, "score a plan with the SimGrid simulator"},
    {"search", cmd_search, "search plans (exhaustive, megatron, two-level, global)"},
    {"study", cmd_study, "run a study: pillar, validate, capacity"},
    {"run", cmd_run, "execute a plan's iteration on CPUs or GPUs (under mpirun)"},
    {"bench", cmd_bench, "GEMM and collective microbenchmarks into the store"},
    {"import", cmd_import, "read nccl-tests logs as measurements"},
    {"calibrate", cmd_calibrate, "fit and store a calibration"},
    {"export", cmd_export, "print a stored plan as Megatron-LM arguments or JSON"},
    {"report", cmd_report, "tables and plots from the store"},
};
#define NCOMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *f) {
  fprintf(f,
          "usage: podplan <command> [options]     (podplan <command> -h for its options)\n"
          "       podplan --version\n\n"
          "podplan finds, scores and checks parallelism plans for training transformer models\n"
          "on GPU clusters: cost model -> SimGrid simulation -> real runs that calibrate both.\n\n"
          "commands:\n");
  for (size_t i = 0; i < NCOMMANDS; i++)
    fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
  fprintf(f, "\nexit status: 0 ok, 1 runtime failure, 2 bad usage or bad input\n");
}

static int version(void) {
  printf("podplan %s\n", PODPLAN_VERSION);
  printf("  SQLite %s, Jansson %s, store schema %d\n", sqlite3_libversion(), jansson_version_str(),
         STORE_SCHEMA_VERSION);
  be_cuda_info ci;
  pp_err err = {0};
  if (be_cuda_probe(&ci, &err)) {
    printf("  %s\n", err.msg);
    return 0;
  }
  printf("  CUDA runtime %d.%d, cuBLAS %d.%d.%d, NCCL %d.%d.%d, driver %s\n",
         ci.runtime_version / 1000, ci.runtime_version % 1000 / 10, ci.cublas_version / 10000,
         ci.cublas_version / 100 % 100, ci.cublas_version % 100, ci.nccl_version / 10000,
         ci.nccl_version / 100 % 100, ci.nccl_version % 100,
         ci.driver_version ? "present" : "absent");
  if (ci.devices)
    printf("  %d GPU(s) visible; GPU 0: %s, %.1f GiB\n", ci.devices, ci.device0, ci.device0_gib);
  else
    printf("  no GPU visible\n");
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  const char *cmd = argv[1];
  if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "help") == 0) {
    usage(stdout);
    return 0;
  }
  if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) return version();
  for (size_t i = 0; i < NCOMMANDS; i++)
    if (strcmp(cmd, commands[i].name) == 0) return commands[i].fn(argc - 1, argv + 1);
  fprintf(stderr, "podplan: unknown command '%s' (see 'podplan -h')\n", cmd);
  return 2;
}
