/* Opening, migrating and transactions of the store. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_int.h"

/* What the file system call SQLite reports in an extended I/O error code was doing. */
static const struct {
  int code;
  const char *doing;
} ioerr_doing[] = {
    {SQLITE_IOERR_READ, "reading"},
    {SQLITE_IOERR_SHORT_READ, "reading"},
    {SQLITE_IOERR_WRITE, "writing"},
    {SQLITE_IOERR_FSYNC, "syncing"},
    {SQLITE_IOERR_DIR_FSYNC, "syncing its folder"},
    {SQLITE_IOERR_TRUNCATE, "truncating"},
    {SQLITE_IOERR_FSTAT, "reading its size"},
    {SQLITE_IOERR_DELETE, "deleting a journal"},
    {SQLITE_IOERR_ACCESS, "checking a journal"},
    {SQLITE_IOERR_LOCK, "locking"},
    {SQLITE_IOERR_RDLOCK, "locking"},
    {SQLITE_IOERR_UNLOCK, "unlocking"},
    {SQLITE_IOERR_CHECKRESERVEDLOCK, "locking"},
    {SQLITE_IOERR_SHMOPEN, "opening its -shm file"},
    {SQLITE_IOERR_SHMSIZE, "growing its -shm file"},
    {SQLITE_IOERR_SHMMAP, "mapping its -shm file"},
    {SQLITE_IOERR_MMAP, "mapping it"},
};

/* SQLite's message, and for an I/O error what failed and the system's reason where SQLite
 * recorded one ("disk I/O error (growing its -shm file: File too large)"). */
static void db_reason(sqlite3 *db, int rc, char *buf, size_t n) {
  const char *msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  const char *doing = NULL;
  int sys = 0;
  if (db && (sqlite3_extended_errcode(db) & 0xff) == (rc & 0xff))
    rc = sqlite3_extended_errcode(db); /* sqlite3_open_v2 returns the primary code */
  if ((rc & 0xff) == SQLITE_IOERR) {
    for (size_t i = 0; i < sizeof ioerr_doing / sizeof ioerr_doing[0]; i++)
      if (ioerr_doing[i].code == rc) doing = ioerr_doing[i].doing;
    sys = db ? sqlite3_system_errno(db) : 0;
  }
  if (doing && sys > 0)
    snprintf(buf, n, "%s (%s: %s)", msg, doing, strerror(sys));
  else if (doing || sys > 0)
    snprintf(buf, n, "%s (%s)", msg, doing ? doing : strerror(sys));
  else
    snprintf(buf, n, "%s", msg);
}

int store__fail(sqlite3 *db, const char *path, const char *what, int rc, pp_err *err) {
  int prim = rc & 0xff;
  char msg[512];
  db_reason(db, rc, msg, sizeof msg);
  if (prim == SQLITE_BUSY || prim == SQLITE_LOCKED)
    return pp_err_set(err, PP_BUSY, "%s: %s: database is locked by another writer (%s)", path,
                      what, msg);
  if (prim == SQLITE_NOTADB)
    return pp_err_set(err, PP_INPUT, "%s: not an SQLite database", path);
  if (prim == SQLITE_CANTOPEN || prim == SQLITE_READONLY || prim == SQLITE_IOERR ||
      prim == SQLITE_FULL || prim == SQLITE_PERM)
    return pp_err_set(err, PP_IO, "%s: %s: %s", path, what, msg);
  if (prim == SQLITE_NOMEM) return pp_err_set(err, PP_NOMEM, "%s: %s: out of memory", path, what);
  return pp_err_set(err, PP_DB, "%s: %s: %s", path, what, msg);
}

int store__exec(sqlite3 *db, const char *path, const char *sql, const char *what, pp_err *err) {
  char *emsg = NULL;
  int rc = sqlite3_exec(db, sql, NULL, NULL, &emsg);
  sqlite3_free(emsg);
  if (rc != SQLITE_OK) return store__fail(db, path, what, rc, err);
  return PP_OK;
}

int store__version(sqlite3 *db, const char *path, int *version, pp_err *err) {
  sqlite3_stmt *st = NULL;
  int rc = sqlite3_prepare_v2(
      db, "SELECT count(*), sum(name = 'schema_version') FROM sqlite_master WHERE type = 'table'",
      -1, &st, NULL);
  if (rc != SQLITE_OK) return store__fail(db, path, "reading the schema", rc, err);
  rc = sqlite3_step(st);
  if (rc != SQLITE_ROW) {
    sqlite3_finalize(st);
    return store__fail(db, path, "reading the schema", rc, err);
  }
  int tables = sqlite3_column_int(st, 0), has = sqlite3_column_int(st, 1);
  sqlite3_finalize(st);
  if (!has) {
    if (tables > 0)
      return pp_err_set(err, PP_INPUT, "%s: not a podplan database (no schema_version table)",
                        path);
    *version = 0;
    return PP_OK;
  }
  rc = sqlite3_prepare_v2(db, "SELECT max(version) FROM schema_version", -1, &st, NULL);
  if (rc != SQLITE_OK) return store__fail(db, path, "reading schema_version", rc, err);
  rc = sqlite3_step(st);
  *version = rc == SQLITE_ROW ? sqlite3_column_int(st, 0) : 0;
  sqlite3_finalize(st);
  if (rc != SQLITE_ROW) return store__fail(db, path, "reading schema_version", rc, err);
  return PP_OK;
}

int store__migrate(sqlite3 *db, const char *path, const char *const *migs, int n, pp_err *err) {
  int v;
  if (store__version(db, path, &v, err)) return err->code;
  if (v > n)
    return pp_err_set(err, PP_INPUT,
                      "%s: schema version %d is newer than this podplan's (%d); use a newer podplan",
                      path, v, n);
  while (v < n) {
    if (store__exec(db, path, "BEGIN IMMEDIATE", "migrating the schema", err)) return err->code;
    /* another process may have migrated while we waited for the lock */
    if (store__version(db, path, &v, err)) goto fail;
    if (v >= n) {
      store__exec(db, path, "COMMIT", "migrating the schema", err);
      break;
    }
    if (store__exec(db, path, migs[v], "migrating the schema", err)) {
      pp_err_prefix(err, "migration to schema version %d", v + 1);
      goto fail;
    }
    char sql[96];
    snprintf(sql, sizeof sql, "UPDATE schema_version SET version = %d", v + 1);
    if (store__exec(db, path, sql, "migrating the schema", err) ||
        store__exec(db, path, "COMMIT", "migrating the schema", err)) goto fail;
    v++;
  }
  return PP_OK;
fail:
  sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
  return err->code;
}

int store_open(const char *path, const store_opts *opts, store **out, pp_err *err) {
  store_opts o = {0};
  if (opts) o = *opts;
  if (!o.busy_timeout_ms) o.busy_timeout_ms = 5000;
  *out = NULL;
  store *s = calloc(1, sizeof *s);
  if (!s || !(s->path = strdup(path))) {
    free(s);
    return pp_err_set(err, PP_NOMEM, "%s: out of memory", path);
  }
  int flags = o.readonly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
  int rc = sqlite3_open_v2(path, &s->db, flags | SQLITE_OPEN_NOMUTEX, NULL);
  if (rc != SQLITE_OK) {
    store__fail(s->db, path, "cannot open", rc, err);
    goto fail;
  }
  sqlite3_extended_result_codes(s->db, 1);
  sqlite3_busy_timeout(s->db, o.busy_timeout_ms);
  if (store__exec(s->db, path, "PRAGMA foreign_keys = ON", "opening", err)) goto fail;
  if (!o.readonly) {
    if (store__exec(s->db, path, "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL",
                    "opening", err))
      goto fail;
    if (store__migrate(s->db, path, store__migrations, store__nmigrations, err)) goto fail;
  } else {
    int v;
    if (store__version(s->db, path, &v, err)) goto fail;
    if (v != STORE_SCHEMA_VERSION && !(o.older_ok && v < STORE_SCHEMA_VERSION)) {
      pp_err_set(err, PP_INPUT, "%s: schema version %d, this podplan reads %d (open it read-write "
                 "to migrate)", path, v, STORE_SCHEMA_VERSION);
      goto fail;
    }
  }
  *out = s;
  return PP_OK;
fail:
  store_close(s);
  return err->code;
}

void store_close(store *s) {
  if (!s) return;
  if (s->in_tx) sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
  sqlite3_close_v2(s->db);
  free(s->path);
  free(s);
}

const char *store_path(const store *s) { return s->path; }

int store_schema_version(store *s, int *version, pp_err *err) {
  return store__version(s->db, s->path, version, err);
}

int store_begin(store *s, pp_err *err) {
  if (s->in_tx) return pp_err_set(err, PP_INTERNAL, "%s: transaction already open", s->path);
  if (store__exec(s->db, s->path, "BEGIN IMMEDIATE", "starting a write", err)) return err->code;
  s->in_tx = 1;
  return PP_OK;
}

int store_commit(store *s, pp_err *err) {
  if (!s->in_tx) return pp_err_set(err, PP_INTERNAL, "%s: no transaction to commit", s->path);
  if (store__exec(s->db, s->path, "COMMIT", "committing", err)) {
    store_rollback(s);
    return err->code;
  }
  s->in_tx = 0;
  return PP_OK;
}

void store_rollback(store *s) {
  if (!s || !s->in_tx) return;
  sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
  s->in_tx = 0;
}

int store_count(store *s, const char *table, int64_t *n, pp_err *err) {
  static const char *const tables[] = {"models",       "clusters",
                                       "plans",        "calibrations",
                                       "search_runs",  "search_checkpoints",
                                       "search_checkpoint_plans", "scores",
                                       "measurements", NULL};
  int known = 0;
  for (int i = 0; tables[i]; i++) known |= strcmp(tables[i], table) == 0;
  if (!known) return pp_err_set(err, PP_INPUT, "%s: no table '%.40s'", s->path, table);
  char sql[80];
  snprintf(sql, sizeof sql, "SELECT count(*) FROM %s", table);
  sqlite3_stmt *st = NULL;
  int rc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);
  if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
    *n = sqlite3_column_int64(st, 0);
    rc = SQLITE_OK;
  }
  sqlite3_finalize(st);
  return rc == SQLITE_OK ? PP_OK : store__fail(s->db, s->path, "counting rows", rc, err);
}
