/* Helpers for tests that drive the real podplan binary and real files. */
#ifndef PODPLAN_TESTUTIL_H
#define PODPLAN_TESTUTIL_H

#include <stddef.h>

/* The result of running a program: its exit status (or 128 + signal) and its output. */
typedef struct tu_run {
  int status;
  char *out; /* stdout, NUL-terminated, malloc'd */
  char *err; /* stderr, NUL-terminated, malloc'd */
} tu_run;

/* Runs argv (argv[0] a path, NULL-terminated) with stdin from /dev/null; fills r. */
int tu_exec(char *const argv[], tu_run *r);
void tu_run_free(tu_run *r);
/* A fresh empty directory under $TMPDIR (or /tmp), removed by tu_rmtree. */
char *tu_tmpdir(const char *tag);
void tu_rmtree(const char *dir);
/* Writes len bytes to dir/name; returns the malloc'd path. */
char *tu_write(const char *dir, const char *name, const void *data, size_t len);
/* Joins dir and name into a malloc'd path. */
char *tu_path(const char *dir, const char *name);
/* Counts lines in s (a last line without '\n' counts). */
int tu_lines(const char *s);
/* Reads a whole file, NUL-terminated; NULL when it cannot. */
char *tu_read(const char *path, size_t *len);

/* The first column of the first row of `sql` on the SQLite file `db` (opened read-only), as
 * an integer (-1 when it fails; LLONG_MIN, said on stderr, when the value is not an integer:
 * a real is never cut to its integer part), as a double (NAN when it fails) or as malloc'd
 * text (NULL when it fails). */
long long tu_sql_int(const char *db, const char *sql);
double tu_sql_real(const char *db, const char *sql);
char *tu_sql_text(const char *db, const char *sql);

/* Killing a run at a chosen point. tu_spawn starts argv (argv[0] a path, NULL-terminated) in
 * the background with stdin, stdout and stderr on /dev/null: its pid, or -1 when it cannot.
 * tu_kill_when polls `sql` on db (an integer, as tu_sql_int) every 2 ms until it is at least
 * at_least, then kills pid with SIGKILL and reaps it: 1 when it was killed running, 0 when it
 * ended first (the condition never held while it ran), -1 when timeout_s passed first (it is
 * killed all the same). */
int tu_spawn(char *const argv[]);
int tu_kill_when(int pid, const char *db, const char *sql, long long at_least,
                 double timeout_s);

/* A study killed mid-way (test_pillar, test_capacity). tu_study_kill runs the study argv, whose
 * argv[db_at] it sets to a fresh store dir/killedN.db, N = 0, 1, 2, and SIGKILLs it once a
 * case is stored and a search run is partway (a checkpoint committed, the run not done), so
 * that a rerun also resumes a search run. A try counts when the kill landed mid-way: the study
 * was running, 1 <= cases stored < total, one search run left running and as many done as
 * cases stored (a kill between a search's end and its case's row leaves a run that a rerun
 * cannot resume: it would search that case again as a new run). Returns the store of the
 * first try that counted (malloc'd; *stored: its cases), or NULL after three; on stderr, why a
 * try did not count, and where the one that did left the running search run. */
char *tu_study_kill(char **argv, int db_at, const char *dir, long long total, long long *stored);
/* The tables of a store whose row counts differ between ref and db (each said on stderr). */
int tu_tables_differ(const char *ref, const char *db);
/* The cases of `study` in db as one text, a line per case in key order: its key and its
 * result without the wall time (the one field that differs from run to run). */
char *tu_study_rows(const char *db, const char *study);

#endif
