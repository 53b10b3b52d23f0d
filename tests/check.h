/* A tiny check library for podplan's ctest programs: each failed check prints where and both
 * values, the program goes on, and main returns check_status(). Asserts are always on. */
#ifndef PODPLAN_TEST_CHECK_H
#define PODPLAN_TEST_CHECK_H

#undef NDEBUG
#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

static int check__failures;

#define CHECK(cond)                                                              \
  do {                                                                           \
    if (!(cond)) {                                                               \
      fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond);   \
      check__failures++;                                                         \
    }                                                                            \
  } while (0)

/* 1 when x is a floating-point expression (x is not evaluated) */
#define CHECK__IS_FLOAT(x) _Generic((x), float: 1, double: 1, long double: 1, default: 0)

/* a == b for integers, enums, booleans and pointers; a floating-point argument does not
 * compile (a cast to long long would compare 0.3 with 0.2 as 0 == 0): use CHECK_DEQ for exact
 * equality of doubles, CHECK_NEAR or CHECK_ABS for a tolerance */
#define CHECK_EQ(a, b)                                                                    \
  do {                                                                                    \
    _Static_assert(!CHECK__IS_FLOAT(a) && !CHECK__IS_FLOAT(b),                            \
                   "CHECK_EQ on a floating-point value: use CHECK_DEQ, CHECK_NEAR or CHECK_ABS"); \
    long long a_ = (long long)(a), b_ = (long long)(b);                                   \
    if (a_ != b_) {                                                                       \
      fprintf(stderr, "%s:%d: CHECK_EQ(%s, %s) failed: %lld != %lld\n", __FILE__, __LINE__, \
              #a, #b, a_, b_);                                                            \
      check__failures++;                                                                  \
    }                                                                                     \
  } while (0)

/* a == b exactly, as doubles (NaN equals nothing) */
#define CHECK_DEQ(a, b)                                                                   \
  do {                                                                                    \
    double a_ = (a), b_ = (b);                                                            \
    if (!(a_ == b_)) {                                                                    \
      fprintf(stderr, "%s:%d: CHECK_DEQ(%s, %s) failed: %.17g != %.17g\n", __FILE__,      \
              __LINE__, #a, #b, a_, b_);                                                  \
      check__failures++;                                                                  \
    }                                                                                     \
  } while (0)

#define CHECK_STREQ(a, b)                                                                  \
  do {                                                                                     \
    const char *a_ = (a), *b_ = (b);                                                       \
    if (!a_ || !b_ || strcmp(a_, b_) != 0) {                                               \
      fprintf(stderr, "%s:%d: CHECK_STREQ(%s, %s) failed:\n  \"%s\"\n  \"%s\"\n", __FILE__, \
              __LINE__, #a, #b, a_ ? a_ : "(null)", b_ ? b_ : "(null)");                   \
      check__failures++;                                                                   \
    }                                                                                      \
  } while (0)

/* haystack contains needle */
#define CHECK_CONTAINS(hay, needle)                                                         \
  do {                                                                                      \
    const char *h_ = (hay), *n_ = (needle);                                                 \
    if (!h_ || !strstr(h_, n_)) {                                                           \
      fprintf(stderr, "%s:%d: CHECK_CONTAINS(%s, %s) failed:\n  \"%s\"\n  lacks \"%s\"\n",  \
              __FILE__, __LINE__, #hay, #needle, h_ ? h_ : "(null)", n_);                   \
      check__failures++;                                                                    \
    }                                                                                       \
  } while (0)

/* |a - b| <= tol * |b| */
#define CHECK_NEAR(a, b, tol)                                                                \
  do {                                                                                       \
    double a_ = (a), b_ = (b);                                                               \
    if (!(fabs(a_ - b_) <= (tol) * fabs(b_))) {                                              \
      fprintf(stderr, "%s:%d: CHECK_NEAR(%s, %s, %g) failed: %.9g vs %.9g\n", __FILE__,      \
              __LINE__, #a, #b, (double)(tol), a_, b_);                                      \
      check__failures++;                                                                     \
    }                                                                                        \
  } while (0)

/* |a - b| <= tol (for values near 0, where a relative tolerance means exact) */
#define CHECK_ABS(a, b, tol)                                                                 \
  do {                                                                                       \
    double a_ = (a), b_ = (b);                                                               \
    if (!(fabs(a_ - b_) <= (tol))) {                                                         \
      fprintf(stderr, "%s:%d: CHECK_ABS(%s, %s, %g) failed: %.9g vs %.9g\n", __FILE__,       \
              __LINE__, #a, #b, (double)(tol), a_, b_);                                      \
      check__failures++;                                                                     \
    }                                                                                        \
  } while (0)

static inline int check_status(void) {
  if (check__failures) fprintf(stderr, "%d check(s) failed\n", check__failures);
  return check__failures ? 1 : 0;
}

#endif
