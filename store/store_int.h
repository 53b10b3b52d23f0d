/* Internals of store/: the handle, the migration list and the migration runner (exposed so a
 * test can drive it with its own list). */
#ifndef PODPLAN_STORE_INT_H
#define PODPLAN_STORE_INT_H

#include <sqlite3.h>

#include "podplan/store.h"

struct store {
  sqlite3 *db;
  char *path;
  int in_tx; /* 1 inside store_begin .. store_commit/rollback */
};

/* migrations[v] takes a database from schema version v to v + 1. */
extern const char *const store__migrations[];
extern const int store__nmigrations;

/* Brings db from its recorded version up to n by running migs[version..n-1], each step in its
 * own transaction together with the version bump. Fails, changing nothing, when the file
 * records a version above n. */
int store__migrate(sqlite3 *db, const char *path, const char *const *migs, int n, pp_err *err);
/* The version recorded in db (0 for a database without the schema_version table). */
int store__version(sqlite3 *db, const char *path, int *version, pp_err *err);
/* Converts an SQLite failure into a pp_err naming the file and what was being done. */
int store__fail(sqlite3 *db, const char *path, const char *what, int rc, pp_err *err);
int store__exec(sqlite3 *db, const char *path, const char *sql, const char *what, pp_err *err);
/* Prepares sql on the store's database; PP_DB (naming the file) when it cannot. */
int store__prepare(store *s, const char *sql, sqlite3_stmt **st, pp_err *err);

#endif
