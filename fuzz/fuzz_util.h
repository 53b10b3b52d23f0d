/* Helpers shared by the libFuzzer harnesses in fuzz/: invariant checks that abort (so
 * libFuzzer, or the replay driver under ctest, reports the input), error-message rules and a
 * NUL-terminated copy of the input. Header-only: every harness is one translation unit. */
#ifndef PODPLAN_FUZZ_UTIL_H
#define PODPLAN_FUZZ_UTIL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "podplan/err.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* An invariant: on violation print what and where, then abort(). */
#define FZ_CHECK(cond, ...)                                                        \
  do {                                                                             \
    if (!(cond)) {                                                                 \
      fprintf(stderr, "%s:%d: invariant '%s' violated: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                                \
      fputc('\n', stderr);                                                         \
      abort();                                                                     \
    }                                                                              \
  } while (0)

/* A failed call's error: a known code, a message that is non-empty, one line (no CR or LF)
 * and names what it is about (starts with one of the NULL-terminated `names`). */
static inline void fz_check_err(int rc, const pp_err *err, const char *const *names) {
  FZ_CHECK(rc > PP_OK && rc < PP__NCODES, "code %d", rc);
  FZ_CHECK(err->code == rc, "err.code %d, returned %d", err->code, rc);
  FZ_CHECK(err->msg[0] != '\0', "empty message for code %d", rc);
  FZ_CHECK(memchr(err->msg, '\0', sizeof err->msg) != NULL, "unterminated message");
  FZ_CHECK(!strchr(err->msg, '\n') && !strchr(err->msg, '\r'), "message on two lines: %s",
           err->msg);
  int named = 0;
  for (int i = 0; names[i] && !named; i++)
    named = strncmp(err->msg, names[i], strlen(names[i])) == 0;
  FZ_CHECK(named, "message names nothing known: %s", err->msg);
}

/* One-line text (warnings). */
static inline int fz_one_line(const char *s) { return !strchr(s, '\n') && !strchr(s, '\r'); }

/* A finite, non-negative figure. */
static inline int fz_nonneg(double x) { return isfinite(x) && x >= 0; }

/* s, a buffer of n bytes, holds v (a string of the input, NULL when absent) cut to n - 1
 * bytes and NUL-terminated */
static inline int fz_same_cut(const char *v, const char *s, size_t n) {
  size_t ls = strnlen(s, n);
  if (!v || ls == n) return 0;
  size_t lv = strlen(v);
  return ls == (lv < n - 1 ? lv : n - 1) && memcmp(s, v, ls) == 0;
}

/* The input as a NUL-terminated string (malloc'd; text after an embedded NUL is ignored by
 * callers that take C strings). */
static inline char *fz_cstr(const uint8_t *data, size_t size) {
  char *s = malloc(size + 1);
  if (!s) abort();
  if (size) memcpy(s, data, size);
  s[size] = '\0';
  return s;
}

/* Two canonical texts must be equal (both non-NULL). */
#define FZ_SAME_TEXT(a, b, what)                                                   \
  FZ_CHECK((a) && (b) && strcmp((a), (b)) == 0, "%s differs:\n  %s\n  %s", what,   \
           (a) ? (a) : "(null)", (b) ? (b) : "(null)")

#endif
