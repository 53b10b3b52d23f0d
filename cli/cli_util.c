/* Helpers shared by the subcommands. */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

int cli_fail(const char *cmd, const pp_err *err) {
  fprintf(stderr, "podplan %s: %s\n", cmd, err->msg[0] ? err->msg : pp_strerror(err->code));
  return pp_exit_status(err->code);
}

int cli_usage_error(const char *cmd, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fprintf(stderr, "podplan %s: %s (see 'podplan %s -h')\n", cmd, msg, cmd);
  return 2;
}

int cli_int(const char *cmd, const char *opt, const char *val, long lo, long hi, int *out) {
  char *end;
  errno = 0;
  long v = strtol(val, &end, 10);
  if (errno || end == val || *end || v < lo || v > hi)
    return cli_usage_error(cmd, "%s: '%s' is not an integer in %ld..%ld", opt, val, lo, hi);
  *out = (int)v;
  return 0;
}

int cli_getopt(const char *cmd, int argc, char **argv, const char *shorts,
               const struct option *longs, int *first) {
  if (*first) {
    optind = 1;
    opterr = 0;
    *first = 0;
  }
  int c = getopt_long(argc, argv, shorts, longs, NULL);
  if (c == '?') {
    const char *bad = optind > 0 && optind <= argc ? argv[optind - 1] : "";
    if (strncmp(bad, "--", 2) == 0)
      cli_usage_error(cmd, optopt ? "option '%s' needs a value" : "unknown option '%s'", bad);
    else if (optopt && strchr(shorts, optopt) && strchr(shorts, optopt)[1] == ':')
      cli_usage_error(cmd, "option '-%c' needs a value", optopt);
    else
      cli_usage_error(cmd, "unknown option '-%c'", optopt ? optopt : '?');
  }
  return c;
}

int cli_not_implemented(const char *cmd, const char *usage, int argc, char **argv) {
  for (int i = 1; i < argc; i++)
    if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
      fputs(usage, stdout);
      return 0;
    }
  fprintf(stderr, "podplan %s: not implemented yet\n", cmd);
  return 2;
}

int cli_load_specs(const char *cmd, const char *model, const char *cluster, int gpus,
                   const char *plan, spec_model *m, spec_cluster *c, spec_plan *p) {
  pp_err err = {0};
  memset(p, 0, sizeof *p);
  if (!model || !cluster || !plan)
    return cli_usage_error(cmd, "--model, --cluster and --plan are required");
  if (spec_model_load(model, m, &err) || spec_cluster_load(cluster, gpus, c, &err) ||
      spec_pair_validate(m, c, &err) || spec_plan_parse(plan, p, &err))
    return cli_fail(cmd, &err);
  if (spec_plan_resolve(p, m, c, &err)) {
    spec_plan_clear(p);
    return cli_fail(cmd, &err);
  }
  return 0;
}

json_t *cli_breakdown_json(const cm_breakdown *t) {
  return json_pack("{s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f}", "compute_s", t->compute_s,
                   "tp_comm_s", t->tp_comm_s, "cp_comm_s", t->cp_comm_s, "ep_comm_s",
                   t->ep_comm_s, "pp_bubble_s", t->pp_bubble_s, "pp_p2p_s", t->pp_p2p_s,
                   "dp_comm_s", t->dp_comm_s, "optimizer_s", t->optimizer_s);
}

int cli_save(const char *db, const spec_model *m, const spec_cluster *c, const spec_plan *p,
             store_score *sc, json_t *breakdown, store_measurement *ms, size_t n,
             size_t *added, pp_err *err) {
  char *bds = NULL;
  if (sc && breakdown) sc->breakdown_json = bds = json_dumps(breakdown, JSON_COMPACT);
  json_decref(breakdown);
  int rc = store_save(db, m, c, p, sc, ms, n, added, err);
  free(bds);
  return rc;
}
