/* podplan import: nccl-tests logs into the store as measurements. Every file is read before the
 * database is opened, so one rejected file stores nothing; the rows of all files then go in one
 * transaction. A file's run key is the hash of its bytes: importing it again adds nothing. */
#include <inttypes.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "podplan/tr.h"

static const char usage[] =
    "usage: podplan import nccl-tests FILE... [--cluster C [--gpus N]] [--db F] [--json]\n"
    "\n"
    "Reads nccl-tests logs (every format variant: old and new columns, -c 0, per-iteration\n"
    "columns, timestamps, NCCL INFO lines and MPI prefixes anywhere) and stores each row's\n"
    "out-of-place and in-place figures as measurements (kind coll, device nccl-tests). The\n"
    "collective comes from the log's header or the binary's name, the ranks from its device\n"
    "lines or, where those are cut off, from busbw/algbw. A log that ends early keeps its\n"
    "complete rows (a warning says so); a garbled row rejects the log, and then nothing from\n"
    "any file is stored (exit 2). Importing the same file again adds nothing.\n"
    "\n"
    "  --cluster C   the cluster the logs were measured on (preset, JSON or file)\n"
    "  --gpus N      its size, as for predict\n"
    "  --db F        store file (default podplan.db)\n"
    "  --json        per file: collective, ranks, rows, max_busbw_gbps, max_algbw_gbps, file,\n"
    "                ranks_from, truncated, stored (an array when there are several files)\n"
    "  -h, --help    this text\n";

static const char *const CMD = "import";

/* One log and what storing it did. */
typedef struct imported {
  const char *path;
  tr_nccl_log log;
  size_t measurements; /* placements with a time, offered to the store */
  size_t added;        /* of those, rows new to the store */
} imported;

/* The measurements of one log: seq 2i out-of-place and 2i+1 in-place of row i; a placement
 * without a time (0 or N/A) is skipped. */
static int put_log(store *s, imported *f, int64_t cluster_id, pp_err *err) {
  const tr_nccl_log *L = &f->log;
  char key[48];
  snprintf(key, sizeof key, "nccl-tests:%016" PRIx64, L->hash);
  store_measurement *m = calloc(2 * L->nrows, sizeof *m);
  char **shape = calloc(2 * L->nrows, sizeof *shape);
  size_t n = 0;
  int rc = PP_OK;
  if (!m || !shape) goto nomem;
  for (size_t i = 0; i < L->nrows; i++) {
    const tr_nccl_row *r = &L->rows[i];
    const tr_nccl_result *p[2] = {&r->out, r->has_in ? &r->in : NULL};
    for (int k = 0; k < 2; k++) {
      if (!p[k] || !(p[k]->time_us > 0)) continue;
      json_t *o = json_pack("{s:I, s:s, s:s, s:i}", "count", (json_int_t)r->count, "type",
                            r->type, "redop", r->redop, "inplace", k);
      shape[n] = o ? json_dumps(o, JSON_COMPACT) : NULL;
      json_decref(o);
      if (!shape[n]) goto nomem;
      m[n] = (store_measurement){.run_key = key, .seq = (int)(2 * i + (size_t)k), .kind = "coll",
                                 .name = L->collective, .cluster_id = cluster_id,
                                 .device = "nccl-tests", .shape_json = shape[n],
                                 .bytes = (double)r->size_bytes, .ranks = L->ranks,
                                 .time_s = p[k]->time_us * 1e-6,
                                 .algbw_gbps = p[k]->algbw_gbps > 0 ? p[k]->algbw_gbps : 0,
                                 .busbw_gbps = p[k]->busbw_gbps > 0 ? p[k]->busbw_gbps : 0,
                                 .source = f->path};
      n++;
    }
  }
  f->measurements = n;
  rc = store_put_measurements(s, m, n, &f->added, err);
  goto done;
nomem:
  rc = pp_err_set(err, PP_NOMEM, "%s: out of memory", f->path);
done:
  for (size_t i = 0; shape && i < 2 * L->nrows; i++) free(shape[i]);
  free(shape);
  free(m);
  return rc;
}

/* Stores every log in one transaction (with the cluster when given). */
static int store_logs(const char *db, const spec_cluster *cl, imported *f, int nfiles,
                      pp_err *err) {
  store *s = NULL;
  int64_t cluster_id = 0;
  int rc = store_open(db, NULL, &s, err);
  if (!rc) rc = store_begin(s, err);
  if (!rc && cl) rc = store_put_cluster(s, cl, &cluster_id, err);
  for (int i = 0; !rc && i < nfiles; i++) rc = put_log(s, &f[i], cluster_id, err);
  if (!rc) rc = store_commit(s, err);
  store_close(s); /* rolls back what was not committed */
  return rc;
}

static json_t *log_json(const imported *f, const char *cluster) {
  const tr_nccl_log *L = &f->log;
  json_t *o = json_pack(
      "{s:s, s:s, s:s, s:i, s:s, s:I, s:f, s:f, s:b, s:I, s:I}", "file", f->path, "collective",
      L->collective, "collective_from", L->collective_from, "ranks", L->ranks, "ranks_from",
      L->ranks_from, "rows", (json_int_t)L->nrows, "max_busbw_gbps", L->max_busbw_gbps,
      "max_algbw_gbps", L->max_algbw_gbps, "truncated", L->truncated, "measurements",
      (json_int_t)f->measurements, "stored", (json_int_t)f->added);
  json_object_set_new(o, "avg_busbw_gbps",
                      L->avg_busbw_gbps >= 0 ? json_real(L->avg_busbw_gbps) : json_null());
  if (cluster) json_object_set_new(o, "cluster", json_string(cluster));
  if (L->warning[0]) json_object_set_new(o, "warning", json_string(L->warning));
  return o;
}

static void print_text(const imported *f) {
  const tr_nccl_log *L = &f->log;
  char ranks[64] = "ranks unknown";
  if (L->ranks)
    snprintf(ranks, sizeof ranks, "%d rank%s (%s)", L->ranks, L->ranks == 1 ? "" : "s",
             L->ranks_from);
  printf("%s: %s, %s, %zu rows, max busbw %.1f GB/s, max algbw %.1f GB/s; %zu measurements "
         "stored (%zu already there)", f->path, L->collective, ranks, L->nrows,
         L->max_busbw_gbps, L->max_algbw_gbps, f->added, f->measurements - f->added);
  size_t placements = L->nrows * (L->nrows && L->rows[0].has_in ? 2 : 1);
  if (placements > f->measurements)
    printf("; %zu without a time skipped", placements - f->measurements);
  putchar('\n');
}

static void print_results(const imported *f, int nfiles, int json, const char *cluster) {
  for (int i = 0; i < nfiles; i++)
    if (f[i].log.warning[0]) fprintf(stderr, "podplan %s: warning: %s\n", CMD, f[i].log.warning);
  if (!json) {
    for (int i = 0; i < nfiles; i++) print_text(&f[i]);
    return;
  }
  json_t *out = nfiles == 1 ? log_json(&f[0], cluster) : json_array();
  for (int i = 0; nfiles > 1 && i < nfiles; i++) json_array_append_new(out, log_json(&f[i], cluster));
  json_dumpf(out, stdout, JSON_INDENT(1) | JSON_REAL_PRECISION(10));
  putchar('\n');
  json_decref(out);
}

int cmd_import(int argc, char **argv) {
  static const struct option longs[] = {
      {"cluster", required_argument, NULL, 'c'}, {"gpus", required_argument, NULL, 'g'},
      {"db", required_argument, NULL, 'd'},      {"json", no_argument, NULL, 'j'},
      {"help", no_argument, NULL, 'h'},          {NULL, 0, NULL, 0}};
  const char *cluster = NULL, *db = STORE_DEFAULT_PATH;
  int gpus = 0, json = 0, first = 1, c;
  while ((c = cli_getopt(CMD, argc, argv, "h", longs, &first)) != -1) {
    switch (c) {
    case 'h': fputs(usage, stdout); return 0;
    case 'c': cluster = optarg; break;
    case 'g':
      if (cli_int(CMD, "--gpus", optarg, 1, SPEC_MAX_GPUS, &gpus)) return 2;
      break;
    case 'd': db = optarg; break;
    case 'j': json = 1; break;
    default: return 2;
    }
  }
  if (optind >= argc) return cli_usage_error(CMD, "name what to import: nccl-tests");
  if (strcmp(argv[optind], "nccl-tests") != 0)
    return cli_usage_error(CMD, "unknown format '%s' (only nccl-tests)", argv[optind]);
  int nfiles = argc - optind - 1;
  if (nfiles < 1) return cli_usage_error(CMD, "nccl-tests: give at least one log file");
  if (gpus && !cluster) return cli_usage_error(CMD, "--gpus needs --cluster");
  pp_err err = {0};
  spec_cluster cl;
  if (cluster && spec_cluster_load(cluster, gpus, &cl, &err)) return cli_fail(CMD, &err);
  imported *f = calloc((size_t)nfiles, sizeof *f);
  if (!f) return cli_fail(CMD, &(pp_err){PP_NOMEM, "out of memory"});
  int rc = 0;
  for (int i = 0; i < nfiles && !rc; i++) {
    f[i].path = argv[optind + 1 + i];
    if (tr_nccl_parse(f[i].path, &f[i].log, &err)) rc = cli_fail(CMD, &err);
  }
  if (!rc && store_logs(db, cluster ? &cl : NULL, f, nfiles, &err)) rc = cli_fail(CMD, &err);
  if (!rc) print_results(f, nfiles, json, cluster ? cl.name : NULL);
  for (int i = 0; i < nfiles; i++) tr_nccl_log_free(&f[i].log);
  free(f);
  return rc;
}
