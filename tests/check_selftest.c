/* The check macros fail when they must: each macro of check.h is fed known-wrong values (one
 * failure each, its message naming the expression and both values) and known-right ones (no
 * failure), among them the cases the old CHECK_EQ passed by casting to long long (0.3 against
 * 0.2, 1.9 against 1.2); check_status() then says 1. tu_sql_int and tu_sql_real read a real
 * SQLite column: an integer column as its value, a real one never cut to its integer part.
 * That CHECK_EQ refuses a double at compile time is the ctest check_eq_refuses_double, which
 * compiles check_eq_double.c and expects the static assertion's message. */
#include <limits.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"
#include "testutil.h"

typedef struct selftest {
  int bad;      /* the self-test's own failures */
  FILE *log;    /* what the macros printed, captured */
  int saved_fd; /* stderr while captured */
} selftest;

static void capture(selftest *t) {
  fflush(stderr);
  t->log = tmpfile();
  t->saved_fd = dup(fileno(stderr));
  if (!t->log || t->saved_fd < 0 || dup2(fileno(t->log), fileno(stderr)) < 0) {
    fprintf(stderr, "check_selftest: cannot capture stderr\n");
    exit(1);
  }
}

/* Ends the capture; returns what was printed (malloc'd). */
static char *release(selftest *t) {
  fflush(stderr);
  dup2(t->saved_fd, fileno(stderr));
  close(t->saved_fd);
  long n = ftell(t->log);
  char *text = calloc((size_t)(n > 0 ? n : 0) + 1, 1);
  rewind(t->log);
  if (text && n > 0 && fread(text, 1, (size_t)n, t->log) != (size_t)n) text[0] = '\0';
  fclose(t->log);
  return text;
}

/* `what` made `fails` failures (0 or 1) and, when it failed, printed each of `needles`. */
static void expect(selftest *t, const char *what, int before, int fails, const char *printed,
                   const char *const *needles) {
  int got = check__failures - before;
  if (got != fails) {
    fprintf(stderr, "check_selftest: %s: %d failure(s), expected %d\n", what, got, fails);
    t->bad++;
  }
  for (int i = 0; fails && needles && needles[i]; i++)
    if (!printed || !strstr(printed, needles[i])) {
      fprintf(stderr, "check_selftest: %s: message lacks \"%s\": %s\n", what, needles[i],
              printed ? printed : "(none)");
      t->bad++;
    }
}

/* Runs one macro call with stderr captured and checks its count and message. */
#define EXPECT(t, fails, call, ...)                                                  \
  do {                                                                               \
    int before_ = check__failures;                                                   \
    capture(t);                                                                      \
    call;                                                                            \
    char *printed_ = release(t);                                                     \
    const char *needles_[] = {__VA_ARGS__, NULL};                                    \
    expect(t, #call, before_, fails, printed_, needles_);                            \
    free(printed_);                                                                  \
  } while (0)

static void wrong_values(selftest *t) {
  int one = 1, two = 2;
  const char *abc = "abc", *none = NULL;
  double third = 0.3, fifth = 0.2, nan = NAN;
  EXPECT(t, 1, CHECK(one == two), "CHECK(one == two)");
  EXPECT(t, 1, CHECK_EQ(one, two), "CHECK_EQ(one, two)", "1 != 2");
  EXPECT(t, 1, CHECK_EQ(&one, &two), "CHECK_EQ(&one, &two)");
  EXPECT(t, 1, CHECK_EQ(LLONG_MAX, LLONG_MAX - 1), "9223372036854775807");
  /* what CHECK_EQ's cast to long long passed: 0 == 0 and 1 == 1 */
  EXPECT(t, 1, CHECK_DEQ(third, fifth), "CHECK_DEQ(third, fifth)", "0.29999999999999999",
         "0.20000000000000001");
  EXPECT(t, 1, CHECK_DEQ(1.9, 1.2), "1.8999999999999999");
  EXPECT(t, 1, CHECK_DEQ(nan, nan), "nan");
  EXPECT(t, 1, CHECK_DEQ(0.1 + 0.2, 0.3), "0.30000000000000004");
  EXPECT(t, 1, CHECK_STREQ(abc, "abd"), "\"abc\"", "\"abd\"");
  EXPECT(t, 1, CHECK_STREQ(none, "abc"), "(null)");
  EXPECT(t, 1, CHECK_CONTAINS(abc, "x"), "lacks \"x\"");
  EXPECT(t, 1, CHECK_CONTAINS(none, "a"), "(null)");
  EXPECT(t, 1, CHECK_NEAR(1.1, 1.0, 0.05), "1.1 vs 1");
  EXPECT(t, 1, CHECK_NEAR(1e-4, 0, 0.5), "CHECK_NEAR"); /* relative to 0: exact */
  EXPECT(t, 1, CHECK_NEAR(nan, 1, 1), "nan");
  EXPECT(t, 1, CHECK_NEAR(1, nan, 1), "nan");
  EXPECT(t, 1, CHECK_ABS(0.2, 0, 0.1), "CHECK_ABS", "0.2 vs 0");
  EXPECT(t, 1, CHECK_ABS(nan, 0, 1), "nan");
}

static void right_values(selftest *t) {
  int one = 1;
  double third = 0.3;
  EXPECT(t, 0, CHECK(one == 1), "");
  EXPECT(t, 0, CHECK_EQ(one, 1), "");
  EXPECT(t, 0, CHECK_EQ(sizeof(int) * 2, 2 * sizeof(int)), "");
  EXPECT(t, 0, CHECK_DEQ(third, 0.3), "");
  EXPECT(t, 0, CHECK_DEQ(-0.0, 0.0), "");
  EXPECT(t, 0, CHECK_STREQ("abc", "abc"), "");
  EXPECT(t, 0, CHECK_CONTAINS("abc", "bc"), "");
  EXPECT(t, 0, CHECK_NEAR(1.04, 1.0, 0.05), "");
  EXPECT(t, 0, CHECK_ABS(1e-4, 0, 1e-3), "");
}

/* tu_sql_int and tu_sql_real on a real SQLite file */
static void sql_readers(selftest *t, const char *dir) {
  char *db = tu_path(dir, "self.db");
  sqlite3 *h = NULL;
  int ok = sqlite3_open(db, &h) == SQLITE_OK &&
           sqlite3_exec(h, "CREATE TABLE x (i INTEGER, r REAL, s TEXT);"
                           "INSERT INTO x VALUES (11, 11.7, 'eleven');",
                        NULL, NULL, NULL) == SQLITE_OK;
  sqlite3_close(h);
  if (!ok) {
    fprintf(stderr, "check_selftest: cannot write %s\n", db);
    t->bad++;
  }
  capture(t);
  long long i = tu_sql_int(db, "SELECT i FROM x"), r = tu_sql_int(db, "SELECT r FROM x");
  long long s = tu_sql_int(db, "SELECT s FROM x"), none = tu_sql_int(db, "SELECT nope FROM x");
  double ri = tu_sql_real(db, "SELECT i FROM x"), rr = tu_sql_real(db, "SELECT r FROM x");
  double rs = tu_sql_real(db, "SELECT s FROM x");
  char *printed = release(t);
  if (i != 11 || r != LLONG_MIN || s != LLONG_MIN || none != -1 || ri != 11 || rr != 11.7 ||
      !isnan(rs) || !printed || !strstr(printed, "\"11.7\" is not an integer")) {
    fprintf(stderr, "check_selftest: sql readers: %lld %lld %lld %lld %g %g %g; printed: %s\n",
            i, r, s, none, ri, rr, rs, printed ? printed : "");
    t->bad++;
  }
  free(printed);
  free(db);
}

int main(void) {
  selftest t = {0};
  char *dir = tu_tmpdir("selftest");
  wrong_values(&t);
  right_values(&t);
  int want = 18; /* the wrong values above, one failure each */
  if (check__failures != want) {
    fprintf(stderr, "check_selftest: %d failures counted, expected %d\n", check__failures, want);
    t.bad++;
  }
  capture(&t);
  int status = check_status();
  char *printed = release(&t);
  if (status != 1 || !printed || !strstr(printed, "18 check(s) failed")) {
    fprintf(stderr, "check_selftest: check_status() %d, printed %s\n", status, printed);
    t.bad++;
  }
  free(printed);
  check__failures = 0;
  sql_readers(&t, dir);
  tu_rmtree(dir);
  free(dir);
  if (t.bad) fprintf(stderr, "check_selftest: %d problem(s)\n", t.bad);
  return t.bad ? 1 : 0;
}
