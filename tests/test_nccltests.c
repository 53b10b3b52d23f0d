/* nccl-tests logs: every sample and variant parses to the expected collective, ranks and rows;
 * a truncated log keeps its complete rows with a warning; a garbled one is rejected with its
 * line; every truncation and thousands of mutations of a log parse or fail cleanly (run under
 * the sanitizer build too); `podplan import nccl-tests` stores rows once, stores nothing when
 * one file is bad, and prints the JSON keys of docs/cli.md.
 * Arguments: the podplan binary and tests/fixtures/nccl-tests. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"
#include "podplan/tr.h"
#include "testutil.h"

static const char *fixtures;

static char *fixture(const char *name) { return tu_path(fixtures, name); }

/* ---- every sample and variant ------------------------------------------------------------ */

typedef struct expect {
  const char *file, *collective, *collective_from, *ranks_from;
  int ranks;
  size_t rows;
  uint64_t first_size;
  double first_time_us;
  uint64_t last_size;
  double last_time_us, last_in_time_us;
  double max_busbw, max_algbw, avg_busbw;
  int truncated;
  const char *warning; /* substring, or NULL for none */
} expect;

static const expect samples[] = {
    {"synthetic_all_gather_v2.19.txt", "all_gather", "header line", "device lines", 8, 19, 1024,
     20.00, 268435456, 802.94, 810.97, 292.53, 334.32, 91.377, 0, NULL},
    {"synthetic_all_reduce_old_pre2.13.txt", "all_reduce", "busbw/algbw", "device lines", 8, 18,
     8, 20.00, 1048576, 26.12, 26.12, 70.26, 40.15, 8.54065, 0, NULL},
    {"synthetic_all_reduce_v2.19.txt", "all_reduce", "header line", "device lines", 8, 26, 8,
     20.00, 268435456, 1585.87, 1601.73, 296.22, 169.27, 78.1138, 0, NULL},
    {"synthetic_all_reduce_v2.19_periter.txt", "all_reduce", "header line", "device lines", 8,
     18, 8, 20.00, 1048576, 26.12, 26.38, 70.26, 40.15, 8.49836, 0, NULL},
    {"synthetic_alltoall_v2.19_c0.txt", "alltoall", "header line", "device lines", 8, 19, 1024,
     20.00, 268435456, 802.94, 810.97, 292.53, 334.32, 91.377, 0, NULL},
    {"mpi_tagged_all_reduce_16.txt", "all_reduce", "binary name", "device lines", 16, 6,
     1048576, 48.10, 1073741824, 7020.50, 7034.70, 286.77, 152.94, 184.237, 0, NULL},
    {"info_spliced_reduce_scatter_4.txt", "reduce_scatter", "header line", "device lines", 4, 6,
     65536, 18.20, 67108864, 566.70, 571.20, 88.82, 118.42, 42.5475, 0, NULL},
    {"single_gpu_all_reduce.txt", "all_reduce", "header line", "device lines", 1, 7, 8, 4.10,
     134217728, 690.1, 688.3, 0, 195.00, 0, 0, NULL},
    {"devices_cut_all_gather_32.txt", "all_gather", "header line", "busbw/algbw", 32, 3, 1048576,
     40.10, 268435456, 805.30, 811.20, 322.92, 333.34, 168.653, 0,
     "device lines cut off after rank 24; 32 ranks from busbw/algbw"},
    {"broadcast_crlf_timestamps_exp.txt", "broadcast", "header line", "unknown", 0, 3, 1048576,
     12.50, 17179869184ull, 7.7e4, 7.8e4, 223.70, 223.70, 175.432, 0, NULL},
    {"headerless_sendrecv.txt", "sendrecv", "binary name", "unknown", 0, 3, 1048576, 43.20,
     268435456, 5501.70, 5510.30, 48.79, 48.79, -1, 1, "truncated after line 4"},
    {"truncated_all_gather.txt", "all_gather", "header line", "device lines", 8, 12, 1024, 20.00,
     2097152, 26.12, 26.38, 70.26, 80.30, -1, 1,
     "truncated_all_gather.txt: truncated after line 30 (no '# Avg bus bandwidth'); kept 12 "
     "complete rows; dropped the row cut off at line 31"},
};
#define N(a) (sizeof(a) / sizeof((a)[0]))

static void check_sample(const expect *e) {
  char *path = fixture(e->file);
  tr_nccl_log L;
  pp_err err = {0};
  int rc = tr_nccl_parse(path, &L, &err);
  CHECK_EQ(rc, PP_OK);
  if (rc) {
    fprintf(stderr, "  %s: %s\n", e->file, err.msg);
    free(path);
    return;
  }
  CHECK_STREQ(L.collective, e->collective);
  CHECK_STREQ(L.collective_from, e->collective_from);
  CHECK_EQ(L.ranks, e->ranks);
  CHECK_STREQ(L.ranks_from, e->ranks_from);
  CHECK_EQ(L.nrows, e->rows);
  CHECK_EQ(L.rows[0].size_bytes, e->first_size);
  CHECK_NEAR(L.rows[0].out.time_us, e->first_time_us, 1e-12);
  const tr_nccl_row *last = &L.rows[L.nrows - 1];
  CHECK_EQ(last->size_bytes, e->last_size);
  CHECK_NEAR(last->out.time_us, e->last_time_us, 1e-12);
  CHECK_NEAR(last->in.time_us, e->last_in_time_us, 1e-12);
  CHECK_NEAR(L.max_busbw_gbps, e->max_busbw, 1e-12);
  CHECK_NEAR(L.max_algbw_gbps, e->max_algbw, 1e-12);
  CHECK_NEAR(L.avg_busbw_gbps, e->avg_busbw, 1e-12);
  CHECK_EQ(L.truncated, e->truncated);
  if (e->warning)
    CHECK_CONTAINS(L.warning, e->warning);
  else
    CHECK_STREQ(L.warning, "");
  tr_nccl_log_free(&L);
  free(path);
}

/* Details the table above does not show. */
static void check_details(void) {
  char *path = fixture("synthetic_all_reduce_old_pre2.13.txt");
  tr_nccl_log L;
  pp_err err = {0};
  CHECK_EQ(tr_nccl_parse(path, &L, &err), PP_OK);
  CHECK_EQ(L.old_columns, 1);
  CHECK_EQ(L.rows[0].root, -1);
  CHECK_STREQ(L.rows[0].redop, "sum");
  CHECK_NEAR(L.rows[0].in.wrong, 2e-7, 1e-12);
  CHECK_STREQ(L.version, "");
  tr_nccl_log_free(&L);
  free(path);

  path = fixture("synthetic_all_reduce_v2.19_periter.txt");
  CHECK_EQ(tr_nccl_parse(path, &L, &err), PP_OK);
  CHECK_EQ(L.per_iter, 1);
  CHECK_NEAR(L.rows[17].out.ip99_us, 27.16, 1e-12);
  CHECK_NEAR(L.rows[17].in.imax_us, 27.70, 1e-12);
  CHECK_NEAR(L.rows[17].in.busbw_gbps, 69.57, 1e-12);
  tr_nccl_log_free(&L);
  free(path);

  path = fixture("synthetic_alltoall_v2.19_c0.txt");
  CHECK_EQ(tr_nccl_parse(path, &L, &err), PP_OK);
  CHECK_DEQ(L.rows[3].out.wrong, -1); /* N/A */
  CHECK_STREQ(L.version, "2.19.6");
  tr_nccl_log_free(&L);
  free(path);

  path = fixture("info_spliced_reduce_scatter_4.txt"); /* rows 0 and 3 printed in pieces */
  CHECK_EQ(tr_nccl_parse(path, &L, &err), PP_OK);
  CHECK_EQ(L.rows[0].line, 19);
  CHECK_NEAR(L.rows[0].in.busbw_gbps, 2.65, 1e-12);
  CHECK_EQ(L.rows[3].size_bytes, 4194304);
  CHECK_NEAR(L.rows[3].out.busbw_gbps, 53.41, 1e-12);
  CHECK_NEAR(L.rows[3].in.time_us, 59.71, 1e-12);
  tr_nccl_log_free(&L);
  free(path);

  path = fixture("mpi_tagged_all_reduce_16.txt");
  CHECK_EQ(tr_nccl_parse(path, &L, &err), PP_OK);
  CHECK_NEAR(L.rows[0].out.busbw_gbps, 40.87, 1e-12);
  CHECK_NEAR(L.rows[0].in.time_us, 48.95, 1e-12);
  CHECK_EQ(L.device_lines, 16);
  tr_nccl_log_free(&L);
  free(path);

  path = fixture("broadcast_crlf_timestamps_exp.txt");
  CHECK_EQ(tr_nccl_parse(path, &L, &err), PP_OK);
  CHECK_NEAR(L.rows[1].out.time_us, 1200, 1e-12);
  CHECK_NEAR(L.rows[1].in.time_us, 1210, 1e-12);
  CHECK_NEAR(L.rows[2].out.busbw_gbps, 220, 1e-12);
  CHECK_EQ(L.rows[0].root, 0);
  CHECK_EQ(L.rows[2].count, 4294967296ull);
  tr_nccl_log_free(&L);
  free(path);

  CHECK_STREQ(tr_nccl_collective("all_reduce_perf"), "all_reduce");
  CHECK_STREQ(tr_nccl_collective("./build/alltoall_perf_mpi"), "alltoall");
  CHECK_STREQ(tr_nccl_collective("AllGather"), "all_gather");
  CHECK_STREQ(tr_nccl_collective("reduce_scatter_perf"), "reduce_scatter");
  CHECK_STREQ(tr_nccl_collective("reduce"), "reduce");
  CHECK_STREQ(tr_nccl_collective("sendrecv_perf"), "sendrecv");
  CHECK(tr_nccl_collective("hypercube_perf") == NULL);
  CHECK(tr_nccl_collective("") == NULL);
}

/* ---- rejected logs and edited copies ------------------------------------------------------ */

static void check_rejects(void) {
  static const struct {
    const char *file, *msg;
  } bad[] = {
      {"garbled_busbw_all_reduce.txt",
       "garbled_busbw_all_reduce.txt:28: column 'busbw': 'abc' is not a number (out-of-place)"},
      {"garbled_columns_all_reduce.txt",
       "garbled_columns_all_reduce.txt:31: result row has 12 columns, expected 13 (header on "
       "line 17)"},
      {"no_rows.txt", "no_rows.txt: no nccl-tests result rows"},
      {"no-such-file.txt", "no-such-file.txt: cannot open: No such file or directory"},
  };
  for (size_t i = 0; i < N(bad); i++) {
    char *path = fixture(bad[i].file);
    tr_nccl_log L;
    pp_err err = {0};
    CHECK_EQ(tr_nccl_parse(path, &L, &err), PP_INPUT);
    CHECK_CONTAINS(err.msg, bad[i].msg);
    CHECK(strchr(err.msg, '\n') == NULL);
    CHECK(L.rows == NULL && L.nrows == 0);
    free(path);
  }
  tr_nccl_log L;
  pp_err err = {0};
  CHECK_EQ(tr_nccl_parse(fixtures, &L, &err), PP_INPUT);
  CHECK_CONTAINS(err.msg, "nccl-tests: is a directory");
  char *dir = tu_tmpdir("nccl");
  char *empty = tu_write(dir, "empty.txt", "", 0);
  CHECK_EQ(tr_nccl_parse(empty, &L, &err), PP_INPUT);
  CHECK_CONTAINS(err.msg, "empty.txt: empty file");
  static const char junk[] = "\x7f" "ELF\x02\x01\x01\0\0\0\0\0\0\0\0\0\x03\0>\0\x01\0\0\0";
  char *bin = tu_write(dir, "junk.bin", junk, sizeof junk);
  CHECK_EQ(tr_nccl_parse(bin, &L, &err), PP_INPUT);
  CHECK_CONTAINS(err.msg, "junk.bin: binary data (a NUL byte at offset 7)");
  free(empty);
  free(bin);
  tu_rmtree(dir);
  free(dir);
}

/* Replaces the first `from` in text by `to`; malloc'd. */
static char *edit(const char *text, const char *from, const char *to) {
  const char *at = strstr(text, from);
  assert(at);
  size_t a = (size_t)(at - text), nf = strlen(from), nt = strlen(to), n = strlen(text);
  char *s = malloc(n - nf + nt + 1);
  memcpy(s, text, a);
  memcpy(s + a, to, nt);
  memcpy(s + a + nt, at + nf, n - a - nf + 1);
  return s;
}

static int parse_str(const char *s, tr_nccl_log *L, pp_err *err) {
  return tr_nccl_parse_text(s, strlen(s), "t.txt", L, err);
}

static void check_edits(void) {
  char *p = fixture("synthetic_all_reduce_v2.19.txt");
  char *ar = tu_read(p, NULL);
  free(p);
  p = fixture("synthetic_all_gather_v2.19.txt");
  char *ag = tu_read(p, NULL);
  free(p);
  assert(ar && ag);
  tr_nccl_log L;
  pp_err err = {0};

  /* no device lines: ranks from busbw/algbw = 2(n-1)/n */
  char *s = edit(ar, "#  Rank  0", "#  Ra");
  for (int r = 1; r < 8; r++) {
    char from[16];
    snprintf(from, sizeof from, "#  Rank  %d", r);
    char *t = edit(s, from, "#  Ra");
    free(s);
    s = t;
  }
  CHECK_EQ(parse_str(s, &L, &err), PP_OK);
  CHECK_EQ(L.ranks, 8);
  CHECK_STREQ(L.ranks_from, "busbw/algbw");
  CHECK_EQ(L.device_lines, 0);
  tr_nccl_log_free(&L);
  free(s);

  /* device lines that disagree with busbw/algbw: kept, with a warning */
  s = edit(ar, "#  Rank  7 Group", "#  Nope  7 Group");
  CHECK_EQ(parse_str(s, &L, &err), PP_OK);
  CHECK_EQ(L.ranks, 7);
  CHECK_CONTAINS(L.warning, "7 ranks in the device lines but busbw/algbw 1.75 gives 8");
  tr_nccl_log_free(&L);
  free(s);

  /* no header and no binary name: all-gather's factor (n-1)/n fits several collectives */
  s = edit(ag, "# Collective test starting: all_gather_perf", "#");
  char *t = edit(s, "# Collective test concluded: all_gather_perf", "#");
  CHECK_EQ(parse_str(t, &L, &err), PP_INPUT);
  CHECK_CONTAINS(err.msg, "t.txt: cannot tell the collective");
  free(s);
  free(t);

  /* a collective podplan does not model */
  s = edit(ar, "all_reduce_perf", "hypercube_perf");
  CHECK_EQ(parse_str(s, &L, &err), PP_INPUT);
  CHECK_CONTAINS(err.msg, "t.txt:2: collective 'hypercube_perf' is none of");
  free(s);

  /* two tests in one file */
  size_t na = strlen(ar), ng = strlen(ag);
  s = malloc(na + ng + 1);
  memcpy(s, ar, na);
  memcpy(s + na, ag, ng + 1);
  CHECK_EQ(parse_str(s, &L, &err), PP_INPUT);
  CHECK_CONTAINS(err.msg, "t.txt:52: a second test (all_gather) in a log of all_reduce");
  free(s);

  /* the same test twice (a rerun appended) is one log with both tables */
  s = malloc(2 * na + 1);
  memcpy(s, ar, na);
  memcpy(s + na, ar, na + 1);
  CHECK_EQ(parse_str(s, &L, &err), PP_OK);
  CHECK_EQ(L.nrows, 52);
  CHECK_EQ(L.truncated, 0);
  tr_nccl_log_free(&L);
  free(s);

  /* garbled fields: a word in a number column, a negative time, a cut row mid-table */
  static const struct {
    const char *from, *to, *msg;
  } bad[] = {
      {"  1585.87", "  1585.8x", "t.txt:44: column 'time': '1585.8x' is not a number (out-of-place)"},
      {"  1601.73", "  -1601.7", "t.txt:44: column 'time': '-1601.7' is negative (in-place)"},
      {"     float     sum      -1    20.00    0.00    0.00       0    20.20    0.00    0.00       0\n",
       "     float     sum      -1    20.00\n", "t.txt:19: result row has 6 columns, expected 13"},
      {"        8             2", "        8            2x", "t.txt:19: column 'count': '2x' is not a whole number"},
      {"   67108864     float", "   67108864     fl\x01t", "t.txt:44: column 'type': 'fl?t' is not a name"},
      {"    0.00       0    20.20", "    0.00    nope    20.20", "t.txt:19: column '#wrong': 'nope' is not a number"},
  };
  for (size_t i = 0; i < N(bad); i++) {
    s = edit(ar, bad[i].from, bad[i].to);
    pp_err_clear(&err);
    CHECK_EQ(parse_str(s, &L, &err), PP_INPUT);
    CHECK_CONTAINS(err.msg, bad[i].msg);
    free(s);
  }

  /* srun -l and MPICH prefixes */
  s = malloc(3 * na + 64);
  size_t k = 0;
  int line = 0;
  for (const char *q = ar; *q;) {
    const char *e = strchr(q, '\n');
    size_t len = e ? (size_t)(e - q) + 1 : strlen(q);
    k += (size_t)sprintf(s + k, "%s", line++ % 2 ? "  0: " : "[0] ");
    memcpy(s + k, q, len);
    k += len;
    q += len;
  }
  s[k] = 0;
  CHECK_EQ(parse_str(s, &L, &err), PP_OK);
  CHECK_EQ(L.nrows, 26);
  CHECK_EQ(L.ranks, 8);
  tr_nccl_log_free(&L);
  free(s);
  free(ar);
  free(ag);
}

/* ---- fuzz ------------------------------------------------------------------------------- */

static int same_row(const tr_nccl_row *a, const tr_nccl_row *b) {
  return a->size_bytes == b->size_bytes && a->count == b->count && !strcmp(a->type, b->type) &&
         !strcmp(a->redop, b->redop) && a->root == b->root && a->line == b->line &&
         a->out.time_us == b->out.time_us && a->out.busbw_gbps == b->out.busbw_gbps &&
         a->in.time_us == b->in.time_us && a->in.algbw_gbps == b->in.algbw_gbps &&
         a->in.wrong == b->in.wrong;
}

/* Parses len bytes from an exact-size copy (so an overread is caught under ASan). */
static int parse_copy(const char *text, size_t len, tr_nccl_log *L, pp_err *err) {
  char *c = malloc(len ? len : 1);
  memcpy(c, text, len);
  pp_err_clear(err);
  int rc = tr_nccl_parse_text(c, len, "cut.txt", L, err);
  free(c);
  return rc;
}

/* Every cut of a log: the rows kept are the log's first rows, exactly, and never fewer than at
 * a shorter cut; with `precise` (rows on one line each), exactly the rows whose line ends
 * before the cut; a failure is one clean line. */
static void fuzz_cuts(const char *name, int precise) {
  char *p = fixture(name);
  size_t n;
  char *text = tu_read(p, &n);
  free(p);
  assert(text);
  tr_nccl_log full, L;
  pp_err err = {0};
  CHECK_EQ(tr_nccl_parse_text(text, n, name, &full, &err), PP_OK);
  int bad = 0;
  size_t before = 0;
  for (size_t cut = 0; cut <= n; cut++) {
    int rc = parse_copy(text, cut, &L, &err);
    if (rc) {
      bad += err.code != PP_INPUT || strncmp(err.msg, "cut.txt", 7) != 0 ||
             strchr(err.msg, '\n') != NULL;
      continue;
    }
    size_t want = 0; /* rows whose line ends before the cut */
    while (precise && want < full.nrows) {
      const char *start = text;
      for (long l = 1; l < full.rows[want].line; l++) start = strchr(start, '\n') + 1;
      const char *eol = strchr(start, '\n');
      if ((size_t)(eol - text) >= cut) break;
      want++;
    }
    bad += precise ? L.nrows != want : L.nrows < before;
    bad += cut == n && L.nrows != full.nrows;
    before = L.nrows;
    for (size_t r = 0; r < L.nrows && r < full.nrows; r++) bad += !same_row(&L.rows[r], &full.rows[r]);
    bad += cut < n && L.truncated && !strstr(L.warning, "truncated after line");
    tr_nccl_log_free(&L);
  }
  CHECK_EQ(bad, 0);
  tr_nccl_log_free(&full);
  free(text);
}

static uint64_t xorshift(uint64_t *x) {
  *x ^= *x << 13;
  *x ^= *x >> 7;
  *x ^= *x << 17;
  return *x;
}

/* Random edits of a log, random bytes, and soups of the words a log is made of. */
static void fuzz_random(const char *name, int iters) {
  char *p = fixture(name);
  size_t n;
  char *text = tu_read(p, &n);
  free(p);
  assert(text);
  static const char alphabet[] = " \n\r#.-+eE0123456789N/A[]:<>,abcNCCLINFO_";
  static const char *const words[] = {
      "#", "size", "count", "type", "redop", "root", "time", "cputime", "algbw", "busbw",
      "#wrong", "error", "i_min", "i_cv%", "timestamp", "N/A", "NCCL", "INFO", "[0]", "[1,0]<stdout>:",
      "0:", "-1node0:1:1", "8", "1024", "20.00", "1.2e+04", "-1", "float", "sum", "\n", "\n",
      "Rank", "device", "...", "Avg", "bus", "bandwidth", ":", "Collective", "test", "starting:",
      "all_reduce_perf", "alltoall_perf", "nccl-tests", "version", "1e999", "0x10", "nan"};
  uint64_t x = 0x9e3779b97f4a7c15ull;
  int bad = 0;
  char *buf = malloc(n + 4096);
  for (int it = 0; it < iters; it++) {
    size_t len;
    int mode = it % 3;
    if (mode == 0) { /* edit a few bytes of the log */
      memcpy(buf, text, n);
      len = n;
      for (int k = 1 + (int)(xorshift(&x) % 8); k > 0; k--) {
        uint64_t r = xorshift(&x);
        buf[r % n] = (r >> 32) & 1 ? (char)(r >> 40) : alphabet[(r >> 40) % (sizeof alphabet - 1)];
      }
    } else if (mode == 1) { /* random bytes */
      len = xorshift(&x) % 2048;
      for (size_t i = 0; i < len; i++) buf[i] = (char)(xorshift(&x) >> 24);
    } else { /* a soup of words */
      len = 0;
      while (len < n) {
        const char *w = words[xorshift(&x) % N(words)];
        size_t wl = strlen(w);
        memcpy(buf + len, w, wl);
        len += wl;
        buf[len++] = xorshift(&x) % 4 ? ' ' : '\n';
      }
    }
    tr_nccl_log L;
    pp_err err = {0};
    int rc = parse_copy(buf, len, &L, &err);
    if (rc)
      bad += !err.msg[0] || strchr(err.msg, '\n') != NULL || L.rows != NULL;
    else
      bad += L.nrows == 0 || !L.collective[0] || strchr(L.warning, '\n') != NULL;
    tr_nccl_log_free(&L);
  }
  CHECK_EQ(bad, 0);
  free(buf);
  free(text);
}

/* ---- the CLI ---------------------------------------------------------------------------- */

static tu_run import(char *bin, const char *db, const char *const *files, int nfiles,
                     const char *extra1, const char *extra2, const char *extra3) {
  char *a[32] = {bin, "import", "nccl-tests"};
  int k = 3;
  for (int i = 0; i < nfiles; i++) a[k++] = fixture(files[i]);
  int nf = k;
  if (db) a[k++] = "--db", a[k++] = (char *)db;
  if (extra1) a[k++] = (char *)extra1;
  if (extra2) a[k++] = (char *)extra2;
  if (extra3) a[k++] = (char *)extra3;
  tu_run r;
  tu_exec(a, &r);
  for (int i = 3; i < nf; i++) free(a[i]);
  return r;
}

static void check_cli(char *bin) {
  char *dir = tu_tmpdir("nccl-cli");
  char *db = tu_path(dir, "t.db");
  static const char *const five[] = {
      "synthetic_all_gather_v2.19.txt", "synthetic_all_reduce_old_pre2.13.txt",
      "synthetic_all_reduce_v2.19.txt", "synthetic_all_reduce_v2.19_periter.txt",
      "synthetic_alltoall_v2.19_c0.txt"};
  tu_run r = import(bin, db, five, 5, NULL, NULL, NULL);
  CHECK_EQ(r.status, 0);
  CHECK_STREQ(r.err, "");
  CHECK_EQ(tu_lines(r.out), 5);
  CHECK_CONTAINS(r.out, "synthetic_all_reduce_v2.19.txt: all_reduce, 8 ranks (device lines), 26 "
                        "rows, max busbw 296.2 GB/s, max algbw 169.3 GB/s; 52 measurements "
                        "stored (0 already there)\n");
  CHECK_CONTAINS(r.out, "synthetic_alltoall_v2.19_c0.txt: alltoall, 8 ranks (device lines), 19 rows");
  tu_run_free(&r);
  CHECK_EQ(tu_sql_int(db, "SELECT COUNT(*) FROM measurements"), 200);
  CHECK_EQ(tu_sql_int(db, "SELECT COUNT(*) FROM measurements WHERE name = 'all_reduce' AND "
                          "ranks = 8 AND kind = 'coll' AND device = 'nccl-tests'"),
           124);
  CHECK_EQ(tu_sql_int(db, "SELECT COUNT(DISTINCT run_key) FROM measurements WHERE run_key "
                          "GLOB 'nccl-tests:[0-9a-f]*' AND length(run_key) = 27"),
           5);
  CHECK_EQ(tu_sql_int(db, "SELECT CAST(round(time_s * 1e8) AS INTEGER) FROM measurements "
                          "WHERE name = 'all_reduce' AND bytes = 268435456 AND seq = 51"),
           160173);
  CHECK_EQ(tu_sql_int(db, "SELECT CAST(round(busbw_gbps * 100) AS INTEGER) FROM measurements "
                          "WHERE name = 'all_reduce' AND bytes = 268435456 AND seq = 50"),
           29622);
  char *shape = tu_sql_text(db, "SELECT shape_json FROM measurements WHERE name = 'alltoall' "
                                "AND seq = 1");
  CHECK_STREQ(shape, "{\"count\":32,\"type\":\"float\",\"redop\":\"none\",\"inplace\":1}");
  free(shape);
  CHECK_EQ(tu_sql_int(db, "SELECT COUNT(*) FROM measurements WHERE cluster_id IS NOT NULL"), 0);

  /* again: nothing added */
  r = import(bin, db, five + 2, 1, NULL, NULL, NULL);
  CHECK_EQ(r.status, 0);
  CHECK_CONTAINS(r.out, "; 0 measurements stored (52 already there)");
  tu_run_free(&r);
  CHECK_EQ(tu_sql_int(db, "SELECT COUNT(*) FROM measurements"), 200);

  /* a bad file among good ones: exit 2, one line, nothing stored */
  static const char *const mixed[] = {"single_gpu_all_reduce.txt", "garbled_busbw_all_reduce.txt",
                                      "info_spliced_reduce_scatter_4.txt"};
  r = import(bin, db, mixed, 3, NULL, NULL, NULL);
  CHECK_EQ(r.status, 2);
  CHECK_STREQ(r.out, "");
  CHECK_EQ(tu_lines(r.err), 1);
  CHECK_CONTAINS(r.err, "podplan import: ");
  CHECK_CONTAINS(r.err, "garbled_busbw_all_reduce.txt:28: column 'busbw': 'abc' is not a number");
  tu_run_free(&r);
  CHECK_EQ(tu_sql_int(db, "SELECT COUNT(*) FROM measurements"), 200);
  char *db2 = tu_path(dir, "never.db");
  r = import(bin, db2, mixed, 3, NULL, NULL, NULL);
  CHECK_EQ(r.status, 2);
  CHECK(access(db2, F_OK) != 0); /* the database was not even opened */
  tu_run_free(&r);

  /* a truncated log: its complete rows, a warning on stderr; --cluster sets cluster_id */
  static const char *const trunc[] = {"truncated_all_gather.txt"};
  r = import(bin, db, trunc, 1, "--cluster", "dgx-h100", NULL);
  CHECK_EQ(r.status, 0);
  CHECK_EQ(tu_lines(r.err), 1);
  CHECK_CONTAINS(r.err, "podplan import: warning: ");
  CHECK_CONTAINS(r.err, "truncated after line 30 (no '# Avg bus bandwidth'); kept 12 complete rows");
  CHECK_CONTAINS(r.out, "24 measurements stored (0 already there)");
  tu_run_free(&r);
  CHECK_EQ(tu_sql_int(db, "SELECT COUNT(*) FROM measurements WHERE cluster_id IS NOT NULL"), 24);
  CHECK_EQ(tu_sql_int(db, "SELECT COUNT(*) FROM clusters"), 1);

  /* --json: one object for one file, an array for several */
  static const char *const one[] = {"devices_cut_all_gather_32.txt"};
  r = import(bin, db, one, 1, "--json", NULL, NULL);
  CHECK_EQ(r.status, 0);
  json_error_t je;
  json_t *o = json_loads(r.out ? r.out : "", 0, &je);
  CHECK(json_is_object(o));
  static const char *const keys[] = {"collective", "ranks", "rows", "max_busbw_gbps",
                                     "max_algbw_gbps", "file", "ranks_from", "truncated",
                                     "stored"};
  for (size_t i = 0; i < N(keys); i++) CHECK(json_object_get(o, keys[i]) != NULL);
  CHECK_STREQ(json_string_value(json_object_get(o, "collective")), "all_gather");
  CHECK_EQ(json_integer_value(json_object_get(o, "ranks")), 32);
  CHECK_STREQ(json_string_value(json_object_get(o, "ranks_from")), "busbw/algbw");
  CHECK_EQ(json_integer_value(json_object_get(o, "rows")), 3);
  CHECK_NEAR(json_real_value(json_object_get(o, "max_busbw_gbps")), 322.92, 1e-12);
  CHECK(json_is_false(json_object_get(o, "truncated")));
  CHECK_EQ(json_integer_value(json_object_get(o, "stored")), 6);
  json_decref(o);
  tu_run_free(&r);
  static const char *const two[] = {"mpi_tagged_all_reduce_16.txt",
                                    "broadcast_crlf_timestamps_exp.txt"};
  r = import(bin, db, two, 2, "--json", NULL, NULL);
  CHECK_EQ(r.status, 0);
  o = json_loads(r.out ? r.out : "", 0, &je);
  CHECK(json_is_array(o) && json_array_size(o) == 2);
  CHECK_EQ(json_integer_value(json_object_get(json_array_get(o, 0), "ranks")), 16);
  CHECK_STREQ(json_string_value(json_object_get(json_array_get(o, 1), "ranks_from")), "unknown");
  json_decref(o);
  tu_run_free(&r);

  /* bad usage and unreadable files: exit 2, one line */
  struct {
    const char *args[6];
    const char *msg;
  } usage[] = {
      {{NULL}, "name what to import: nccl-tests"},
      {{"csv", "x.csv", NULL}, "unknown format 'csv' (only nccl-tests)"},
      {{"nccl-tests", NULL}, "nccl-tests: give at least one log file"},
      {{"nccl-tests", "x.txt", "--gpus", "8", NULL}, "--gpus needs --cluster"},
      {{"nccl-tests", "x.txt", "--cluster", "no-such-cluster", NULL}, "no-such-cluster"},
      {{"nccl-tests", "/no/such/log.txt", NULL}, "/no/such/log.txt: cannot open"},
      {{"nccl-tests", "/", NULL}, "/: is a directory"},
  };
  for (size_t i = 0; i < N(usage); i++) {
    char *a[10] = {bin, "import"};
    int k = 2;
    for (int j = 0; usage[i].args[j]; j++) a[k++] = (char *)usage[i].args[j];
    a[k++] = "--db";
    a[k++] = db2;
    tu_exec(a, &r);
    CHECK_EQ(r.status, 2);
    CHECK_CONTAINS(r.err, usage[i].msg);
    CHECK_EQ(tu_lines(r.err), 1);
    CHECK_STREQ(r.out, "");
    tu_run_free(&r);
  }
  CHECK(access(db2, F_OK) != 0);
  free(db2);
  free(db);
  tu_rmtree(dir);
  free(dir);
}

int main(int argc, char **argv) {
  if (argc < 3) return 2;
  fixtures = argv[2];
  for (size_t i = 0; i < N(samples); i++) check_sample(&samples[i]);
  check_details();
  check_rejects();
  check_edits();
  fuzz_cuts("synthetic_all_reduce_v2.19.txt", 1);
  fuzz_cuts("synthetic_all_reduce_old_pre2.13.txt", 1);
  fuzz_cuts("info_spliced_reduce_scatter_4.txt", 0);
  fuzz_cuts("mpi_tagged_all_reduce_16.txt", 0);
  fuzz_random("synthetic_all_reduce_v2.19_periter.txt", 30000);
  fuzz_random("info_spliced_reduce_scatter_4.txt", 30000);
  check_cli(argv[1]);
  return check_status();
}
