/* podplan study: pillar, validate, capacity. validate is the cost model against published
 * training runs; pillar and capacity are not implemented yet. */
#include <string.h>

#include "cli.h"
#include "podplan/study.h"

static const char usage[] =
    "usage: podplan study pillar|validate|capacity [--db F] [--out DIR] [--data F]\n"
    "                                              [--calibration ID|latest|none]\n"
    "\n"
    "  validate   the cost model against published training runs (SC'21, Korthikanti et al.,\n"
    "             MT-NLG; NeMo, MPT and SC'21 Table 2 kept aside): per-row predicted vs\n"
    "             published iteration time, MAPE per source, per set and overall,\n"
    "             Kendall's tau per set of runs of one model, and whether every\n"
    "             published configuration fits (the tightest headroom)\n"
    "  pillar     where Alpa's two-level search still finds the best plan, fabric by fabric\n"
    "             (not implemented yet)\n"
    "  capacity   cluster sizing for a model and a target time (not implemented yet)\n"
    "\n"
    "  --db F       store the published and predicted scores in F\n"
    "  --out DIR    write DIR/validate.csv and DIR/validate_rank.csv\n"
    "  --data F     a published-runs CSV instead of the copy built into podplan\n"
    "                (benchmarks/data/published_runs.csv; its README lists the columns)\n"
    "  --calibration SEL  validate: the rows on the calibrated cluster take its fitted values\n"
    "                (an id, or latest: the newest of any cluster; read from --db or\n"
    "                podplan.db); their scores record it\n"
    "  -h, --help   this text\n";

static const char *const CMD = "study";

int cmd_study(int argc, char **argv) {
  static const struct option longs[] = {{"db", required_argument, NULL, 'd'},
                                        {"out", required_argument, NULL, 'o'},
                                        {"data", required_argument, NULL, 'D'},
                                        {"calibration", required_argument, NULL, 'C'},
                                        {"help", no_argument, NULL, 'h'},
                                        {NULL, 0, NULL, 0}};
  study_validate_opts o = {0};
  const char *calib = NULL;
  int first = 1, c;
  while ((c = cli_getopt(CMD, argc, argv, "h", longs, &first)) != -1) {
    switch (c) {
    case 'h': fputs(usage, stdout); return 0;
    case 'd': o.db = optarg; break;
    case 'o': o.out_dir = optarg; break;
    case 'D': o.data = optarg; break;
    case 'C': calib = optarg; break;
    default: return 2;
    }
  }
  if (optind >= argc) return cli_usage_error(CMD, "name a study: pillar, validate or capacity");
  const char *which = argv[optind];
  if (optind + 1 < argc) return cli_usage_error(CMD, "unexpected argument '%s'", argv[optind + 1]);
  if (strcmp(which, "pillar") == 0 || strcmp(which, "capacity") == 0) {
    fprintf(stderr, "podplan study %s: not implemented yet\n", which);
    return 2;
  }
  if (strcmp(which, "validate") != 0)
    return cli_usage_error(CMD, "unknown study '%s' (pillar, validate, capacity)", which);
  char cal_cluster[64], cal_list[1024];
  int64_t cid;
  int rc = cli_calibration_list(CMD, calib, o.db, cal_cluster, sizeof cal_cluster, cal_list,
                                sizeof cal_list, &cid);
  if (rc) return rc;
  if (cid) o.calib_cluster = cal_cluster, o.calib_params = cal_list, o.calib_id = cid;
  study_validate_summary sum;
  pp_err err = {0};
  if (study_validate(&o, &sum, &err)) return cli_fail(CMD, &err);
  return 0;
}
