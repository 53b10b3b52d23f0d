/* nccl-tests logs in: the result table nccl-tests prints, whatever its version and options,
 * read line by line into rows. The collective comes from `# Collective test starting:`, from
 * an `all_reduce_perf`-style name anywhere in the log, or (all-reduce only) from busbw/algbw;
 * the ranks from the `#  Rank N ... device` lines or, where those are missing or cut off
 * ("..."), from busbw/algbw and the collective's bus factor (nccl-tests doc/PERFORMANCE.md:
 * busbw = algbw * 2(n-1)/n for all-reduce, (n-1)/n for all-gather, reduce-scatter and
 * all-to-all, 1 for broadcast, reduce and send/recv; so n = num / (num - busbw/algbw)).
 *
 * The text is never assumed to end in a NUL: every token is a (pointer, length) span into it
 * and numbers are copied out before strtod sees them. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "podplan/tr.h"

#define MAX_FILE (256u << 20) /* bytes; logs are kilobytes, megabytes with NCCL_DEBUG=INFO */
#define MAX_COLS 40           /* columns a header may name */
#define MAX_TOKS 96           /* tokens kept per line (more are counted, not kept) */
#define NUM_MAX 63            /* characters of one number */
#define SHOW_MAX 24           /* characters of a bad token quoted in a message */

/* ---- tables ----------------------------------------------------------------------------- */

/* The collectives podplan models: normalised name, other spellings, and the bus factor
 * busbw/algbw = num * (n - 1) / n (num 0: factor 1, which says nothing about n). */
typedef struct coll_row {
  const char *name;
  const char *alias[2];
  double num;
} coll_row;

static const coll_row colls[] = {
    {"all_reduce", {"allreduce", "all-reduce"}, 2},
    {"all_gather", {"allgather", "all-gather"}, 1},
    {"reduce_scatter", {"reducescatter", "reduce-scatter"}, 1},
    {"alltoall", {"all_to_all", "all-to-all"}, 1},
    {"broadcast", {"bcast", NULL}, 0},
    {"reduce", {NULL, NULL}, 0},
    {"sendrecv", {"send_recv", NULL}, 0},
};
#define NCOLLS ((int)(sizeof colls / sizeof colls[0]))
#define ALL_REDUCE 0

/* The columns nccl-tests names in its header: how a value is read and where it goes (a field
 * of the row, or of the placement's result when `result`). `time`/`cputime` opens a placement.
 * A timestamp (-T) takes two tokens ("2025-01-01 12:00:00"). Unknown columns are skipped. */
typedef enum { V_UINT, V_INT, V_WORD, V_NUM, V_STAMP } vclass;
typedef struct col_row {
  const char *name;
  vclass v;
  int result;  /* 1: field of tr_nccl_result; 0: of tr_nccl_row */
  size_t off;  /* offset of the field */
  int opens;   /* 1: starts a placement (out-of-place, then in-place) */
} col_row;

#define ROW(f) 0, offsetof(tr_nccl_row, f), 0
#define RES(f) 1, offsetof(tr_nccl_result, f), 0
static const col_row cols[] = {
    {"size", V_UINT, ROW(size_bytes)},
    {"count", V_UINT, ROW(count)},
    {"type", V_WORD, ROW(type)},
    {"redop", V_WORD, ROW(redop)},
    {"root", V_INT, ROW(root)},
    {"time", V_NUM, 1, offsetof(tr_nccl_result, time_us), 1},
    {"cputime", V_NUM, 1, offsetof(tr_nccl_result, time_us), 1},
    {"algbw", V_NUM, RES(algbw_gbps)},
    {"busbw", V_NUM, RES(busbw_gbps)},
    {"#wrong", V_NUM, RES(wrong)},
    {"error", V_NUM, RES(wrong)},
    {"i_min", V_NUM, RES(imin_us)},
    {"i_max", V_NUM, RES(imax_us)},
    {"i_p99", V_NUM, RES(ip99_us)},
    {"i_cv%", V_NUM, RES(icv_pct)},
    {"timestamp", V_STAMP, 0, 0, 0},
};
#undef ROW
#undef RES
#define NCOL_NAMES ((int)(sizeof cols / sizeof cols[0]))

/* Headers of the layouts nccl-tests prints, for a table whose header line is missing: a row
 * with as many tokens as one of them is read with it. */
static const char *const default_headers[] = {
    "size count type redop root time algbw busbw #wrong time algbw busbw #wrong",
    "size count type redop time algbw busbw error time algbw busbw error",
    ("size count type redop root time algbw busbw #wrong i_min i_max i_p99 i_cv% "
     "time algbw busbw #wrong i_min i_max i_p99 i_cv%"), /* one header in two pieces */
};

/* ---- tokens ----------------------------------------------------------------------------- */

typedef struct tok {
  const char *p;
  size_t n;
} tok;

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }
static int is_digit(char c) { return c >= '0' && c <= '9'; }
static int is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
static char lower(char c) { return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c; }

/* Splits s[0..n) at white space; keeps up to max tokens and returns how many there are. */
static int tokenize(const char *s, size_t n, tok *t, int max) {
  int count = 0;
  size_t i = 0;
  while (i < n) {
    while (i < n && is_space(s[i])) i++;
    if (i == n) break;
    size_t b = i;
    while (i < n && !is_space(s[i])) i++;
    if (count < max) t[count] = (tok){s + b, i - b};
    count++;
  }
  return count;
}

static int tok_eq(const tok *t, const char *lit) {
  size_t n = strlen(lit);
  return t->n == n && memcmp(t->p, lit, n) == 0;
}

/* A token for a message: at most SHOW_MAX characters, anything unprintable as '?'. */
static const char *show(const tok *t, char *buf) {
  size_t n = t->n < SHOW_MAX ? t->n : SHOW_MAX, k = 0;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)t->p[i];
    buf[k++] = c > 32 && c < 127 && c != '\'' ? (char)c : '?';
  }
  if (t->n > n) buf[k++] = '.', buf[k++] = '.', buf[k++] = '.';
  buf[k] = 0;
  return buf;
}

/* Length of the prefix a launcher puts before each line: OpenMPI --tag-output
 * "[1,0]<stdout>:", MPICH -prepend-rank "[0] ", srun -l "0: "; 0 when none. */
static size_t prefix_len(const char *s, size_t n) {
  size_t i = 0;
  if (n && s[0] == '[') {
    for (i = 1; i < n && is_digit(s[i]); i++) {}
    if (i > 1 && i + 1 < n && s[i] == ']' && s[i + 1] == ' ') return i + 2; /* MPICH */
    if (i == 1 || i >= n || s[i] != ',') return 0;
    size_t j;
    for (j = i + 1; j < n && is_digit(s[j]); j++) {}
    if (j == i + 1 || j + 1 >= n || s[j] != ']' || s[j + 1] != '<') return 0;
    for (j += 2; j < n && is_alpha(s[j]); j++) {}
    return j + 1 < n && s[j] == '>' && s[j + 1] == ':' ? j + 2 : 0;
  }
  while (i < n && s[i] == ' ') i++;
  size_t d = i;
  while (i < n && is_digit(s[i])) i++;
  return i > d && i < n && s[i] == ':' && (i + 1 == n || s[i + 1] == ' ') ? i + 1 : 0;
}

/* ---- numbers ---------------------------------------------------------------------------- */

static int is_na(const tok *t) { return tok_eq(t, "N/A"); }

/* A finite decimal number that is the whole token. */
static int parse_num(const tok *t, double *v) {
  char buf[NUM_MAX + 1], *end;
  if (t->n == 0 || t->n > NUM_MAX) return 0;
  for (size_t i = 0; i < t->n; i++) {
    char c = t->p[i];
    if (!is_digit(c) && c != '.' && c != '+' && c != '-' && c != 'e' && c != 'E') return 0;
  }
  memcpy(buf, t->p, t->n);
  buf[t->n] = 0;
  errno = 0;
  double x = strtod(buf, &end);
  if (end != buf + t->n || !isfinite(x)) return 0;
  *v = x;
  return 1;
}

/* A whole number in [lo, hi] (digits, or a number like 1.2e+04 that is whole). */
static int parse_whole(const tok *t, double lo, double hi, double *v) {
  double x;
  if (!parse_num(t, &x) || x != floor(x) || x < lo || x > hi) return 0;
  *v = x;
  return 1;
}

/* Length of the number at the start of s[0..n) ("-1", "20.00", "1.2e+04", "N/A"); 0 if none. */
static size_t num_prefix(const char *s, size_t n) {
  if (n >= 3 && memcmp(s, "N/A", 3) == 0) return 3;
  size_t i = 0, digits = 0;
  if (i < n && (s[i] == '-' || s[i] == '+')) i++;
  for (; i < n && is_digit(s[i]); i++) digits++;
  if (i < n && s[i] == '.')
    for (i++; i < n && is_digit(s[i]); i++) digits++;
  if (!digits) return 0;
  if (i < n && (s[i] == 'e' || s[i] == 'E')) {
    size_t j = i + 1;
    if (j < n && (s[j] == '-' || s[j] == '+')) j++;
    size_t d = j;
    while (j < n && is_digit(s[j])) j++;
    if (j > d) i = j;
  }
  return i;
}

/* ---- collectives ------------------------------------------------------------------------ */

/* The collective spelled s[0..n) (any case); -1 when none. */
static int coll_find(const char *s, size_t n) {
  for (int c = 0; c < NCOLLS; c++) {
    const char *names[3] = {colls[c].name, colls[c].alias[0], colls[c].alias[1]};
    for (int k = 0; k < 3; k++) {
      if (!names[k] || strlen(names[k]) != n) continue;
      size_t i = 0;
      while (i < n && lower(s[i]) == names[k][i]) i++;
      if (i == n) return c;
    }
  }
  return -1;
}

/* The collective of an "<name>_perf" inside a token ("./build/all_reduce_perf",
 * "all_gather_perf_mpi"): index, -1 for a name that is none of ours, -2 when no "_perf". */
static int perf_coll(const tok *t) {
  int found = -2;
  for (size_t i = 0; i + 5 <= t->n; i++) {
    if (memcmp(t->p + i, "_perf", 5) != 0) continue;
    size_t b = i;
    while (b > 0 && (is_alpha(t->p[b - 1]) || t->p[b - 1] == '_')) b--;
    int c = coll_find(t->p + b, i - b);
    if (c >= 0) return c;
    found = -1;
  }
  return found;
}

const char *tr_nccl_collective(const char *name) {
  if (!name) return NULL;
  tok t = {name, strlen(name)};
  int c = perf_coll(&t);
  if (c == -2) c = coll_find(name, t.n);
  return c >= 0 ? colls[c].name : NULL;
}

/* ---- layouts ---------------------------------------------------------------------------- */

typedef struct layout {
  int ncols, ntoks, ngroups;     /* columns; tokens in a row; placements (1 or 2) */
  signed char col[MAX_COLS];     /* index into cols[]; -1: unknown column, skipped */
  signed char group[MAX_COLS];   /* -1: leading column; 0: out-of-place; 1: in-place */
  char name[MAX_COLS][16];       /* as the header spells it */
  long line;                     /* header line; 0: inferred from a row's column count */
} layout;

static int col_find(const char *s, size_t n) {
  for (int k = 0; k < NCOL_NAMES; k++)
    if (strlen(cols[k].name) == n && memcmp(cols[k].name, s, n) == 0) return k;
  return -1;
}

/* Builds a layout from header names; NULL when it works, else why not. */
static const char *layout_build(const tok *t, int n, long line, layout *L) {
  int count[3][NCOL_NAMES], g = -1; /* uses of each column: leading, out-of-place, in-place */
  memset(count, 0, sizeof count);
  memset(L, 0, sizeof *L);
  if (n > MAX_COLS) return "too many columns";
  L->line = line;
  for (int c = 0; c < n; c++) {
    int k = col_find(t[c].p, t[c].n);
    const col_row *cr = k >= 0 ? &cols[k] : NULL;
    if (cr && cr->opens && ++g > 1) return "more than two placements";
    if (cr && cr->result && g < 0) return "a result column before 'time'";
    if (cr && !cr->result && cr->v != V_STAMP && g >= 0) return "a row column after 'time'";
    L->col[c] = (signed char)k;
    L->group[c] = (signed char)(cr && cr->result ? g : -1);
    L->ntoks += cr && cr->v == V_STAMP ? 2 : 1;
    snprintf(L->name[c], sizeof L->name[c], "%.*s", (int)(t[c].n < 15 ? t[c].n : 15), t[c].p);
    if (cr && ++count[L->group[c] + 1][k] > 1) return "a column named twice";
  }
  L->ncols = n;
  L->ngroups = g + 1;
  if (!count[0][col_find("size", 4)]) return "no 'size' column";
  if (L->ngroups < 1) return "no 'time' column";
  for (int p = 1; p <= L->ngroups; p++)
    if (!(count[p][col_find("time", 4)] + count[p][col_find("cputime", 7)]) ||
        !count[p][col_find("algbw", 5)] || !count[p][col_find("busbw", 5)])
      return "a placement without time, algbw and busbw";
  if (L->ntoks > MAX_TOKS) return "too many columns";
  return NULL;
}

static int layout_has(const layout *L, const char *name) {
  for (int c = 0; c < L->ncols; c++)
    if (L->col[c] >= 0 && strcmp(cols[L->col[c]].name, name) == 0) return 1;
  return 0;
}

/* ---- the parser ------------------------------------------------------------------------- */

typedef struct parser {
  const char *origin;
  tr_nccl_log *log;
  pp_err *err;
  size_t cap;                /* rows allocated */
  layout lay;
  int have_lay, in_table;    /* a layout is known; rows are expected */
  long line;                 /* current line (1-based) */
  long complete_lines;       /* lines ended by '\n' */
  tok pend[MAX_TOKS];        /* a row printed in pieces around NCCL's own output */
  int npend;
  long pend_line;
  long cut_line;             /* a row cut off by the end of the file; 0: none */
  int avg_after_rows;        /* `# Avg bus bandwidth` came after the last row */
  long max_rank;             /* highest rank of a device line; -1: none */
  int dev_cut;               /* the device lines end in "..." */
  int coll;                  /* from `# Collective test starting:`; -1: none */
  int coll_bin, coll_bin2;   /* first and a different second *_perf name; -1: none */
} parser;

static int fail(parser *ps, long line, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static int fail(parser *ps, long line, const char *fmt, ...) {
  char msg[PP_ERR_MSG_MAX / 2];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (line > 0) return pp_err_set(ps->err, PP_INPUT, "%s:%ld: %s", ps->origin, line, msg);
  return pp_err_set(ps->err, PP_INPUT, "%s: %s", ps->origin, msg);
}

static int bad_count(parser *ps, long line, int n) {
  if (ps->lay.line)
    return fail(ps, line, "result row has %d columns, expected %d (header on line %ld)", n,
                ps->lay.ntoks, ps->lay.line);
  return fail(ps, line, "result row has %d columns, expected %d", n, ps->lay.ntoks);
}

/* A type or redop name: printable, shorter than TR_NCCL_WORD_MAX. */
static int is_word(const tok *v) {
  if (v->n >= TR_NCCL_WORD_MAX) return 0;
  for (size_t i = 0; i < v->n; i++)
    if ((unsigned char)v->p[i] <= 32 || (unsigned char)v->p[i] >= 127) return 0;
  return 1;
}

static void result_init(tr_nccl_result *r) {
  r->time_us = r->algbw_gbps = r->busbw_gbps = r->wrong = -1;
  r->imin_us = r->imax_us = r->ip99_us = r->icv_pct = -1;
}

/* Reads token v of column c into the field at dst. */
static int put_value(parser *ps, int c, const tok *v, void *dst, long line) {
  const col_row *cr = &cols[ps->lay.col[c]];
  const char *where = "";
  if (cr->result && ps->lay.ngroups == 2)
    where = ps->lay.group[c] ? " (in-place)" : " (out-of-place)";
  char b[SHOW_MAX + 4];
  double x;
  switch (cr->v) {
  case V_UINT:
    if (!parse_whole(v, 0, 9007199254740992.0, &x))
      return fail(ps, line, "column '%s': '%s' is not a whole number%s", ps->lay.name[c],
                  show(v, b), where);
    *(uint64_t *)dst = (uint64_t)x;
    return PP_OK;
  case V_INT:
    if (!parse_whole(v, -1e9, 1e9, &x))
      return fail(ps, line, "column '%s': '%s' is not an integer%s", ps->lay.name[c],
                  show(v, b), where);
    *(long *)dst = (long)x;
    return PP_OK;
  case V_WORD:
    if (!is_word(v))
      return fail(ps, line, "column '%s': '%s' is not a name%s", ps->lay.name[c], show(v, b),
                  where);
    memcpy(dst, v->p, v->n);
    ((char *)dst)[v->n] = 0;
    return PP_OK;
  case V_NUM:
    if (is_na(v)) return *(double *)dst = -1, PP_OK;
    if (!parse_num(v, &x))
      return fail(ps, line, "column '%s': '%s' is not a number%s", ps->lay.name[c], show(v, b),
                  where);
    if (x < 0)
      return fail(ps, line, "column '%s': '%s' is negative%s", ps->lay.name[c], show(v, b),
                  where);
    *(double *)dst = x;
    return PP_OK;
  case V_STAMP: return PP_OK;
  }
  return PP_OK;
}

/* Reads a row of lay.ntoks tokens and appends it. */
static int add_row(parser *ps, const tok *t, long line) {
  tr_nccl_log *L = ps->log;
  tr_nccl_row r;
  memset(&r, 0, sizeof r);
  r.root = -1;
  r.line = line;
  r.has_in = ps->lay.ngroups == 2;
  result_init(&r.out);
  result_init(&r.in);
  for (int c = 0, k = 0; c < ps->lay.ncols; c++) {
    int ci = ps->lay.col[c];
    const tok *v = &t[k];
    k += ci >= 0 && cols[ci].v == V_STAMP ? 2 : 1;
    if (ci < 0) continue;
    char *base = cols[ci].result ? (char *)(ps->lay.group[c] ? &r.in : &r.out) : (char *)&r;
    int rc = put_value(ps, c, v, base + cols[ci].off, line);
    if (rc) return rc;
  }
  if (L->nrows == ps->cap) {
    size_t cap = ps->cap ? 2 * ps->cap : 32;
    tr_nccl_row *rows = realloc(L->rows, cap * sizeof *rows);
    if (!rows) return pp_err_set(ps->err, PP_NOMEM, "%s: out of memory", ps->origin);
    L->rows = rows;
    ps->cap = cap;
  }
  L->rows[L->nrows++] = r;
  ps->avg_after_rows = 0;
  L->old_columns = !layout_has(&ps->lay, "root") && layout_has(&ps->lay, "error");
  L->per_iter = layout_has(&ps->lay, "i_min");
  return PP_OK;
}

/* Remembers an "<name>_perf" seen outside the table. */
static void scan_names(parser *ps, const tok *t, int n) {
  for (int i = 0; i < n; i++) {
    int c = perf_coll(&t[i]);
    if (c < 0) continue;
    if (ps->coll_bin < 0)
      ps->coll_bin = c;
    else if (c != ps->coll_bin && ps->coll_bin2 < 0)
      ps->coll_bin2 = c;
  }
}

/* ---- comment lines ("# ...", the '#' removed) -------------------------------------------- */

static int c_version(parser *ps, const tok *w, int n) {
  if (n >= 3)
    snprintf(ps->log->version, sizeof ps->log->version, "%.*s",
             (int)(w[2].n < 31 ? w[2].n : 31), w[2].p);
  return PP_OK;
}

/* "Collective test starting: all_reduce_perf" (or "concluded:") */
static int c_test(parser *ps, const tok *w, int n) {
  char b[SHOW_MAX + 4];
  if (n < 4 || !(tok_eq(&w[2], "starting:") || tok_eq(&w[2], "concluded:"))) return PP_OK;
  int c = perf_coll(&w[3]);
  if (c == -2) c = coll_find(w[3].p, w[3].n);
  if (c < 0)
    return fail(ps, ps->line, "collective '%s' is none of all_reduce, all_gather, "
                "reduce_scatter, alltoall, broadcast, reduce, sendrecv", show(&w[3], b));
  if (ps->coll >= 0 && ps->coll != c)
    return fail(ps, ps->line, "a second test (%s) in a log of %s: give each test its own file",
                colls[c].name, colls[ps->coll].name);
  ps->coll = c;
  return PP_OK;
}

/* "Rank  3 Group  0 Pid 1003 on node0 device  3 [0000:48:00] NVIDIA H100 80GB HBM3"; the
 * list of one process is cut with "..." past 2048 characters. */
static int c_device(parser *ps, const tok *w, int n) {
  const tok *last = &w[n - 1];
  double r;
  if (last->n >= 3 && memcmp(last->p + last->n - 3, "...", 3) == 0) {
    ps->dev_cut = 1; /* the rest of this process's list is missing */
    return PP_OK;
  }
  int device = 0;
  for (int i = 2; i < n; i++) device |= tok_eq(&w[i], "device");
  if (n < 2 || !device || !parse_whole(&w[1], 0, 1 << 24, &r)) return PP_OK;
  ps->log->device_lines++;
  if ((long)r > ps->max_rank) ps->max_rank = (long)r;
  return PP_OK;
}

/* "Avg bus bandwidth    : 78.1138 [OK|FAILED]" closes a table. */
static int c_avg(parser *ps, const tok *w, int n) {
  for (int i = 2; i + 1 < n; i++) {
    double v;
    if (tok_eq(&w[i], ":") && parse_num(&w[i + 1], &v)) ps->log->avg_busbw_gbps = v;
  }
  if (ps->log->nrows) ps->avg_after_rows = 1;
  ps->in_table = 0;
  return PP_OK;
}

static int c_oob(parser *ps, const tok *w, int n) {
  (void)w;
  (void)n;
  ps->in_table = 0;
  return PP_OK;
}

/* "size count type redop root time algbw busbw #wrong time ..." opens a table. */
static int c_header(parser *ps, const tok *w, int n) {
  int busbw = 0;
  for (int i = 0; i < n; i++) busbw |= tok_eq(&w[i], "busbw");
  if (!busbw) return PP_OK;
  layout L;
  const char *why = layout_build(w, n, ps->line, &L);
  if (why) return fail(ps, ps->line, "column header not understood: %s", why);
  ps->lay = L;
  ps->have_lay = ps->in_table = 1;
  return PP_OK;
}

static const struct {
  const char *w0, *w1;
  int (*fn)(parser *ps, const tok *w, int n);
} comments[] = {
    {"nccl-tests", "version", c_version},
    {"Collective", "test", c_test},
    {"Rank", NULL, c_device},
    {"Avg", "bus", c_avg},
    {"Out", "of", c_oob},
};

/* A comment line; one cut by the end of the file is read only as far as it closes a table
 * (its number, a collective's name or a header may be cut short). */
static int comment_line(parser *ps, tok *t, int n, int terminated) {
  if (ps->npend) return bad_count(ps, ps->pend_line, ps->npend);
  if (tok_eq(&t[0], "#")) {
    t++;
    n--;
  } else {
    t[0].p++;
    t[0].n--;
  }
  if (n <= 0) return PP_OK;
  if (!terminated) {
    if (n > 1 && tok_eq(&t[0], "Avg") && tok_eq(&t[1], "bus")) ps->avg_after_rows = ps->log->nrows > 0;
    return PP_OK;
  }
  if (tok_eq(&t[0], "size")) return c_header(ps, t, n);
  for (size_t i = 0; i < sizeof comments / sizeof comments[0]; i++)
    if (tok_eq(&t[0], comments[i].w0) && (!comments[i].w1 || (n > 1 && tok_eq(&t[1], comments[i].w1))))
      return comments[i].fn(ps, t, n);
  scan_names(ps, t, n);
  return PP_OK;
}

/* ---- result rows ------------------------------------------------------------------------ */

/* Outside a table and without any header: a row shaped like a default layout opens one. */
static int adopt_default(parser *ps, const tok *t, int nt) {
  double size;
  if (ps->have_lay || !parse_whole(&t[0], 0, 9007199254740992.0, &size)) return 0;
  for (size_t i = 0; i < sizeof default_headers / sizeof default_headers[0]; i++) {
    tok h[MAX_TOKS];
    const char *s = default_headers[i];
    int n = tokenize(s, strlen(s), h, MAX_TOKS);
    layout L;
    if (layout_build(h, n, 0, &L) == NULL && L.ntoks == nt) {
      ps->lay = L;
      ps->have_lay = ps->in_table = 1;
      return 1;
    }
  }
  return 0;
}

/* A line starting with a digit: nt tokens, of which t holds the first MAX_TOKS (a row has at
 * most MAX_TOKS, so a longer line is a wrong count before its tokens are needed). */
static int data_line(parser *ps, const tok *t, int nt, int terminated) {
  if (!ps->in_table && !adopt_default(ps, t, nt)) return PP_OK; /* digits outside a table */
  if (!terminated) { /* the file ends inside this row: drop it */
    ps->cut_line = ps->npend ? ps->pend_line : ps->line;
    ps->npend = 0;
    return PP_OK;
  }
  if (ps->npend) {
    if (ps->npend + nt != ps->lay.ntoks) return bad_count(ps, ps->pend_line, ps->npend + nt);
    memcpy(ps->pend + ps->npend, t, (size_t)nt * sizeof *t);
    ps->npend = 0;
    return add_row(ps, ps->pend, ps->pend_line);
  }
  if (nt != ps->lay.ntoks) return bad_count(ps, ps->line, nt);
  return add_row(ps, t, ps->line);
}

/* "host:pid:tid [dev] NCCL INFO ..." at token j-2. nccl-tests prints a row in pieces without
 * a newline, so NCCL's own output can land inside it ("  -1node0:12:12 [0] NCCL INFO ...");
 * in a table, what comes before it (and a number glued to the host name) belongs to a row
 * whose remaining columns follow on a later line. */
static int nccl_line(parser *ps, const tok *t, int j) {
  if (!ps->in_table || j < 2 || t[j - 1].n < 3 || t[j - 1].p[0] != '[') return PP_OK;
  int d = j - 2;
  if (!ps->npend && !(d >= 1 && is_digit(t[0].p[0]))) return PP_OK; /* a plain NCCL line */
  const tok *h = &t[j - 2];
  size_t colon = 0;
  while (colon < h->n && h->p[colon] != ':') colon++;
  size_t g = num_prefix(h->p, colon);
  if (g == colon || (d == 0 && !is_alpha(h->p[g]))) g = 0; /* the host name itself */
  if (ps->npend + d + (g > 0) > ps->lay.ntoks)
    return bad_count(ps, ps->npend ? ps->pend_line : ps->line, ps->npend + d + (g > 0));
  if (!ps->npend) ps->pend_line = ps->line;
  for (int i = 0; i < d; i++) ps->pend[ps->npend++] = t[i];
  if (g) ps->pend[ps->npend++] = (tok){h->p, g};
  if (ps->npend < ps->lay.ntoks) return PP_OK;
  ps->npend = 0;
  return add_row(ps, ps->pend, ps->pend_line);
}

static int do_line(parser *ps, const char *s, size_t n, int terminated) {
  size_t k = prefix_len(s, n);
  tok t[MAX_TOKS];
  int nt = tokenize(s + k, n - k, t, MAX_TOKS);
  int kept = nt < MAX_TOKS ? nt : MAX_TOKS;
  if (nt == 0) return PP_OK;
  if (t[0].p[0] == '#') return comment_line(ps, t, kept, terminated);
  for (int j = 0; j < kept; j++)
    if (tok_eq(&t[j], "NCCL")) return nccl_line(ps, t, j);
  if (is_digit(t[0].p[0])) return data_line(ps, t, nt, terminated);
  scan_names(ps, t, kept);
  return PP_OK;
}

/* ---- after the last line ---------------------------------------------------------------- */

static void warn(tr_nccl_log *L, const char *origin, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static void warn(tr_nccl_log *L, const char *origin, const char *fmt, ...) {
  size_t len = strlen(L->warning), cap = sizeof L->warning;
  if (len + 2 >= cap) return;
  if (len)
    len += (size_t)snprintf(L->warning + len, cap - len, "; ");
  else
    len += (size_t)snprintf(L->warning, cap, "%s: ", origin);
  if (len >= cap) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(L->warning + len, cap - len, fmt, ap);
  va_end(ap);
}

/* Maxima, and busbw/algbw of the placement with the largest algbw (-1 when none). */
static double stats(tr_nccl_log *L) {
  double best = 0, ratio = -1;
  for (size_t i = 0; i < L->nrows; i++) {
    const tr_nccl_result *p[2] = {&L->rows[i].out, &L->rows[i].in};
    for (int k = 0; k < 2; k++) {
      if (p[k]->busbw_gbps > L->max_busbw_gbps) L->max_busbw_gbps = p[k]->busbw_gbps;
      if (p[k]->algbw_gbps > L->max_algbw_gbps) L->max_algbw_gbps = p[k]->algbw_gbps;
      if (p[k]->algbw_gbps > best && p[k]->busbw_gbps >= 0) {
        best = p[k]->algbw_gbps;
        ratio = p[k]->busbw_gbps / p[k]->algbw_gbps;
      }
    }
  }
  return ratio;
}

/* Ranks from busbw/algbw = num (n-1)/n; 0 when the factor says nothing or n is not whole.
 * The figures have two decimals, so the tolerance grows with n. */
static int ratio_ranks(double num, double ratio) {
  if (num <= 0 || !(ratio >= 0 && ratio < num)) return 0;
  double n = num / (num - ratio);
  if (!(n < (1 << 24))) return 0;
  double r = floor(n + 0.5);
  return r >= 1 && fabs(n - r) <= fmax(0.2, 0.02 * n) ? (int)r : 0;
}

static int find_collective(parser *ps, double ratio) {
  tr_nccl_log *L = ps->log;
  int c = ps->coll;
  L->collective_from = "header line";
  if (c < 0 && ps->coll_bin >= 0 && ps->coll_bin2 >= 0)
    return fail(ps, 0, "names both %s_perf and %s_perf: cannot tell the collective",
                colls[ps->coll_bin].name, colls[ps->coll_bin2].name);
  if (c < 0 && (c = ps->coll_bin) >= 0) L->collective_from = "binary name";
  if (c < 0 && ratio > 1.001) { /* only all-reduce moves more than its buffer */
    c = ALL_REDUCE;
    L->collective_from = "busbw/algbw";
  }
  if (c < 0)
    return fail(ps, 0, "cannot tell the collective: no '# Collective test starting' line, "
                "no *_perf name, and busbw/algbw = %.3g fits several", ratio < 0 ? 0 : ratio);
  snprintf(L->collective, sizeof L->collective, "%s", colls[c].name);
  return PP_OK;
}

static void find_ranks(parser *ps, double ratio) {
  tr_nccl_log *L = ps->log;
  const coll_row *c = &colls[coll_find(L->collective, strlen(L->collective))];
  int from_ratio = ratio_ranks(c->num, ratio);
  int from_lines = (int)(ps->max_rank + 1);
  L->ranks = 0;
  L->ranks_from = "unknown";
  if (L->device_lines && !ps->dev_cut) {
    L->ranks = from_lines;
    L->ranks_from = "device lines";
    if (from_ratio && from_ratio != from_lines)
      warn(L, ps->origin, "%d ranks in the device lines but busbw/algbw %.4g gives %d for %s; "
           "kept %d", from_lines, ratio, from_ratio, c->name, from_lines);
  } else if (from_ratio) {
    L->ranks = from_ratio;
    L->ranks_from = "busbw/algbw";
    if (ps->dev_cut)
      warn(L, ps->origin, "device lines cut off after rank %ld; %d ranks from busbw/algbw",
           ps->max_rank, from_ratio);
  } else if (L->device_lines) {
    L->ranks = from_lines;
    L->ranks_from = "device lines";
    warn(L, ps->origin, "device lines cut off: at least %d ranks", from_lines);
  }
}

static int finish(parser *ps) {
  tr_nccl_log *L = ps->log;
  if (ps->npend) { /* a row split by NCCL output and never completed */
    ps->cut_line = ps->pend_line;
    ps->npend = 0;
  }
  if (!L->nrows)
    return fail(ps, 0, "no nccl-tests result rows%s", ps->cut_line ? " (the only one is cut off)" : "");
  double ratio = stats(L);
  int rc = find_collective(ps, ratio);
  if (rc) return rc;
  L->truncated = !ps->avg_after_rows;
  if (L->truncated) {
    warn(L, ps->origin, "truncated after line %ld (no '# Avg bus bandwidth'); kept %zu complete "
         "row%s", ps->complete_lines, L->nrows, L->nrows == 1 ? "" : "s");
    if (ps->cut_line) warn(L, ps->origin, "dropped the row cut off at line %ld", ps->cut_line);
  }
  find_ranks(ps, ratio);
  return PP_OK;
}

/* ---- entry points ----------------------------------------------------------------------- */

static uint64_t fnv1a(const char *s, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
  return h;
}

int tr_nccl_parse_text(const char *text, size_t len, const char *origin, tr_nccl_log *out,
                       pp_err *err) {
  memset(out, 0, sizeof *out);
  out->avg_busbw_gbps = -1;
  out->collective_from = out->ranks_from = "unknown";
  if (len == 0) return pp_err_set(err, PP_INPUT, "%s: empty file", origin);
  const char *nul = memchr(text, 0, len);
  if (nul)
    return pp_err_set(err, PP_INPUT, "%s: binary data (a NUL byte at offset %zu), not an "
                      "nccl-tests log", origin, (size_t)(nul - text));
  parser ps;
  memset(&ps, 0, sizeof ps);
  ps.origin = origin;
  ps.log = out;
  ps.err = err;
  ps.max_rank = -1;
  ps.coll = ps.coll_bin = ps.coll_bin2 = -1;
  out->hash = fnv1a(text, len);
  int rc = PP_OK;
  for (const char *p = text, *end = text + len; p < end && !rc;) {
    const char *eol = memchr(p, '\n', (size_t)(end - p));
    int terminated = eol != NULL;
    if (!eol) eol = end;
    ps.line++;
    ps.complete_lines += terminated;
    rc = do_line(&ps, p, (size_t)(eol - p), terminated);
    p = eol + terminated;
  }
  out->lines = ps.line;
  if (!rc) rc = finish(&ps);
  if (rc) tr_nccl_log_free(out);
  return rc;
}

int tr_nccl_parse(const char *path, tr_nccl_log *out, pp_err *err) {
  memset(out, 0, sizeof *out);
  FILE *f = fopen(path, "rb");
  if (!f) return pp_err_set(err, PP_INPUT, "%s: cannot open: %s", path, strerror(errno));
  char *buf = NULL;
  int rc = PP_OK;
  struct stat st;
  if (fstat(fileno(f), &st) != 0) {
    rc = pp_err_set(err, PP_IO, "%s: cannot stat: %s", path, strerror(errno));
    goto done;
  }
  if (!S_ISREG(st.st_mode)) {
    rc = pp_err_set(err, PP_INPUT, "%s: %s", path,
                    S_ISDIR(st.st_mode) ? "is a directory" : "not a regular file");
    goto done;
  }
  if ((unsigned long long)st.st_size > MAX_FILE) {
    rc = pp_err_set(err, PP_INPUT, "%s: %lld bytes, larger than the %u MiB a log may have", path,
                    (long long)st.st_size, MAX_FILE >> 20);
    goto done;
  }
  buf = malloc((size_t)st.st_size + 1);
  if (!buf) {
    rc = pp_err_set(err, PP_NOMEM, "%s: out of memory", path);
    goto done;
  }
  size_t n = fread(buf, 1, (size_t)st.st_size, f);
  if (ferror(f)) {
    rc = pp_err_set(err, PP_IO, "%s: read failed: %s", path, strerror(errno));
    goto done;
  }
  rc = tr_nccl_parse_text(buf, n, path, out, err);
done:
  free(buf);
  fclose(f);
  return rc;
}

void tr_nccl_log_free(tr_nccl_log *log) {
  if (!log) return;
  free(log->rows);
  log->rows = NULL;
  log->nrows = 0;
}
