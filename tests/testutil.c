/* Helpers for tests that drive the real podplan binary and real files. */
#include "testutil.h"

#include <dirent.h>
#include <sqlite3.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

char *tu_read(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap);
  size_t k;
  while (buf && (k = fread(buf + n, 1, cap - n - 1, f)) > 0) {
    n += k;
    if (cap - n - 1 == 0) {
      char *nb = realloc(buf, cap *= 2);
      if (!nb) {
        free(buf);
        buf = NULL;
      } else {
        buf = nb;
      }
    }
  }
  fclose(f);
  if (buf) buf[n] = '\0';
  if (len) *len = n;
  return buf;
}

int tu_exec(char *const argv[], tu_run *r) {
  char outp[] = "/tmp/podplan-test-outXXXXXX", errp[] = "/tmp/podplan-test-errXXXXXX";
  int fo = mkstemp(outp), fe = mkstemp(errp);
  memset(r, 0, sizeof *r);
  if (fo < 0 || fe < 0) return -1;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, fo, 1);
  posix_spawn_file_actions_adddup2(&fa, fe, 2);
  pid_t pid;
  int rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc == 0) {
    int st;
    waitpid(pid, &st, 0);
    r->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  } else {
    r->status = -1;
  }
  close(fo);
  close(fe);
  r->out = tu_read(outp, NULL);
  r->err = tu_read(errp, NULL);
  unlink(outp);
  unlink(errp);
  return rc == 0 ? 0 : -1;
}

void tu_run_free(tu_run *r) {
  free(r->out);
  free(r->err);
  r->out = r->err = NULL;
}

char *tu_tmpdir(const char *tag) {
  const char *base = getenv("TMPDIR");
  char *p = malloc(4096);
  snprintf(p, 4096, "%s/podplan-%s-XXXXXX", base && *base ? base : "/tmp", tag);
  if (!mkdtemp(p)) {
    free(p);
    return NULL;
  }
  return p;
}

void tu_rmtree(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    char *p = tu_path(dir, e->d_name);
    struct stat st;
    if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode))
      tu_rmtree(p);
    else
      unlink(p);
    free(p);
  }
  closedir(d);
  rmdir(dir);
}

char *tu_path(const char *dir, const char *name) {
  size_t n = strlen(dir) + strlen(name) + 2;
  char *p = malloc(n);
  snprintf(p, n, "%s/%s", dir, name);
  return p;
}

char *tu_write(const char *dir, const char *name, const void *data, size_t len) {
  char *p = tu_path(dir, name);
  FILE *f = fopen(p, "wb");
  if (!f) {
    free(p);
    return NULL;
  }
  fwrite(data, 1, len, f);
  fclose(f);
  return p;
}

int tu_lines(const char *s) {
  int n = 0;
  if (!s || !*s) return 0;
  for (; *s; s++) n += *s == '\n';
  return s[-1] == '\n' ? n : n + 1;
}

long long tu_sql_int(const char *db, const char *sql) {
  char *t = tu_sql_text(db, sql), *end = NULL;
  long long n = t ? strtoll(t, &end, 10) : -1;
  if (t && (end == t || *end)) { /* a real or text value is not read as its integer part */
    fprintf(stderr, "tu_sql_int: %s: \"%s\" is not an integer\n", sql, t);
    n = LLONG_MIN;
  }
  free(t);
  return n;
}

double tu_sql_real(const char *db, const char *sql) {
  char *t = tu_sql_text(db, sql), *end = NULL;
  double x = t ? strtod(t, &end) : NAN;
  if (t && (end == t || *end)) {
    fprintf(stderr, "tu_sql_real: %s: \"%s\" is not a number\n", sql, t);
    x = NAN;
  }
  free(t);
  return x;
}

char *tu_sql_text(const char *db, const char *sql) {
  sqlite3 *h = NULL;
  char *out = NULL;
  if (sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK) {
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(h, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW &&
        sqlite3_column_text(st, 0))
      out = strdup((const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
  }
  sqlite3_close(h);
  return out;
}

int tu_spawn(char *const argv[]) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid;
  int rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  return rc == 0 ? (int)pid : -1;
}

int tu_kill_when(int pid, const char *db, const char *sql, long long at_least,
                 double timeout_s) {
  if (pid <= 0) return 0;
  struct timespec nap = {0, 2000000}; /* 2 ms */
  int st = 0, ended = 0, held = 0;
  for (long i = 0; i < (long)(timeout_s / 0.002) && !held; i++) {
    if (waitpid(pid, &st, WNOHANG) == pid) {
      ended = 1;
      break;
    }
    nanosleep(&nap, NULL);
    held = tu_sql_int(db, sql) >= at_least;
  }
  if (ended) return 0;
  kill(pid, SIGKILL);
  waitpid(pid, &st, 0);
  if (!(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL)) return 0; /* it ended before the kill */
  return held ? 1 : -1;
}

/* What a killed study left: 1 when the kill (k, from tu_kill_when) landed mid-way. */
static int mid_way(int k, const char *db, long long total, long long *stored) {
  *stored = tu_sql_int(db, "SELECT count(*) FROM study_cases");
  long long done = tu_sql_int(db, "SELECT count(*) FROM search_runs WHERE status = 'done'"),
            running = tu_sql_int(db, "SELECT count(*) FROM search_runs WHERE status = 'running'");
  int mid = k == 1 && *stored >= 1 && *stored < total && done == *stored && running == 1;
  if (!mid)
    fprintf(stderr, "%s: no mid-run kill (killed: %d, %lld of %lld cases stored, %lld runs done, "
            "%lld running)\n", db, k, *stored, total, done, running);
  return mid;
}

char *tu_study_kill(char **argv, int db_at, const char *dir, long long total, long long *stored) {
  static const char kill_at[] =
      "SELECT (SELECT count(*) FROM study_cases) >= 1 AND EXISTS (SELECT 1 FROM search_runs r "
      "JOIN search_checkpoints c ON c.search_run_id = r.id WHERE r.status = 'running')";
  for (int i = 0; i < 3; i++) {
    char name[32];
    snprintf(name, sizeof name, "killed%d.db", i);
    char *db = tu_path(dir, name);
    argv[db_at] = db;
    int k = tu_kill_when(tu_spawn(argv), db, kill_at, 1, 600);
    if (mid_way(k, db, total, stored)) {
      fprintf(stderr, "killed with %lld of %lld cases stored, the running search run at %lld "
              "of %lld units\n", *stored, total,
              tu_sql_int(db, "SELECT count(*) FROM search_checkpoints c JOIN search_runs r ON "
                             "r.id = c.search_run_id WHERE r.status = 'running' AND "
                             "c.complete = 1"),
              tu_sql_int(db, "SELECT units FROM search_runs WHERE status = 'running'"));
      return db;
    }
    free(db);
  }
  return NULL;
}

int tu_tables_differ(const char *ref, const char *db) {
  static const char *const tables[] = {"search_runs", "search_checkpoints",
                                       "search_checkpoint_plans", "scores", "plans", "models",
                                       "clusters", "study_cases"};
  int differ = 0;
  for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++) {
    char q[80];
    snprintf(q, sizeof q, "SELECT count(*) FROM %s", tables[i]);
    long long a = tu_sql_int(ref, q), b = tu_sql_int(db, q);
    if (a != b) fprintf(stderr, "%s: %lld rows in %s, %lld in %s\n", tables[i], a, ref, b, db);
    differ += a != b;
  }
  return differ;
}

char *tu_study_rows(const char *db, const char *study) {
  char q[320];
  snprintf(q, sizeof q,
           "SELECT group_concat(k, char(10)) FROM (SELECT case_key || ' ' || "
           "json_remove(result_json, '$.wall_s') AS k FROM study_cases WHERE study = '%s' "
           "ORDER BY case_key)", study);
  return tu_sql_text(db, q);
}
