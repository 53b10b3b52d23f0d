/* Helpers shared by the subcommands. */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "podplan/be.h"
#ifdef PODPLAN_GSL
#include "podplan/cal.h"
#endif

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

void cli_opts_longs(const cli_opt *opts, size_t n, struct option *longs) {
  for (size_t i = 0; i < n; i++)
    longs[i] = (struct option){opts[i].name, opts[i].arg ? required_argument : no_argument,
                               NULL, opts[i].id};
  longs[n] = (struct option){NULL, 0, NULL, 0};
}

void cli_opts_help(FILE *f, const cli_opt *opts, size_t n, int width) {
  for (size_t i = 0; i < n; i++) {
    char left[128];
    snprintf(left, sizeof left, "%s--%s%s%s", opts[i].id == 'h' ? "-h, " : "", opts[i].name,
             opts[i].arg ? " " : "", opts[i].arg ? opts[i].arg : "");
    if ((int)strlen(left) > width) fprintf(f, "  %s  ", left); /* a long one: two spaces */
    else fprintf(f, "  %-*s ", width, left);
    if (!*opts[i].help) fputc('\n', f);
    for (const char *h = opts[i].help; *h;) {
      const char *nl = strchr(h, '\n');
      size_t len = nl ? (size_t)(nl - h) : strlen(h);
      fprintf(f, "%.*s\n", (int)len, h);
      if (!nl) break;
      h = nl + 1;
      fprintf(f, "%*s", width + 3, "");
    }
  }
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

/* Reads the calibration --calibration SEL names (latest: the newest of a cluster named
 * `cluster`, of any when NULL) into k: 0 when SEL is none (or NULL), 1 when read; otherwise
 * prints the error and returns minus the exit status. */
static int read_calibration(const char *cmd, const char *sel, const char *db, const char *cluster,
                            store_calibration *k) {
  memset(k, 0, sizeof *k);
  if (!sel || strcmp(sel, "none") == 0) return 0;
  int latest = strcmp(sel, "latest") == 0;
  char *end;
  long long want = latest ? 0 : strtoll(sel, &end, 10);
  if (!latest && (end == sel || *end || want < 1))
    return -cli_usage_error(cmd, "--calibration: '%s' is not an id, latest or none", sel);
#ifndef PODPLAN_GSL
  (void)db, (void)cluster;
  return -cli_fail(cmd, &(pp_err){PP_NOTIMPL, "--calibration: built without GSL (no "
                                               "calibrations); use --calibration none"});
#else
  pp_err err = {0};
  store *s = NULL;
  store_opts ro = {.readonly = 1};
  int64_t cid = want;
  int rc = store_open(db ? db : STORE_DEFAULT_PATH, &ro, &s, &err);
  if (!rc && latest) rc = store_latest_calibration(s, cluster, &cid, &err);
  if (!rc) rc = store_get_calibration(s, cid, k, &err);
  store_close(s);
  return rc ? -cli_fail(cmd, &err) : 1;
#endif
}

int cli_calibration(const char *cmd, const char *sel, const char *db, const spec_cluster *c,
                    cm_params *p, int64_t *id) {
  *id = 0;
  store_calibration k;
  int got = read_calibration(cmd, sel, db, c->name, &k);
  if (got <= 0) return -got;
#ifdef PODPLAN_GSL
  pp_err err = {0};
  char origin[64];
  snprintf(origin, sizeof origin, "calibration %lld", (long long)k.id);
  int rc = strcmp(k.cluster_name, c->name) != 0
               ? pp_err_set(&err, PP_INPUT, "--calibration %s: calibration %lld was fitted on "
                            "cluster %s, not %s", sel, (long long)k.id, k.cluster_name, c->name)
               : cal_params_apply(p, k.params_json, origin, &err);
  if (!rc) *id = k.id;
  store_calibration_clear(&k);
  return rc ? cli_fail(cmd, &err) : 0;
#else
  (void)p;
  return 1;
#endif
}

int cli_calibration_list(const char *cmd, const char *sel, const char *db, char *cluster,
                         size_t ncluster, char *list, char *sigmas, size_t nlist, int64_t *id) {
  *id = 0;
  cluster[0] = list[0] = sigmas[0] = '\0';
  store_calibration k;
  int got = read_calibration(cmd, sel, db, NULL, &k);
  if (got <= 0) return -got;
#ifdef PODPLAN_GSL
  pp_err err = {0};
  char origin[64];
  snprintf(origin, sizeof origin, "calibration %lld", (long long)k.id);
  int rc = cal_params_list(k.params_json, origin, list, nlist, &err);
  if (!rc) rc = cal_params_sigmas(k.params_json, origin, sigmas, nlist, &err);
  if (!rc) {
    snprintf(cluster, ncluster, "%s", k.cluster_name);
    *id = k.id;
  }
  store_calibration_clear(&k);
  return rc ? cli_fail(cmd, &err) : 0;
#else
  (void)ncluster, (void)nlist;
  return 1;
#endif
}

json_t *cli_path_json(const char *path) {
  char cwd[4096];
  if (path[0] == '/' || !getcwd(cwd, sizeof cwd)) return json_string(path);
  size_t n = strlen(cwd) + strlen(path) + 2;
  char *abs = malloc(n);
  if (!abs) return json_string(path);
  snprintf(abs, n, "%s/%s", cwd, path);
  json_t *j = json_string(abs);
  free(abs);
  return j;
}

/* ---- the job: MPI below the CLI (be_job_*), seen through search_comm ------------------------ */

int cli_job_init(cli_job *j, pp_err *err) {
  if (be_job_init(0, err)) return err->code; /* MPI starts when a launcher started us */
  j->rank = be_job_rank();
  j->size = be_job_size();
  return PP_OK;
}

static int job_gather(void *ctx, const void *buf, size_t n, void **all, size_t **lens,
                      pp_err *err) {
  const cli_job *j = ctx;
  size_t all_n = 0, *l = NULL;
  *lens = NULL;
  if (j->rank == 0 && !(l = calloc((size_t)j->size, sizeof *l))) {
    fprintf(stderr, "podplan: rank 0: out of memory\n");
    be_job_abort(1); /* the other ranks would wait in the gather forever */
  }
  int rc = be_job_gather_bytes(buf, n, all, &all_n, l, err);
  if (rc || j->rank != 0) {
    free(l);
    return rc;
  }
  *lens = l;
  return PP_OK;
}

static int job_bcast(void *ctx, void **buf, size_t *n, pp_err *err) {
  const cli_job *j = ctx;
  void *copy = NULL;
  size_t cn = 0;
  int rc = be_job_bcast_bytes(j->rank == 0 ? *buf : NULL, j->rank == 0 ? *n : 0, &copy, &cn, err);
  if (!rc && j->rank != 0) {
    *buf = copy;
    *n = cn;
  }
  return rc;
}

void cli_job_comm(cli_job *j, search_comm *comm) {
  *comm = (search_comm){j->rank, j->size, job_gather, job_bcast, j};
}
