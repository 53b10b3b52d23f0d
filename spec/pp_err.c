/* The error table of err.h and its helpers. */
#include "podplan/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const struct {
  int status;
  const char *msg;
} pp_errtab[] = {
#define PP__ROW(name, status, msg) {status, msg},
    PP_ERRNO_MAP(PP__ROW)
#undef PP__ROW
};

const char *pp_strerror(int code) {
  if (code < 0 || code >= PP__NCODES) return "unknown error";
  return pp_errtab[code].msg;
}

int pp_exit_status(int code) {
  if (code < 0 || code >= PP__NCODES) return 1;
  return pp_errtab[code].status;
}

static void pp__oneline(char *s) {
  for (; *s; s++)
    if (*s == '\n' || *s == '\r') *s = ' ';
}

int pp_err_set(pp_err *err, int code, const char *fmt, ...) {
  if (!err) return code;
  err->code = code;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err->msg, sizeof err->msg, fmt, ap);
  va_end(ap);
  pp__oneline(err->msg);
  return code;
}

int pp_err_prefix(pp_err *err, const char *fmt, ...) {
  if (!err) return PP_INTERNAL;
  char buf[PP_ERR_MSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  size_t n = strlen(buf);
  if (n + 2 < sizeof buf) {
    memcpy(buf + n, ": ", 3);
    n += 2;
    size_t rest = strlen(err->msg);
    if (rest > sizeof buf - 1 - n) rest = sizeof buf - 1 - n;
    memcpy(buf + n, err->msg, rest);
    buf[n + rest] = '\0';
  }
  memcpy(err->msg, buf, sizeof buf);
  pp__oneline(err->msg);
  return err->code;
}

void pp_err_clear(pp_err *err) {
  if (!err) return;
  err->code = PP_OK;
  err->msg[0] = '\0';
}
