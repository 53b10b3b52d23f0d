/* The store on real SQLite files: create, reopen, migrate (the real schema and the
 * migration runner on its own list), a reader while another process writes, a locked
 * database, a writer killed mid-transaction, rows stored once, store_save (a scored plan
 * with its specs and measurements, all or nothing), store_save_specs and
 * store_import_measurements, a version-1 file migrated to the current version (4) with its
 * rows kept (a score of version 1 with no parameters), search runs (begin, per-unit checkpoints, resume, finish, simulator scores; a
 * failed checkpoint leaves nothing), and study cases (written with their specs, read back,
 * replaced by a second write, absent ones PP_NOTFOUND, a write into a read-only store leaves
 * nothing). */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../store/store_int.h"
#include "check.h"
#include "testutil.h"

static store_measurement meas(const char *run, int seq) {
  store_measurement m = {.run_key = run, .seq = seq, .kind = "coll", .name = "all_reduce",
                         .device = "cpu", .bytes = 1 << 20, .ranks = 8, .time_s = 1e-3 + seq * 1e-6,
                         .algbw_gbps = 1, .busbw_gbps = 1.75};
  return m;
}

static void create_reopen(const char *dir) {
  char *db = tu_path(dir, "a.db");
  store *s = NULL;
  pp_err err = {0};
  CHECK_EQ(store_open(db, NULL, &s, &err), PP_OK);
  int v = 0;
  CHECK_EQ(store_schema_version(s, &v, &err), PP_OK);
  CHECK_EQ(v, STORE_SCHEMA_VERSION);
  spec_model m;
  spec_cluster c;
  spec_plan p;
  CHECK_EQ(spec_model_load("gpt3-175b", &m, &err), PP_OK);
  CHECK_EQ(spec_cluster_load("dgx-h100", 1024, &c, &err), PP_OK);
  CHECK_EQ(spec_plan_parse("tp=8,pp=16,gbs=1536", &p, &err), PP_OK);
  CHECK_EQ(spec_plan_resolve(&p, &m, &c, &err), PP_OK);
  int64_t mid = 0, cid = 0, pid = 0, mid2 = 0, pid2 = 0;
  CHECK_EQ(store_put_model(s, &m, &mid, &err), PP_OK);
  CHECK_EQ(store_put_cluster(s, &c, &cid, &err), PP_OK);
  CHECK_EQ(store_put_plan(s, &p, &pid, &err), PP_OK);
  CHECK(mid > 0 && cid > 0 && pid > 0);
  store_close(s);

  char *mode = tu_sql_text(db, "PRAGMA journal_mode");
  CHECK_STREQ(mode, "wal");
  free(mode);
  const char *tables[] = {"models", "clusters", "plans", "search_runs", "scores",
                          "measurements", "calibrations", "schema_version"};
  for (int i = 0; i < 8; i++) {
    char sql[128];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM sqlite_master WHERE name = '%s'", tables[i]);
    CHECK_EQ(tu_sql_int(db, sql), 1);
  }

  /* reopen: same rows, same ids, nothing duplicated */
  CHECK_EQ(store_open(db, NULL, &s, &err), PP_OK);
  CHECK_EQ(store_put_model(s, &m, &mid2, &err), PP_OK);
  CHECK_EQ(store_put_plan(s, &p, &pid2, &err), PP_OK);
  CHECK_EQ(mid2, mid);
  CHECK_EQ(pid2, pid);
  int64_t n = 0;
  CHECK_EQ(store_count(s, "models", &n, &err), PP_OK);
  CHECK_EQ(n, 1);
  CHECK_EQ(store_count(s, "bogus", &n, &err), PP_INPUT);

  /* a plan read back is the plan written */
  spec_plan back;
  CHECK_EQ(store_get_plan(s, pid, &back, &err), PP_OK);
  char *j1 = spec_plan_json(&p), *j2 = spec_plan_json(&back);
  CHECK_STREQ(j1, j2);
  free(j1);
  free(j2);
  spec_plan_clear(&back);
  CHECK_EQ(store_get_plan(s, 9999, &back, &err), PP_NOTFOUND);

  /* scores: one row per (plan, model, cluster, source, calibration, run, parameters); a
   * rerun replaces */
  store_score sc = {.plan_id = pid, .model_id = mid, .cluster_id = cid,
                    .source = STORE_SRC_COSTMODEL, .iter_time_s = 10, .feasible = 1,
                    .breakdown_json = "{\"compute\":8}"};
  int64_t sid1 = 0, sid2 = 0;
  CHECK_EQ(store_put_score(s, &sc, &sid1, &err), PP_OK);
  sc.iter_time_s = 11;
  CHECK_EQ(store_put_score(s, &sc, &sid2, &err), PP_OK);
  CHECK_EQ(sid1, sid2);
  /* the same plan on other cost-model parameters is another score, not a replacement */
  int64_t sid3 = 0, sid4 = 0;
  sc.params = "flash_attention=0";
  sc.iter_time_s = 12;
  CHECK_EQ(store_put_score(s, &sc, &sid3, &err), PP_OK);
  CHECK(sid3 != sid1);
  sc.iter_time_s = 13;
  CHECK_EQ(store_put_score(s, &sc, &sid4, &err), PP_OK);
  CHECK_EQ(sid4, sid3);
  sc.params = NULL, sc.iter_time_s = 11;
  sc.source = STORE_SRC_SIM;
  CHECK_EQ(store_put_score(s, &sc, &sid2, &err), PP_OK);
  CHECK(sid2 != sid1);
  CHECK_EQ(store_count(s, "scores", &n, &err), PP_OK);
  CHECK_EQ(n, 3);

  /* a rolled-back transaction leaves nothing */
  spec_model m2;
  CHECK_EQ(spec_model_load("llama3-8b", &m2, &err), PP_OK);
  CHECK_EQ(store_begin(s, &err), PP_OK);
  CHECK_EQ(store_put_model(s, &m2, &mid2, &err), PP_OK);
  store_rollback(s);
  CHECK_EQ(store_count(s, "models", &n, &err), PP_OK);
  CHECK_EQ(n, 1);
  store_close(s);
  CHECK_DEQ(tu_sql_real(db, "SELECT iter_time_s FROM scores WHERE source = 'costmodel'"
                           " AND params = ''"), 11);
  CHECK_DEQ(tu_sql_real(db, "SELECT iter_time_s FROM scores WHERE source = 'costmodel'"
                           " AND params = 'flash_attention=0'"), 13);

  /* a foreign key to a missing row is refused */
  CHECK_EQ(store_open(db, NULL, &s, &err), PP_OK);
  sc.plan_id = 12345;
  CHECK_EQ(store_put_score(s, &sc, NULL, &err), PP_DB);
  CHECK_CONTAINS(err.msg, "FOREIGN KEY");
  store_close(s);
  spec_plan_clear(&p);
  free(db);
}

static int mig_count(sqlite3 *h, const char *table) {
  char sql[128];
  snprintf(sql, sizeof sql, "SELECT count(*) FROM sqlite_master WHERE name = '%s'", table);
  sqlite3_stmt *st;
  int n = -1;
  if (sqlite3_prepare_v2(h, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
    n = sqlite3_column_int(st, 0);
  sqlite3_finalize(st);
  return n;
}

static void migrations(const char *dir) {
  /* the runner on its own list: 0 -> 3 in steps, idempotent, refuses newer files, and a
   * failing step leaves the file at the last good version */
  char *db = tu_path(dir, "m.db");
  sqlite3 *h;
  pp_err err = {0};
  CHECK_EQ(sqlite3_open(db, &h), SQLITE_OK);
  const char *const migs[] = {
      "CREATE TABLE schema_version (version INTEGER NOT NULL); INSERT INTO schema_version VALUES (0);"
      "CREATE TABLE t1 (x);",
      "CREATE TABLE t2 (y); INSERT INTO t1 VALUES (1);",
      "ALTER TABLE t2 ADD COLUMN z; CREATE TABLE t3 (w);",
      "CREATE TABLE t4 (v); THIS IS NOT SQL;",
  };
  int v = -1;
  CHECK_EQ(store__migrate(h, db, migs, 2, &err), PP_OK);
  CHECK_EQ(store__version(h, db, &v, &err), PP_OK);
  CHECK_EQ(v, 2);
  CHECK_EQ(mig_count(h, "t3"), 0);
  CHECK_EQ(store__migrate(h, db, migs, 3, &err), PP_OK);
  CHECK_EQ(store__version(h, db, &v, &err), PP_OK);
  CHECK_EQ(v, 3);
  CHECK_EQ(mig_count(h, "t3"), 1);
  CHECK_EQ(store__migrate(h, db, migs, 3, &err), PP_OK); /* nothing to do */
  CHECK_EQ(store__migrate(h, db, migs, 4, &err), PP_DB);
  CHECK_CONTAINS(err.msg, "migration to schema version 4");
  CHECK_EQ(store__version(h, db, &v, &err), PP_OK);
  CHECK_EQ(v, 3);
  CHECK_EQ(mig_count(h, "t4"), 0); /* the failed step left nothing behind */
  CHECK_EQ(store__migrate(h, db, migs, 2, &err), PP_INPUT);
  CHECK_CONTAINS(err.msg, "schema version 3 is newer than this podplan's (2)");
  sqlite3_close(h);
  free(db);

  /* the real store refuses a file from a newer podplan, and foreign or broken files */
  char *newer = tu_path(dir, "newer.db");
  store *s = NULL;
  CHECK_EQ(store_open(newer, NULL, &s, &err), PP_OK);
  store_close(s);
  CHECK_EQ(sqlite3_open(newer, &h), SQLITE_OK);
  sqlite3_exec(h, "UPDATE schema_version SET version = 99", NULL, NULL, NULL);
  sqlite3_close(h);
  CHECK_EQ(store_open(newer, NULL, &s, &err), PP_INPUT);
  char newer_msg[96];
  snprintf(newer_msg, sizeof newer_msg, "schema version 99 is newer than this podplan's (%d)",
           STORE_SCHEMA_VERSION);
  CHECK_CONTAINS(err.msg, newer_msg);
  CHECK(s == NULL);

  char *foreign = tu_path(dir, "foreign.db");
  CHECK_EQ(sqlite3_open(foreign, &h), SQLITE_OK);
  sqlite3_exec(h, "CREATE TABLE other (a)", NULL, NULL, NULL);
  sqlite3_close(h);
  CHECK_EQ(store_open(foreign, NULL, &s, &err), PP_INPUT);
  CHECK_CONTAINS(err.msg, "not a podplan database");

  const char *text = "this is not a database, just text, longer than SQLite's 100-byte header so "
                     "that SQLite reads it and finds no magic string\n";
  char *junk = tu_write(dir, "junk.db", text, strlen(text));
  CHECK_EQ(store_open(junk, NULL, &s, &err), PP_INPUT);
  CHECK_CONTAINS(err.msg, "junk.db: not an SQLite database");

  store_opts ro = {.readonly = 1};
  char *missing = tu_path(dir, "missing.db");
  CHECK_EQ(store_open(missing, &ro, &s, &err), PP_IO);
  CHECK_CONTAINS(err.msg, "missing.db");
  CHECK(access(missing, F_OK) != 0);
  free(newer);
  free(foreign);
  free(junk);
  free(missing);
}

/* One process writes a long transaction; another reads the last committed state meanwhile,
 * cannot write (a clear "locked" error after its timeout), and sees everything once the
 * writer commits. */
static void concurrent(const char *dir) {
  char *db = tu_path(dir, "c.db");
  store *s = NULL;
  pp_err err = {0};
  CHECK_EQ(store_open(db, NULL, &s, &err), PP_OK);
  store_measurement m0 = meas("before", 0);
  CHECK_EQ(store_put_measurements(s, &m0, 1, NULL, &err), PP_OK);
  store_close(s);

  int up[2], down[2];
  CHECK_EQ(pipe(up), 0);
  CHECK_EQ(pipe(down), 0);
  pid_t pid = fork();
  if (pid == 0) {
    store *w = NULL;
    pp_err e = {0};
    if (store_open(db, NULL, &w, &e) || store_begin(w, &e)) _exit(3);
    store_measurement *rows = malloc(1000 * sizeof *rows);
    for (int i = 0; i < 1000; i++) rows[i] = meas("writer", i);
    if (store_put_measurements(w, rows, 1000, NULL, &e)) _exit(4);
    char ch = 'w';
    if (write(up[1], &ch, 1) != 1 || read(down[0], &ch, 1) != 1) _exit(5);
    if (store_commit(w, &e)) _exit(6);
    store_close(w);
    free(rows);
    _exit(0);
  }
  char ch;
  CHECK_EQ(read(up[0], &ch, 1), 1);
  /* the writer holds an open transaction with 1000 rows */
  store_opts quick = {.busy_timeout_ms = 200};
  CHECK_EQ(store_open(db, &quick, &s, &err), PP_OK);
  int64_t n = -1;
  CHECK_EQ(store_count(s, "measurements", &n, &err), PP_OK);
  CHECK_EQ(n, 1); /* the reader is not blocked and sees the committed state */
  store_measurement m1 = meas("reader", 0);
  CHECK_EQ(store_put_measurements(s, &m1, 1, NULL, &err), PP_BUSY);
  CHECK_CONTAINS(err.msg, "database is locked by another writer");
  CHECK_CONTAINS(err.msg, "c.db");
  CHECK_EQ(pp_exit_status(err.code), 1);
  ch = 'c';
  CHECK_EQ(write(down[1], &ch, 1), 1);
  int st = 0;
  waitpid(pid, &st, 0);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  CHECK_EQ(store_count(s, "measurements", &n, &err), PP_OK);
  CHECK_EQ(n, 1001);
  CHECK_EQ(store_put_measurements(s, &m1, 1, NULL, &err), PP_OK);
  store_close(s);
  close(up[0]);
  close(up[1]);
  close(down[0]);
  close(down[1]);
  free(db);
}

/* A writer killed in the middle of a transaction leaves the file consistent, with none of
 * its rows; the rerun writes them all once, and a second rerun adds nothing. */
static void killed(const char *dir) {
  char *db = tu_path(dir, "k.db");
  store *s = NULL;
  pp_err err = {0};
  CHECK_EQ(store_open(db, NULL, &s, &err), PP_OK);
  store_measurement m0 = meas("before", 0);
  CHECK_EQ(store_put_measurements(s, &m0, 1, NULL, &err), PP_OK);
  store_close(s);

  enum { ROWS = 20000 };
  store_measurement *rows = malloc(ROWS * sizeof *rows);
  for (int i = 0; i < ROWS; i++) rows[i] = meas("big-run", i);
  int up[2];
  CHECK_EQ(pipe(up), 0);
  pid_t pid = fork();
  if (pid == 0) {
    store *w = NULL;
    pp_err e = {0};
    if (store_open(db, NULL, &w, &e) || store_begin(w, &e)) _exit(3);
    if (store_put_measurements(w, rows, ROWS / 2, NULL, &e)) _exit(4);
    char ch = 'w';
    if (write(up[1], &ch, 1) != 1) _exit(5);
    for (;;) { /* keep writing inside the open transaction until killed */
      if (store_put_measurements(w, rows + ROWS / 2, ROWS / 2, NULL, &e)) _exit(6);
    }
  }
  char ch;
  CHECK_EQ(read(up[0], &ch, 1), 1);
  kill(pid, SIGKILL);
  int st = 0;
  waitpid(pid, &st, 0);
  CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
  close(up[0]);
  close(up[1]);

  char *ok = tu_sql_text(db, "PRAGMA integrity_check");
  CHECK_STREQ(ok, "ok");
  free(ok);
  CHECK_EQ(tu_sql_int(db, "SELECT count(*) FROM measurements"), 1);
  CHECK_EQ(store_open(db, NULL, &s, &err), PP_OK);
  size_t added = 0;
  CHECK_EQ(store_put_measurements(s, rows, ROWS, &added, &err), PP_OK);
  CHECK_EQ(added, ROWS);
  CHECK_EQ(store_put_measurements(s, rows, ROWS, &added, &err), PP_OK);
  CHECK_EQ(added, 0);
  store_close(s);
  CHECK_EQ(tu_sql_int(db, "SELECT count(*) FROM measurements"), ROWS + 1);
  ok = tu_sql_text(db, "PRAGMA integrity_check");
  CHECK_STREQ(ok, "ok");
  free(ok);
  free(rows);
  free(db);
}

/* store_save: a scored plan with its specs and measurements in one transaction; a second
 * save of the same adds no rows; a save whose last measurement breaks the schema's rule
 * (time_s > 0) leaves the file as it was, cluster, model, plan and score included. */
static void save(const char *dir) {
  char *db = tu_path(dir, "save.db");
  spec_model m;
  spec_cluster c;
  spec_plan p;
  pp_err err = {0};
  CHECK_EQ(spec_model_load("gpt3-1.3b", &m, &err), PP_OK);
  CHECK_EQ(spec_cluster_load("dgx-h100", 8, &c, &err), PP_OK);
  CHECK_EQ(spec_plan_parse("tp=2,pp=2,mbs=1,gbs=8", &p, &err), PP_OK);
  CHECK_EQ(spec_plan_resolve(&p, &m, &c, &err), PP_OK);
  store_score sc = {.source = STORE_SRC_COSTMODEL, .iter_time_s = 2, .tokens_per_s = 1,
                    .feasible = 1};
  store_measurement ms[3] = {meas("save", 0), meas("save", 1), meas("save", 2)};
  size_t added = 0;
  CHECK_EQ(store_save(db, &m, &c, &p, &sc, ms, 3, &added, &err), PP_OK);
  CHECK_EQ(added, 3);
  CHECK(sc.plan_id > 0 && sc.model_id > 0 && sc.cluster_id > 0);
  CHECK_EQ(tu_sql_int(db, "SELECT count(*) FROM measurements WHERE cluster_id IS NOT NULL"), 3);
  CHECK_EQ(store_save(db, &m, &c, &p, &sc, ms, 3, &added, &err), PP_OK);
  CHECK_EQ(added, 0);
  CHECK_EQ(tu_sql_int(db, "SELECT count(*) FROM scores"), 1);

  spec_cluster c2;
  CHECK_EQ(spec_cluster_load("dgx-a100", 8, &c2, &err), PP_OK);
  store_measurement bad[2] = {meas("bad", 0), meas("bad", 1)};
  bad[1].time_s = 0;
  CHECK(store_save(db, &m, &c2, &p, &sc, bad, 2, &added, &err) != PP_OK);
  CHECK(err.msg[0] != 0 && !strchr(err.msg, '\n'));
  CHECK_EQ(tu_sql_int(db, "SELECT count(*) FROM clusters"), 1);
  CHECK_EQ(tu_sql_int(db, "SELECT count(*) FROM scores"), 1);
  CHECK_EQ(tu_sql_int(db, "SELECT count(*) FROM measurements"), 3);
  spec_plan_clear(&p);
  free(db);
}

/* store_save_specs: models, clusters and a plan in one transaction, their ids, stored once;
 * store_import_measurements: batches tied to a cluster, new rows counted per batch, all or
 * nothing. */
static void save_specs_import(const char *dir) {
  char *db = tu_path(dir, "specs.db");
  spec_model m[2];
  spec_cluster c[1];
  spec_plan p;
  pp_err err = {0};
  CHECK_EQ(spec_model_load("gpt3-1.3b", &m[0], &err), PP_OK);
  CHECK_EQ(spec_model_load("llama3-8b", &m[1], &err), PP_OK);
  CHECK_EQ(spec_cluster_load("dgx-h100", 8, &c[0], &err), PP_OK);
  CHECK_EQ(spec_plan_parse("tp=2,pp=2,mbs=1,gbs=8", &p, &err), PP_OK);
  CHECK_EQ(spec_plan_resolve(&p, &m[0], &c[0], &err), PP_OK);
  int64_t mids[2] = {0, 0}, cid = 0, pid = 0, again[2] = {0, 0};
  CHECK_EQ(store_save_specs(db, m, 2, c, 1, &p, mids, &cid, &pid, &err), PP_OK);
  CHECK(mids[0] > 0 && mids[1] > 0 && mids[0] != mids[1] && cid > 0 && pid > 0);
  CHECK_EQ(store_save_specs(db, m, 2, NULL, 0, NULL, again, NULL, NULL, &err), PP_OK);
  CHECK_EQ(again[0], mids[0]);
  CHECK_EQ(again[1], mids[1]);
  CHECK_EQ(tu_sql_int(db, "SELECT count(*) FROM models"), 2);
  CHECK_EQ(tu_sql_int(db, "SELECT count(*) FROM plans"), 1);

  store_measurement a[2] = {meas("log-a", 0), meas("log-a", 1)}, b[1] = {meas("log-b", 0)};
  store_batch batches[2] = {{a, 2, 9}, {b, 1, 9}};
  CHECK_EQ(store_import_measurements(db, &c[0], batches, 2, &err), PP_OK);
  CHECK_EQ(batches[0].added, 2);
  CHECK_EQ(batches[1].added, 1);
  CHECK_EQ(a[0].cluster_id, cid);
  CHECK_EQ(tu_sql_int(db, "SELECT count(*) FROM measurements WHERE cluster_id IS NOT NULL"), 3);
  store_measurement c2[2] = {meas("log-c", 0), meas("log-c", 1)};
  batches[1] = (store_batch){c2, 2, 0};
  CHECK_EQ(store_import_measurements(db, NULL, batches, 2, &err), PP_OK);
  CHECK_EQ(batches[0].added, 0); /* already there */
  CHECK_EQ(batches[1].added, 2);
  CHECK_EQ(tu_sql_int(db, "SELECT count(*) FROM measurements WHERE cluster_id IS NULL"), 2);
  /* a bad row in the last batch: nothing of any batch is stored */
  store_measurement d[1] = {meas("log-d", 0)}, e[1] = {meas("log-e", 0)};
  e[0].time_s = 0;
  batches[0] = (store_batch){d, 1, 0}, batches[1] = (store_batch){e, 1, 0};
  CHECK(store_import_measurements(db, NULL, batches, 2, &err) != PP_OK);
  CHECK_EQ(tu_sql_int(db, "SELECT count(*) FROM measurements"), 5);
  spec_plan_clear(&p);
  free(db);
}

/* A file made by a podplan of schema version 1 (the first migration only) opens, migrates to
 * the current version and keeps its rows. */
static void migrate_v1(const char *dir) {
  char *db = tu_path(dir, "v1.db");
  sqlite3 *h;
  pp_err err = {0};
  CHECK_EQ(sqlite3_open(db, &h), SQLITE_OK);
  CHECK_EQ(store__migrate(h, db, store__migrations, 1, &err), PP_OK);
  CHECK_EQ(sqlite3_exec(h,
                        "INSERT INTO models (hash, name, params, json) VALUES ('h', 'm', 1, '{}');"
                        "INSERT INTO clusters (hash, name, gpus, gpu, json)"
                        " VALUES ('c', 'c', 8, 'g', '{}');"
                        "INSERT INTO search_runs (method, model_id, cluster_id, params_json,"
                        " status) VALUES ('exhaustive', 1, 1, '{}', 'done');"
                        "INSERT INTO plans (hash, text, uniform, json) VALUES ('p', 'tp=1', 1, '{}');"
                        "INSERT INTO scores (plan_id, model_id, cluster_id, source, iter_time_s,"
                        " feasible) VALUES (1, 1, 1, 'costmodel', 2.5, 1);",
                        NULL, NULL, NULL),
           SQLITE_OK);
  sqlite3_close(h);
  store *s = NULL;
  CHECK_EQ(store_open(db, NULL, &s, &err), PP_OK);
  int v = 0;
  CHECK_EQ(store_schema_version(s, &v, &err), PP_OK);
  CHECK_EQ(v, STORE_SCHEMA_VERSION);
  store_close(s);
  CHECK_EQ(tu_sql_int(db, "SELECT count(*) FROM search_runs WHERE params_key = '' AND units = 0"),
           1);
  CHECK_EQ(tu_sql_int(db, "SELECT count(*) FROM search_checkpoints"), 0);
  CHECK_EQ(tu_sql_int(db, "SELECT count(*) FROM scores WHERE params = '' AND iter_time_s = 2.5"),
           1);
  free(db);
}

static int plan_of(const char *text, const spec_model *m, const spec_cluster *c, spec_plan *p) {
  pp_err err = {0};
  if (spec_plan_parse(text, p, &err)) return 1;
  return spec_plan_resolve(p, m, c, &err);
}

/* Search runs on a real file: a run begins, three units are checkpointed (one cut short by a
 * time limit), the file is closed; the same key resumes the same run with the two complete
 * units, their summed counts, the smallest bound and their plans fastest first, each once; a
 * checkpoint whose last plan cannot be stored leaves nothing; storing a unit again adds no
 * rows; the end of the run records its totals and best plan; the same key then starts a new
 * run; simulator scores are stored once per plan and run. */
static void search_runs(const char *dir) {
  char *db = tu_path(dir, "search.db");
  spec_model m;
  spec_cluster c;
  pp_err err = {0};
  CHECK_EQ(spec_model_load("gpt3-1.3b", &m, &err), PP_OK);
  CHECK_EQ(spec_cluster_load("dgx-h100", 8, &c, &err), PP_OK);
  spec_plan p[4];
  const char *texts[4] = {"tp=2,pp=2,mbs=1,gbs=8", "tp=1,pp=2,mbs=1,gbs=8",
                          "tp=4,pp=1,mbs=2,gbs=8", "tp=8,pp=1,mbs=1,gbs=8"};
  for (int i = 0; i < 4; i++) CHECK_EQ(plan_of(texts[i], &m, &c, &p[i]), 0);
  const char *key = "gbs=8,top=2";
  store *s = NULL;
  store_search_state st;
  CHECK_EQ(store_open(db, NULL, &s, &err), PP_OK);
  CHECK_EQ(store_search_begin(s, "exhaustive", &m, &c, key, "{\"threads\":2}", 4, &st, &err),
           PP_OK);
  CHECK_EQ(st.resumed, 0);
  CHECK(st.run_id > 0 && st.model_id > 0 && st.cluster_id > 0);
  CHECK_EQ(st.units, 4);
  CHECK_EQ(st.nunits_done, 0);
  CHECK_EQ(st.nplans, 0);
  int64_t run = st.run_id;
  store_search_state_clear(&st);

  store_scored_plan u0[2] = {{&p[0], {.iter_time_s = 2.0, .mfu = 0.5, .feasible = 1}},
                             {&p[1], {.iter_time_s = 3.0, .mfu = 0.4, .feasible = 1}}};
  store_scored_plan u2[1] = {{&p[2], {.iter_time_s = 1.5, .mfu = 0.6, .feasible = 1}}};
  store_scored_plan u3[1] = {{&p[3], {.iter_time_s = 1.0, .mfu = 0.7, .feasible = 1}}};
  store_search_unit r0 = {0, 100, 40, 5, 1.8, 1, u0, 2};
  store_search_unit r2 = {2, 50, 20, 0, 1.2, 1, u2, 1};
  store_search_unit r3 = {3, 7, 1, 0, 0, 0, u3, 1}; /* cut short */
  CHECK_EQ(store_search_unit_done(s, run, &r0, &err), PP_OK);
  CHECK_EQ(store_search_unit_done(s, run, &r2, &err), PP_OK);
  CHECK_EQ(store_search_unit_done(s, run, &r3, &err), PP_OK);
  store_close(s);
  CHECK_EQ(tu_sql_int(db, "SELECT evaluations FROM search_runs"), 157);
  CHECK_EQ(tu_sql_int(db, "SELECT units_done FROM search_runs"), 2);
  CHECK_EQ(tu_sql_int(db, "SELECT count(*) FROM search_checkpoints"), 3);
  CHECK_EQ(tu_sql_int(db, "SELECT count(*) FROM scores WHERE search_run_id = 1"
                          " AND source = 'costmodel'"),
           4);

  /* resume: same key, same units */
  CHECK_EQ(store_open(db, NULL, &s, &err), PP_OK);
  CHECK_EQ(store_search_begin(s, "exhaustive", &m, &c, key, NULL, 4, &st, &err), PP_OK);
  CHECK_EQ(st.resumed, 1);
  CHECK_EQ(st.run_id, run);
  CHECK_EQ(st.nunits_done, 2);
  CHECK(st.units_done[0] && !st.units_done[1] && st.units_done[2] && !st.units_done[3]);
  CHECK_EQ(st.evaluations, 150);
  CHECK_EQ(st.feasible, 60);
  CHECK_EQ(st.pruned, 5);
  CHECK_NEAR(st.bound_s, 1.2, 1e-12);
  CHECK_EQ(st.nplans, 3);
  if (st.nplans == 3) {
    CHECK_NEAR(st.plans[0].iter_time_s, 1.5, 1e-12);
    CHECK_EQ(st.plans[0].unit, 2);
    CHECK_NEAR(st.plans[1].iter_time_s, 2.0, 1e-12);
    CHECK_EQ(st.plans[1].unit, 0);
    CHECK_NEAR(st.plans[2].mfu, 0.4, 1e-12);
    char *a = spec_plan_json(&st.plans[0].plan), *b = spec_plan_json(&p[2]);
    CHECK_STREQ(a, b);
    free(a);
    free(b);
  }
  store_search_state_clear(&st);
  /* another key, or another unit count, is another run */
  CHECK_EQ(store_search_begin(s, "exhaustive", &m, &c, "gbs=8,top=3", NULL, 4, &st, &err), PP_OK);
  CHECK_EQ(st.resumed, 0);
  CHECK(st.run_id != run);
  store_search_state_clear(&st);
  CHECK_EQ(store_search_begin(s, "exhaustive", &m, &c, key, NULL, 5, &st, &err), PP_OK);
  CHECK_EQ(st.resumed, 0);
  store_search_state_clear(&st);
  CHECK_EQ(tu_sql_int(db, "SELECT count(*) FROM search_runs"), 3);

  /* a checkpoint that fails on its last plan (unresolved: dp unknown) leaves nothing */
  int64_t plans0 = tu_sql_int(db, "SELECT count(*) FROM plans");
  int64_t scores0 = tu_sql_int(db, "SELECT count(*) FROM scores");
  spec_plan bad;
  CHECK_EQ(spec_plan_parse("tp=2,pp=1,mbs=4,gbs=8", &bad, &err), PP_OK);
  spec_plan fresh;
  CHECK_EQ(plan_of("tp=2,pp=1,mbs=1,gbs=8", &m, &c, &fresh), 0);
  store_scored_plan u1[2] = {{&fresh, {.iter_time_s = 0.9, .feasible = 1}},
                             {&bad, {.iter_time_s = 0.8, .feasible = 1}}};
  store_search_unit r1 = {1, 10, 2, 0, 0, 1, u1, 2};
  CHECK(store_search_unit_done(s, run, &r1, &err) != PP_OK);
  CHECK(err.msg[0] != 0);
  CHECK_EQ(tu_sql_int(db, "SELECT count(*) FROM plans"), plans0);
  CHECK_EQ(tu_sql_int(db, "SELECT count(*) FROM scores"), scores0);
  CHECK_EQ(tu_sql_int(db, "SELECT count(*) FROM search_checkpoints WHERE unit = 1"), 0);
  CHECK_EQ(tu_sql_int(db, "SELECT evaluations FROM search_runs WHERE id = 1"), 157);
  /* a unit stored again: no new rows; the cut-short unit redone replaces its checkpoint */
  CHECK_EQ(store_search_unit_done(s, run, &r0, &err), PP_OK);
  r3.complete = 1;
  r3.evaluations = 30;
  CHECK_EQ(store_search_unit_done(s, run, &r3, &err), PP_OK);
  CHECK_EQ(tu_sql_int(db, "SELECT count(*) FROM plans"), plans0);
  CHECK_EQ(tu_sql_int(db, "SELECT count(*) FROM scores"), scores0);
  CHECK_EQ(tu_sql_int(db, "SELECT count(*) FROM search_checkpoints"), 3);
  CHECK_EQ(tu_sql_int(db, "SELECT count(*) FROM search_checkpoint_plans"), 4);
  CHECK_EQ(tu_sql_int(db, "SELECT evaluations FROM search_runs WHERE id = 1"), 180);
  CHECK_EQ(store_search_unit_done(s, 999, &r0, &err), PP_NOTFOUND);

  /* the end of the run */
  store_scored_plan all[3] = {u3[0], u2[0], u0[0]};
  store_search_summary sum = {.evaluations = 190, .feasible = 70, .pruned = 5, .units_done = 4,
                              .complete = 1, .space_size = 200, .wall_s = 0.5,
                              .top = all, .ntop = 3};
  int64_t best = 0;
  CHECK_EQ(store_search_finish(s, run, &sum, &best, &err), PP_OK);
  CHECK(best > 0);
  char sql[160];
  snprintf(sql, sizeof sql, "SELECT best_plan_id = %lld AND status = 'done' AND plans_found = 70"
           " AND best_iter_time_s = 1.0 AND lower_bound_s IS NULL FROM search_runs WHERE id = 1",
           (long long)best);
  CHECK_EQ(tu_sql_int(db, sql), 1);
  CHECK_EQ(tu_sql_int(db, "SELECT count(*) FROM scores"), scores0);
  /* simulator scores: once per plan and run */
  store_scored_plan sim = {&p[3], {.iter_time_s = 1.1, .mfu = 0.65, .feasible = 1}};
  int64_t sim_plan = 0;
  CHECK_EQ(store_search_sim_score(s, run, &sim, &sim_plan, &err), PP_OK);
  CHECK_EQ(sim_plan, best);
  sim.score.iter_time_s = 1.2;
  CHECK_EQ(store_search_sim_score(s, run, &sim, NULL, &err), PP_OK);
  CHECK_EQ(tu_sql_int(db, "SELECT count(*) FROM scores WHERE source = 'sim' AND search_run_id = 1"),
           1);
  /* a run cut short by a time limit is continued; one that searched everything is not:
   * the same key then starts a new run */
  sum.complete = 0;
  CHECK_EQ(store_search_finish(s, run, &sum, &best, &err), PP_OK);
  CHECK_EQ(store_search_begin(s, "exhaustive", &m, &c, key, NULL, 4, &st, &err), PP_OK);
  CHECK_EQ(st.resumed, 1);
  CHECK_EQ(st.run_id, run);
  CHECK_EQ(st.nunits_done, 3); /* units 0, 2, 3 */
  store_search_state_clear(&st);
  CHECK_EQ(tu_sql_int(db, "SELECT status = 'running' AND complete IS NULL FROM search_runs"
                          " WHERE id = 1"),
           1);
  sum.complete = 1;
  CHECK_EQ(store_search_finish(s, run, &sum, &best, &err), PP_OK);
  CHECK_EQ(store_search_begin(s, "exhaustive", &m, &c, key, NULL, 4, &st, &err), PP_OK);
  CHECK_EQ(st.resumed, 0);
  CHECK(st.run_id != run);
  CHECK_EQ(store_search_fail(s, st.run_id, &err), PP_OK);
  int64_t failed = st.run_id;
  store_search_state_clear(&st);
  /* ... and a failed one is */
  CHECK_EQ(store_search_begin(s, "exhaustive", &m, &c, key, NULL, 4, &st, &err), PP_OK);
  CHECK_EQ(st.resumed, 1);
  CHECK_EQ(st.run_id, failed);
  store_search_state_clear(&st);
  store_close(s);
  char *ok = tu_sql_text(db, "PRAGMA foreign_key_check");
  CHECK(ok == NULL); /* no row: no dangling reference */
  free(ok);
  for (int i = 0; i < 4; i++) spec_plan_clear(&p[i]);
  spec_plan_clear(&bad);
  spec_plan_clear(&fresh);
  free(db);
}

static void study_cases(const char *dir) {
  char *db = tu_path(dir, "cases.db");
  store *s = NULL;
  pp_err err = {0};
  spec_model m;
  spec_cluster c;
  CHECK_EQ(spec_model_load("gpt3-1.3b", &m, &err), PP_OK);
  CHECK_EQ(spec_cluster_load("dgx-a100", 16, &c, &err), PP_OK);
  CHECK_EQ(store_open(db, NULL, &s, &err), PP_OK);
  char *json = NULL;
  double wall = 0;
  CHECK_EQ(store_get_study_case(s, "pillar", "k1", &json, &wall, &err), PP_NOTFOUND);
  CHECK_CONTAINS(err.msg, "no pillar case 'k1'");
  store_study_case k = {"pillar", "k1", &m, &c, 0, "{\"best_s\":1.5}", 2.0};
  int64_t id = 0, id2 = 0;
  CHECK_EQ(store_put_study_case(s, &k, &id, &err), PP_OK);
  CHECK_EQ(store_get_study_case(s, "pillar", "k1", &json, &wall, &err), PP_OK);
  CHECK_STREQ(json, "{\"best_s\":1.5}");
  CHECK_NEAR(wall, 2.0, 1e-12);
  free(json);
  k.result_json = "{\"best_s\":1.25}";
  CHECK_EQ(store_put_study_case(s, &k, &id2, &err), PP_OK);
  CHECK_EQ(id2, id); /* replaced, not added */
  CHECK_EQ(store_get_study_case(s, "pillar", "k1", &json, NULL, &err), PP_OK);
  CHECK_STREQ(json, "{\"best_s\":1.25}");
  free(json);
  CHECK_EQ(store_get_study_case(s, "capacity", "k1", &json, NULL, &err), PP_NOTFOUND);
  store_close(s);
  CHECK_EQ(tu_sql_int(db, "SELECT count(*) FROM study_cases"), 1);
  CHECK_EQ(tu_sql_int(db, "SELECT count(*) FROM models"), 1);
  /* read-only: the write fails with a message naming the file and nothing is added */
  store_opts ro = {.readonly = 1};
  CHECK_EQ(store_open(db, &ro, &s, &err), PP_OK);
  k.case_key = "k2";
  CHECK(store_put_study_case(s, &k, NULL, &err) != PP_OK);
  CHECK_CONTAINS(err.msg, "cases.db");
  store_close(s);
  CHECK_EQ(tu_sql_int(db, "SELECT count(*) FROM study_cases"), 1);
  free(db);
}

int main(void) {
  char *dir = tu_tmpdir("store");
  CHECK(dir != NULL);
  create_reopen(dir);
  migrations(dir);
  concurrent(dir);
  killed(dir);
  save(dir);
  save_specs_import(dir);
  migrate_v1(dir);
  search_runs(dir);
  study_cases(dir);
  tu_rmtree(dir);
  free(dir);
  return check_status();
}
