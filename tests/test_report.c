/* podplan report on stores with known rows, through the real binary and real SQLite files.
 *
 *   test_report PODPLAN SIM GSL CPU NCCL_FIXTURES TINY_MODEL
 *     (SIM, GSL, CPU: 1 when the build has the simulator, calibrate/ and the cpu device)
 *   builds one store with the podplan binary: `search --model gpt3-1.3b --cluster dgx-a100
 *   --gpus 8 --gbs 32` with --method megatron --simulate 1 and --method exhaustive --simulate 2
 *   (--json: their best times), --method two-level with --alpa-defaults and with --island
 *   domain (two variants of one method, when the build has CBC), `study validate --db`; with SIM `simulate` of gpt3-1.3b on 16
 *   GPUs (tp=2,pp=2) with --trace plus `predict --db` of the same plan (a simulated/predicted
 *   pair outside a search) and `predict --param flash_attention=0,gemm_eff=0.84 --db --json` of
 *   it (its JSON's params: the change alone; a score on other parameters, which pairs with
 *   nothing: still 4 simulated/predicted pairs, the default prediction's), and a second
 *   `simulate --trace` of another plan whose trace is then deleted; with CPU `run` of the tiny model (1 rank, 1 layer) with --trace; with GSL `import
 *   nccl-tests` of two 8-H100 logs and `calibrate --holdout 0.25 --json`. Then
 *   `report --db F --out DIR` (DIR and its missing parent made): exit 0, the text names both methods and their best times and
 *   each section with its row count; every CSV parses (study's RFC 4180 reader) with a header
 *   and the rows expected, the best times, megatron's and exhaustive's ratios to the fastest, one methods row per two-level variant
 *   with its run's best, the validation
 *   pairs, the calibration's MAPE after and held-out MAPE after (as calibrate printed them),
 *   and the trace index (there / deleted, size) in them; each plot's PNG (signature) and SVG
 *   exist, non-empty; report.md links every plot and CSV; the store file is byte for byte as
 *   it was. `report` without --out writes no file. An empty store (store_open, no rows): the
 *   report says there is nothing, its CSVs are headers alone and no plot file is made. Stores of
 *   schema 3, 2 and 1 (the same rows, the later tables and columns dropped): read as they are,
 *   not migrated. Bad input: a --db that does not exist (exit 2, one line naming it, not
 *   created), a file that is not a database (exit 2), an unknown option (exit 2), a quote in
 *   --out (exit 2). */
#include <dirent.h>
#include <jansson.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "podplan/store.h"
#include "study_int.h"
#include "testutil.h"

static char *bin;

/* Runs podplan with args (NULL-terminated). */
static void pp(const char *const *args, tu_run *r) {
  char *a[40];
  int n = 0;
  a[n++] = bin;
  for (int i = 0; args[i] && n < 39; i++) a[n++] = (char *)args[i];
  a[n] = NULL;
  tu_exec(a, r);
}

/* Runs podplan, checks exit 0 and returns its stdout parsed as JSON (or NULL). */
static json_t *pp_json(const char *const *args) {
  tu_run r;
  pp(args, &r);
  CHECK_EQ(r.status, 0);
  if (r.status) fprintf(stderr, "  %s: %s", args[0], r.err);
  json_t *o = json_loads(r.out ? r.out : "", 0, NULL);
  tu_run_free(&r);
  return o;
}

static void pp_ok(const char *const *args) {
  tu_run r;
  pp(args, &r);
  CHECK_EQ(r.status, 0);
  if (r.status) fprintf(stderr, "  %s: %s", args[0], r.err);
  tu_run_free(&r);
}

static double num(json_t *o, const char *key) { return json_number_value(json_object_get(o, key)); }


/* dir/name parsed as a CSV: every row as long as the header, nrows data rows. */
static void csv_load(const char *dir, const char *name, int nrows, study__csv *c) {
  char *path = tu_path(dir, name);
  pp_err err = {0};
  memset(c, 0, sizeof *c);
  int rc = study__csv_load(path, NULL, 0, name, c, &err);
  CHECK_EQ(rc, 0);
  if (rc) fprintf(stderr, "  %s\n", err.msg);
  CHECK_EQ(c->nrows, nrows);
  if (c->nrows != nrows) fprintf(stderr, "  %s: %d rows, want %d\n", name, c->nrows, nrows);
  char *text = tu_read(path, NULL);
  int lines = 0, quotes = 0;
  for (const char *s = text; s && *s; s++) { /* rows end outside quotes */
    quotes ^= *s == '"';
    lines += *s == '\n' && !quotes;
  }
  CHECK_EQ(lines, nrows + 1);
  free(text), free(path);
}

/* The field of column `col` in the first row whose column `key` is `val` (NULL: none). */
static const char *csv_get(const study__csv *c, const char *key, const char *val,
                           const char *col) {
  int k = study__csv_col(c, key), j = study__csv_col(c, col);
  CHECK(k >= 0 && j >= 0);
  for (int i = 0; k >= 0 && j >= 0 && i < c->nrows; i++)
    if (strcmp(c->rows[i][k], val) == 0) return c->rows[i][j];
  return NULL;
}

static double csv_num(const study__csv *c, const char *key, const char *val, const char *col) {
  const char *s = csv_get(c, key, val, col);
  CHECK(s != NULL && *s);
  return s && *s ? strtod(s, NULL) : NAN;
}

static long file_size(const char *dir, const char *name) {
  char *p = tu_path(dir, name);
  struct stat sb;
  long n = stat(p, &sb) == 0 ? (long)sb.st_size : -1;
  free(p);
  return n;
}

/* The plot's PNG and SVG exist, non-empty, with their signatures. */
static void plot_made(const char *dir, const char *name) {
  char png[128], svg[128];
  snprintf(png, sizeof png, "%s.png", name);
  snprintf(svg, sizeof svg, "%s.svg", name);
  char *pp_ = tu_path(dir, png), *sp = tu_path(dir, svg);
  size_t n = 0;
  char *a = tu_read(pp_, &n), *b = tu_read(sp, NULL);
  CHECK(a && n > 1000 && memcmp(a, "\x89PNG\r\n\x1a\n", 8) == 0);
  CHECK(b && strstr(b, "<svg") != NULL);
  if (!a || !b) fprintf(stderr, "  plot %s missing\n", name);
  free(a), free(b), free(pp_), free(sp);
}

/* Files in dir whose name ends with ext. */
static int count_ext(const char *dir, const char *ext) {
  DIR *d = opendir(dir);
  int n = 0;
  struct dirent *e;
  while (d && (e = readdir(d))) {
    size_t l = strlen(e->d_name), k = strlen(ext);
    n += l > k && strcmp(e->d_name + l - k, ext) == 0;
  }
  if (d) closedir(d);
  return n;
}

static void report(const char *db, const char *out, tu_run *r) {
  const char *a[] = {"report", "--db", db, out ? "--out" : NULL, out, NULL};
  pp(a, r);
}

static void bad(const char *const *args, const char *want) {
  tu_run r;
  pp(args, &r);
  CHECK_EQ(r.status, 2);
  CHECK_CONTAINS(r.err, want);
  CHECK_EQ(tu_lines(r.err), 1);
  if (r.status != 2 || tu_lines(r.err) != 1) {
    for (int i = 0; args[i]; i++) fprintf(stderr, "%s%s", i ? " " : "  ", args[i]);
    fprintf(stderr, ": exit %d\n%s", r.status, r.err ? r.err : "");
  }
  tu_run_free(&r);
}

/* A copy of db (VACUUM INTO) taken back to schema `to` (1, 2 or 3): the later tables and
 * columns dropped (and the scores on other parameters, which schema 3 could not hold), the
 * version recorded. */
static char *older(const char *dir, const char *db, int to) {
  char name[32], sql[512];
  snprintf(name, sizeof name, "v%d.db", to);
  char *path = tu_path(dir, name);
  sqlite3 *h = NULL;
  sqlite3_open(db, &h);
  snprintf(sql, sizeof sql, "VACUUM INTO '%s'", path);
  CHECK_EQ(sqlite3_exec(h, sql, NULL, NULL, NULL), SQLITE_OK);
  sqlite3_close(h);
  sqlite3_open(path, &h);
  CHECK_EQ(sqlite3_exec(h,
                        "DELETE FROM scores WHERE params != ''; DROP INDEX scores_key;"
                        "ALTER TABLE scores DROP COLUMN params;"
                        "CREATE UNIQUE INDEX scores_key ON scores (plan_id, model_id, cluster_id,"
                        " source, IFNULL(calibration_id, 0), IFNULL(search_run_id, 0));"
                        "UPDATE schema_version SET version = 3",
                        NULL, NULL, NULL), SQLITE_OK);
  if (to <= 2)
    CHECK_EQ(sqlite3_exec(h, "DROP TABLE study_cases; UPDATE schema_version SET version = 2",
                          NULL, NULL, NULL), SQLITE_OK);
  if (to == 1) {
    static const char v1[] =
        "DROP INDEX search_runs_key; DROP INDEX scores_run; DROP TABLE search_checkpoint_plans;"
        "DROP TABLE search_checkpoints; ALTER TABLE search_runs DROP COLUMN params_key;"
        "ALTER TABLE search_runs DROP COLUMN units; ALTER TABLE search_runs DROP COLUMN units_done;"
        "ALTER TABLE search_runs DROP COLUMN feasible; ALTER TABLE search_runs DROP COLUMN pruned;"
        "ALTER TABLE search_runs DROP COLUMN complete;"
        "ALTER TABLE search_runs DROP COLUMN space_size;"
        "ALTER TABLE search_runs DROP COLUMN gap; UPDATE schema_version SET version = 1";
    CHECK_EQ(sqlite3_exec(h, v1, NULL, NULL, NULL), SQLITE_OK);
  }
  sqlite3_close(h);
  return path;
}

/* What the store was built with, to find in the report. */
typedef struct known {
  double megatron_s, exhaustive_s;  /* best_iter_time_s of the two searches */
  double tl_alpa_s, tl_domain_s;    /* two-level --alpa-defaults, --island domain (0: no CBC) */
  int nruns;                        /* search runs stored */
  long long published;              /* published scores (study validate) */
  double mape_after, held_after;    /* calibrate --json */
  double pred16_s;                  /* predict of the simulated 16-GPU plan, default parameters */
  char *trace_kept, *trace_gone, *trace_run;
} known;

static void build(const char *dir, const char *db, const char *const *flags, const char *nccl,
                  const char *tiny, known *k) {
  int sim = flags[0][0] == '1', gsl = flags[1][0] == '1', cpu = flags[2][0] == '1';
  const char *meg[] = {"search", "--model", "gpt3-1.3b", "--cluster", "dgx-a100", "--gpus", "8",
                       "--gbs", "32", "--method", "megatron", "--db", db, "--json",
                       sim ? "--simulate" : NULL, "1", NULL};
  json_t *o = pp_json(meg);
  k->megatron_s = num(o, "best_iter_time_s");
  json_decref(o);
  meg[10] = "exhaustive", meg[15] = "2";
  o = pp_json(meg);
  k->exhaustive_s = num(o, "best_iter_time_s");
  json_decref(o);
  CHECK(k->megatron_s > k->exhaustive_s && k->exhaustive_s > 0);
  k->nruns = 2;
  /* two variants of one method: the report keeps them apart (a build without CBC has none) */
  const char *tl[] = {"search", "--model", "gpt3-1.3b", "--cluster", "dgx-a100", "--gpus", "8",
                      "--gbs", "32", "--method", "two-level", "--db", db, "--json",
                      "--alpa-defaults", NULL, NULL};
  double *tl_s[] = {&k->tl_alpa_s, &k->tl_domain_s};
  for (int v = 0; v < 2; v++) {
    if (v) tl[14] = "--island", tl[15] = "domain";
    tu_run r;
    pp(tl, &r);
    if (r.status && r.err && strstr(r.err, "CBC")) {
      tu_run_free(&r);
      break;
    }
    CHECK_EQ(r.status, 0);
    json_t *to = json_loads(r.out ? r.out : "", 0, NULL);
    *tl_s[v] = num(to, "best_iter_time_s");
    CHECK(*tl_s[v] > 0);
    json_decref(to);
    tu_run_free(&r);
    k->nruns++;
  }
  const char *val[] = {"study", "validate", "--db", db, NULL};
  pp_ok(val);
  k->published = tu_sql_int(db, "SELECT count(*) FROM scores WHERE source = 'published'");
  CHECK(k->published > 20);
  k->trace_kept = tu_path(dir, "sim.json"), k->trace_gone = tu_path(dir, "gone.json");
  k->trace_run = tu_path(dir, "run.json");
  if (sim) {
    const char *s[] = {"simulate", "--model", "gpt3-1.3b", "--cluster", "dgx-a100", "--gpus",
                       "16", "--plan", "tp=2,pp=2,gbs=32", "--trace", k->trace_kept, "--db", db,
                       NULL};
    pp_ok(s);
    const char *pr[] = {"predict", "--model", "gpt3-1.3b", "--cluster", "dgx-a100", "--gpus",
                        "16", "--plan", "tp=2,pp=2,gbs=32", "--db", db, "--json", NULL, NULL, NULL};
    o = pp_json(pr);
    k->pred16_s = num(o, "iter_time_s");
    json_decref(o);
    pr[12] = "--param", pr[13] = "flash_attention=0,gemm_eff=0.84"; /* in no pair */
    o = pp_json(pr);
    CHECK_STREQ(json_string_value(json_object_get(o, "params")), "flash_attention=0");
    json_decref(o);
    const char *g[] = {"simulate", "--model", "gpt3-1.3b", "--cluster", "dgx-a100", "--gpus", "8",
                       "--plan", "tp=8,gbs=8", "--trace", k->trace_gone, "--db", db, NULL};
    pp_ok(g);
    CHECK_EQ(unlink(k->trace_gone), 0);
  }
  if (cpu) {
    const char *r[] = {"run", "--model", tiny, "--cluster", "cpu-host", "--gpus", "1", "--plan",
                       "tp=1,gbs=1,mbs=1", "--layers", "1", "--warmup", "0", "--iters", "1",
                       "--no-verify", "--trace", k->trace_run, "--db", db, NULL};
    pp_ok(r);
  }
  if (gsl) {
    char *ar = tu_path(nccl, "synthetic_all_reduce_v2.19.txt");
    char *ag = tu_path(nccl, "synthetic_all_gather_v2.19.txt");
    const char *imp[] = {"import", "nccl-tests", ar, ag, "--cluster", "dgx-h100", "--gpus", "8",
                         "--db", db, NULL};
    pp_ok(imp);
    const char *fit[] = {"calibrate", "--cluster", "dgx-h100", "--holdout", "0.25", "--db", db,
                         "--json", NULL};
    o = pp_json(fit);
    k->mape_after = num(o, "mape_after"), k->held_after = num(o, "holdout_mape_after");
    json_decref(o);
    free(ar), free(ag);
  }
}

/* The report of the full store: text, CSVs, plots, report.md. */
static void check_full(const char *dir, const char *db, const char *const *flags, const known *k) {
  int sim = flags[0][0] == '1', gsl = flags[1][0] == '1', cpu = flags[2][0] == '1';
  char *out = tu_path(dir, "out/report") /* made with its parent */, num_s[64];
  size_t n0 = 0, n1 = 0;
  char *before = tu_read(db, &n0);
  tu_run r;
  report(db, out, &r);
  CHECK_EQ(r.status, 0);
  CHECK_STREQ(r.err, "");
  free(tu_write(dir, "report.txt", r.out ? r.out : "", r.out ? strlen(r.out) : 0)); /* kept on failure */
  snprintf(num_s, sizeof num_s, "Search runs (%d)", k->nruns);
  CHECK_CONTAINS(r.out, num_s);
  CHECK_CONTAINS(r.out, "megatron");
  CHECK_CONTAINS(r.out, "exhaustive");
  snprintf(num_s, sizeof num_s, "%.4f", k->megatron_s);
  CHECK_CONTAINS(r.out, num_s);
  snprintf(num_s, sizeof num_s, "%.4f", k->exhaustive_s);
  CHECK_CONTAINS(r.out, num_s);
  snprintf(num_s, sizeof num_s, "%.3f", k->megatron_s / k->exhaustive_s);
  CHECK_CONTAINS(r.out, num_s);
  char want[96];
  snprintf(want, sizeof want, "Cost model against published runs (%lld)", k->published);
  CHECK_CONTAINS(r.out, want);
  if (sim) CHECK_CONTAINS(r.out, "Simulator against cost model (4)");
  if (gsl) CHECK_CONTAINS(r.out, "Calibrations (1)");
  CHECK_CONTAINS(r.out, "Study cases: none");
  tu_run_free(&r);
  char *after = tu_read(db, &n1);
  CHECK(before && after && n0 == n1 && memcmp(before, after, n0) == 0); /* not written */
  free(before), free(after);

  study__csv c;
  csv_load(out, "search_runs.csv", k->nruns, &c);
  CHECK_NEAR(csv_num(&c, "method", "megatron", "best_iter_time_s"), k->megatron_s, 1e-8);
  CHECK_NEAR(csv_num(&c, "method", "exhaustive", "best_iter_time_s"), k->exhaustive_s, 1e-8);
  if (sim) CHECK_NEAR(csv_num(&c, "method", "megatron", "best_sim_s"), k->megatron_s, 0.05);
  study__csv_free(&c);
  csv_load(out, "methods.csv", k->nruns, &c);
  double fastest = k->exhaustive_s;
  if (k->tl_alpa_s > 0 && k->tl_alpa_s < fastest) fastest = k->tl_alpa_s;
  if (k->tl_domain_s > 0 && k->tl_domain_s < fastest) fastest = k->tl_domain_s;
  CHECK_NEAR(csv_num(&c, "method", "megatron", "vs_fastest"), k->megatron_s / fastest, 1e-8);
  CHECK_NEAR(csv_num(&c, "method", "exhaustive", "vs_fastest"), k->exhaustive_s / fastest, 1e-8);
  if (k->nruns == 4) { /* one row per variant, each with its own run's best */
    CHECK_NEAR(csv_num(&c, "method", "two-level alpa-defaults", "best_iter_time_s"), k->tl_alpa_s, 1e-8);
    CHECK_NEAR(csv_num(&c, "method", "two-level island=domain", "best_iter_time_s"), k->tl_domain_s, 1e-8);
  }
  study__csv_free(&c);
  csv_load(out, "validation.csv", (int)k->published, &c);
  CHECK(study__csv_col(&c, "published_s") >= 0 && study__csv_col(&c, "error_pct") >= 0);
  study__csv_free(&c);
  csv_load(out, "sim_vs_costmodel.csv", sim ? 4 : 0, &c);
  if (sim) /* the pair holds the default prediction, not the one on other parameters */
    CHECK_NEAR(csv_num(&c, "gpus", "16", "costmodel_s"), k->pred16_s, 1e-8);
  study__csv_free(&c);
  csv_load(out, "calibrations.csv", gsl, &c);
  if (gsl) {
    CHECK_NEAR(csv_num(&c, "id", "1", "mape_after_pct"), k->mape_after, 1e-6);
    CHECK_NEAR(csv_num(&c, "id", "1", "held_mape_after_pct"), k->held_after, 1e-6);
    CHECK_NEAR(csv_num(&c, "id", "1", "held_out"), 23, 0);
  }
  study__csv_free(&c);
  csv_load(out, "studies.csv", 0, &c);
  study__csv_free(&c);
  csv_load(out, "traces.csv", 2 * sim + cpu, &c);
  if (sim) {
    const char *yes = csv_get(&c, "path", k->trace_kept, "exists");
    const char *no = csv_get(&c, "path", k->trace_gone, "exists");
    CHECK(yes && strcmp(yes, "yes") == 0);
    CHECK(no && strcmp(no, "no") == 0);
    CHECK_NEAR(csv_num(&c, "path", k->trace_kept, "size_bytes"),
               file_size(dir, "sim.json"), 0);
  }
  if (cpu) CHECK_STREQ(csv_get(&c, "path", k->trace_run, "source"), "backend");
  study__csv_free(&c);

  char *mdp = tu_path(out, "report.md"), *md = tu_read(mdp, NULL);
  free(mdp);
  static const char *const plots[] = {"methods", "validation", "sim_vs_costmodel", "calibrations"};
  int made[] = {1, 1, sim, gsl};
  for (int i = 0; i < 4; i++) {
    snprintf(want, sizeof want, "](%s.png)", plots[i]);
    if (made[i]) plot_made(out, plots[i]);
    if (made[i]) CHECK_CONTAINS(md, want);
    snprintf(want, sizeof want, "(%s.csv)", plots[i]);
    CHECK_CONTAINS(md, want);
  }
  CHECK_EQ(count_ext(out, ".png"), 2 + sim + gsl);
  CHECK_CONTAINS(md, "(traces.csv)");
  CHECK_CONTAINS(md, "(search_runs.csv)");
  free(md), free(out);
}

/* The report without --out, of an empty store and of older schemas. */
static void check_others(const char *dir, const char *db, int nruns) {
  tu_run r;
  report(db, NULL, &r);
  CHECK_EQ(r.status, 0);
  CHECK_CONTAINS(r.out, "no --out: no files written");
  tu_run_free(&r);

  char *edb = tu_path(dir, "empty.db"), *eout = tu_path(dir, "eout");
  store *s = NULL;
  pp_err err = {0};
  CHECK_EQ(store_open(edb, NULL, &s, &err), 0);
  store_close(s);
  report(edb, eout, &r);
  CHECK_EQ(r.status, 0);
  CHECK_CONTAINS(r.out, "nothing to report");
  CHECK_CONTAINS(r.out, "plot methods: skipped, no data");
  tu_run_free(&r);
  CHECK_EQ(count_ext(eout, ".png") + count_ext(eout, ".svg") + count_ext(eout, ".gp"), 0);
  CHECK_EQ(count_ext(eout, ".csv"), 7);
  study__csv c;
  csv_load(eout, "search_runs.csv", 0, &c);
  CHECK(c.ncols > 10);
  study__csv_free(&c);
  CHECK_EQ(file_size(eout, "report.md") > 0, 1);

  for (int v = 3; v >= 1; v--) {
    char *odb = older(dir, db, v), want[64];
    report(odb, NULL, &r);
    CHECK_EQ(r.status, 0);
    snprintf(want, sizeof want, "(schema %d, older than", v);
    CHECK_CONTAINS(r.out, want);
    snprintf(want, sizeof want, "Search runs (%d)", nruns);
    CHECK_CONTAINS(r.out, want);
    CHECK_CONTAINS(r.out, "megatron");
    tu_run_free(&r);
    CHECK_EQ(tu_sql_int(odb, "SELECT max(version) FROM schema_version"), v); /* not migrated */
    free(odb);
  }
  free(edb), free(eout);
}

static void check_bad(const char *dir, const char *db) {
  char *missing = tu_path(dir, "missing.db"), *junk = tu_path(dir, "junk.db");
  const char *a[] = {"report", "--db", missing, NULL};
  bad(a, missing);
  CHECK(access(missing, F_OK) != 0); /* not created */
  free(tu_write(dir, "junk.db", "not a database at all, but long enough to be read\n", 51));
  const char *b[] = {"report", "--db", junk, NULL};
  bad(b, "junk.db");
  const char *c[] = {"report", "--db", db, "--bogus", NULL};
  bad(c, "--bogus");
  const char *d[] = {"report", "--db", db, "--out", "it's", NULL};
  bad(d, "--out it's");
  CHECK(access("it's", F_OK) != 0);
  free(missing), free(junk);
}

int main(int argc, char **argv) {
  if (argc < 7) return 2;
  bin = argv[1];
  const char *flags[] = {argv[2], argv[3], argv[4]};
  char *dir = tu_tmpdir("report"), *db = tu_path(dir, "r.db");
  known k = {0};
  build(dir, db, flags, argv[5], argv[6], &k);
  check_full(dir, db, flags, &k);
  check_others(dir, db, k.nruns);
  check_bad(dir, db);
  free(k.trace_kept), free(k.trace_gone), free(k.trace_run);
  if (!check_status())
    tu_rmtree(dir);
  else
    fprintf(stderr, "  kept %s (report.txt: the full store's report)\n", dir);
  free(dir), free(db);
  return check_status();
}
