/* podplan errors: one table gives the error codes, their messages and the exit status the
 * CLI maps them to. Library functions return a code and write the detail ("model.json:
 * layers: must be > 0") into a caller's pp_err; only cli/ turns a code into an exit status.
 * Depends on nothing. */
#ifndef PODPLAN_ERR_H
#define PODPLAN_ERR_H

#include <stddef.h>

/* X(name, exit status, message) */
#define PP_ERRNO_MAP(X)                                                    \
  X(OK, 0, "success")                                                      \
  X(USAGE, 2, "bad usage")                                                 \
  X(INPUT, 2, "bad input")                                                 \
  X(PLAN, 2, "invalid plan")                                               \
  X(NOTFOUND, 2, "not found")                                              \
  X(NOTIMPL, 2, "not implemented yet")                                     \
  X(IO, 1, "I/O error")                                                    \
  X(NOMEM, 1, "out of memory")                                             \
  X(DB, 1, "database error")                                               \
  X(BUSY, 1, "database is locked")                                         \
  X(DEVICE, 1, "device error")                                             \
  X(INTERNAL, 1, "internal error")                                         \
  X(LIMIT, 1, "a time or size limit was reached")

typedef enum {
#define PP__ENUM(name, status, msg) PP_##name,
  PP_ERRNO_MAP(PP__ENUM)
#undef PP__ENUM
  PP__NCODES
} pp_code;

#define PP_ERR_MSG_MAX 1024

/* An error: the code and a one-line detail. Zero-initialise before use. */
typedef struct pp_err {
  int code;                  /* a pp_code; PP_OK when nothing failed */
  char msg[PP_ERR_MSG_MAX];  /* one line, no trailing newline; "" when code is PP_OK */
} pp_err;

/* The generic message of a code ("bad input"). */
const char *pp_strerror(int code);
/* The CLI exit status for a code: 0 ok, 1 runtime failure, 2 bad usage or bad input. */
int pp_exit_status(int code);
/* Sets err (when not NULL) to code and a printf-style one-line message; returns code.
 * Newlines in the message are replaced by spaces so that every error is one line. */
int pp_err_set(pp_err *err, int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* Prefixes err->msg with "prefix: " (e.g. a file name); returns err->code. */
int pp_err_prefix(pp_err *err, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Clears err to PP_OK. */
void pp_err_clear(pp_err *err);

#endif
