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
    "\n";

/* The options: getopt's table and the help's text. */
static const cli_opt opts[] = {
    {"cluster", "C", 'c', "the cluster the logs were measured on (preset, JSON or file)"},
    {"gpus", "N", 'g', "its size, as for predict"},
    {"db", "F", 'd', "store file (default podplan.db)"},
    {"json", NULL, 'j',
     "per file: collective, ranks, rows, max_busbw_gbps, max_algbw_gbps, file,\n"
     "ranks_from, truncated, stored (an array when there are several files)"},
    {"help", NULL, 'h', "this text"},
};
#define NOPTS (sizeof opts / sizeof opts[0])

static const char *const CMD = "import";

/* One log, its rows as measurements and what storing them did. */
typedef struct imported {
  const char *path;
  tr_nccl_log log;
  char key[48];        /* run key: nccl-tests:<hash of the file> */
  char **shape;        /* shape_json of each measurement */
  store_batch rows;    /* placements with a time, offered to the store; .added: new rows */
} imported;

static void imported_free(imported *f) {
  for (size_t i = 0; i < f->rows.n; i++) free(f->shape[i]);
  free(f->shape), free(f->rows.ms);
  tr_nccl_log_free(&f->log);
}

/* The measurements of one log: seq 2i out-of-place and 2i+1 in-place of row i; a placement
 * without a time (0 or N/A) is skipped. */
static int log_rows(imported *f, pp_err *err) {
  const tr_nccl_log *L = &f->log;
  snprintf(f->key, sizeof f->key, "nccl-tests:%016" PRIx64, L->hash);
  store_measurement *m = f->rows.ms = calloc(2 * L->nrows + 1, sizeof *m);
  f->shape = calloc(2 * L->nrows + 1, sizeof *f->shape);
  if (!m || !f->shape) return pp_err_set(err, PP_NOMEM, "%s: out of memory", f->path);
  for (size_t i = 0; i < L->nrows; i++) {
    const tr_nccl_row *r = &L->rows[i];
    const tr_nccl_result *p[2] = {&r->out, r->has_in ? &r->in : NULL};
    for (int k = 0; k < 2; k++) {
      if (!p[k] || !(p[k]->time_us > 0)) continue;
      size_t n = f->rows.n;
      json_t *o = json_pack("{s:I, s:s, s:s, s:i}", "count", (json_int_t)r->count, "type",
                            r->type, "redop", r->redop, "inplace", k);
      f->shape[n] = o ? json_dumps(o, JSON_COMPACT) : NULL;
      json_decref(o);
      if (!f->shape[n]) return pp_err_set(err, PP_NOMEM, "%s: out of memory", f->path);
      m[n] = (store_measurement){.run_key = f->key, .seq = (int)(2 * i + (size_t)k),
                                 .kind = "coll", .name = L->collective, .device = "nccl-tests",
                                 .shape_json = f->shape[n], .bytes = (double)r->size_bytes,
                                 .ranks = L->ranks, .time_s = p[k]->time_us * 1e-6,
                                 .algbw_gbps = p[k]->algbw_gbps > 0 ? p[k]->algbw_gbps : 0,
                                 .busbw_gbps = p[k]->busbw_gbps > 0 ? p[k]->busbw_gbps : 0,
                                 .source = f->path};
      f->rows.n++;
    }
  }
  return PP_OK;
}

/* Stores every log in one transaction (with the cluster when given). */
static int store_logs(const char *db, const spec_cluster *cl, imported *f, int nfiles,
                      pp_err *err) {
  store_batch *b = calloc((size_t)nfiles, sizeof *b);
  if (!b) return pp_err_set(err, PP_NOMEM, "out of memory");
  for (int i = 0; i < nfiles; i++) b[i] = f[i].rows;
  int rc = store_import_measurements(db, cl, b, (size_t)nfiles, err);
  for (int i = 0; i < nfiles; i++) f[i].rows.added = b[i].added;
  free(b);
  return rc;
}

static json_t *log_json(const imported *f, const char *cluster) {
  const tr_nccl_log *L = &f->log;
  json_t *o = json_pack(
      "{s:s, s:s, s:s, s:i, s:s, s:I, s:f, s:f, s:b, s:I, s:I}", "file", f->path, "collective",
      L->collective, "collective_from", L->collective_from, "ranks", L->ranks, "ranks_from",
      L->ranks_from, "rows", (json_int_t)L->nrows, "max_busbw_gbps", L->max_busbw_gbps,
      "max_algbw_gbps", L->max_algbw_gbps, "truncated", L->truncated, "measurements",
      (json_int_t)f->rows.n, "stored", (json_int_t)f->rows.added);
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
         L->max_busbw_gbps, L->max_algbw_gbps, f->rows.added, f->rows.n - f->rows.added);
  size_t placements = L->nrows * (L->nrows && L->rows[0].has_in ? 2 : 1);
  if (placements > f->rows.n) printf("; %zu without a time skipped", placements - f->rows.n);
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
  struct option longs[NOPTS + 1];
  cli_opts_longs(opts, NOPTS, longs);
  const char *cluster = NULL, *db = STORE_DEFAULT_PATH;
  int gpus = 0, json = 0, first = 1, c;
  while ((c = cli_getopt(CMD, argc, argv, "h", longs, &first)) != -1) {
    switch (c) {
    case 'h':
      fputs(usage, stdout);
      cli_opts_help(stdout, opts, NOPTS, 13);
      return 0;
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
    if (tr_nccl_parse(f[i].path, &f[i].log, &err) || log_rows(&f[i], &err))
      rc = cli_fail(CMD, &err);
  }
  if (!rc && store_logs(db, cluster ? &cl : NULL, f, nfiles, &err)) rc = cli_fail(CMD, &err);
  if (!rc) print_results(f, nfiles, json, cluster ? cl.name : NULL);
  for (int i = 0; i < nfiles; i++) imported_free(&f[i]);
  free(f);
  return rc;
}
