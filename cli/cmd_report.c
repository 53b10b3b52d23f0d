/* podplan report: tables and plots of what a store holds. Parses the options and calls
 * study_report (study/study_report.c), which reads the store read-only and writes the files. */
#include "cli.h"
#include "podplan/study.h"

static const char usage[] =
    "usage: podplan report [--db F] [--out DIR]\n"
    "\n"
    "Prints tables of what the store holds, reading it without changing it (a store of an\n"
    "older schema is read as it is):\n"
    "  search runs             each run: method, evaluations, best plan, its cost-model and\n"
    "                          simulated time, global's bound and gap\n"
    "  method comparison       per set of comparable runs (model, cluster, GPUs, global batch,\n"
    "                          space): each method's best time over the fastest method's\n"
    "  validation              cost model against published runs (study validate --db)\n"
    "  simulator vs cost model per plan (simulate, search --simulate)\n"
    "  calibrations            MAPE before and after, fitted and held out\n"
    "  study cases             per study\n"
    "  trace files             recorded by simulate --trace and run --trace: there or not, size\n"
    "\n";
static const char usage_tail[] =
    "\n"
    "exit status: 0 ok; 1 a file cannot be written or gnuplot fails; 2 bad usage, or a store\n"
    "that does not exist or is not one\n";

/* The options: getopt's table and the help's text. */
static const cli_opt opts[] = {
    {"db", "F", 'd', "the store (default podplan.db); it must exist"},
    {"out", "DIR", 'o',
     "also write DIR/<table>.csv for each table (search_runs, methods,\n"
     "validation, sim_vs_costmodel, calibrations, studies, traces), DIR/report.md\n"
     "and, with gnuplot, the plots methods, validation, calibrations and\n"
     "sim_vs_costmodel (.png, .svg; a plot without data is skipped); DIR is made\n"
     "with its missing parents (default: no files, the text alone)"},
    {"help", NULL, 'h', "this text"},
};
#define NOPTS (sizeof opts / sizeof opts[0])

static const char *const CMD = "report";

int cmd_report(int argc, char **argv) {
  struct option longs[NOPTS + 1];
  cli_opts_longs(opts, NOPTS, longs);
  study_report_opts o = {.db = STORE_DEFAULT_PATH};
  int first = 1, c;
  while ((c = cli_getopt(CMD, argc, argv, "h", longs, &first)) != -1) {
    switch (c) {
    case 'h':
      fputs(usage, stdout);
      cli_opts_help(stdout, opts, NOPTS, 12);
      fputs(usage_tail, stdout);
      return 0;
    case 'd': o.db = optarg; break;
    case 'o': o.out_dir = optarg; break;
    default: return 2;
    }
  }
  if (optind < argc) return cli_usage_error(CMD, "unexpected argument '%s'", argv[optind]);
  if (!*o.db) return cli_usage_error(CMD, "--db: give a file name");
  if (o.out_dir && !*o.out_dir) return cli_usage_error(CMD, "--out: give a folder name");
  study_report_summary sum;
  pp_err err = {0};
  if (study_report(&o, &sum, &err)) return cli_fail(CMD, &err);
  return 0;
}
