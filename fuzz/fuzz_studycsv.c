/* libFuzzer harness: the study data files (the CSVs of benchmarks/data, a --data or --grid file).
 * Feeds the input, as the file's bytes (NULs included), to study__csv_parse.
 * Invariants: a rejection is PP_INPUT, one non-empty line naming the file ("data.csv"), and
 * leaves the table empty; an accepted table has ncols >= 1 header names and nrows >= 0 rows of
 * ncols fields, every name and field a NUL-terminated string inside the parser's buffer; no
 * more rows than the input has line breaks (LF, CRLF or CR: a row starts after one); in a
 * table of one column no row is empty (a blank line is no row); study__csv_col finds each
 * name at its first column; and the table written back with study__csv_field (commas, LF
 * after each record) parses to the same table. */
#include <stdint.h>
#include <stdlib.h>

#include "fuzz_util.h"
#include "study_int.h"

static const char *const names[] = {"data.csv", NULL};

/* p is a string that starts in buf[0 .. n) */
static int in_buf(const char *p, const char *buf, size_t n) {
  return p && (uintptr_t)p >= (uintptr_t)buf && (uintptr_t)p < (uintptr_t)buf + n &&
         memchr(p, '\0', n - (size_t)(p - buf)) != NULL;
}

static void check_table(const study__csv *c, size_t len) {
  FZ_CHECK(c->ncols >= 1 && c->header && c->nrows >= 0 && c->buf, "ncols %d nrows %d",
           c->ncols, c->nrows);
  FZ_CHECK(c->nrows == 0 || c->rows, "rows missing");
  for (int k = 0; k < c->ncols; k++) {
    FZ_CHECK(in_buf(c->header[k], c->buf, len + 1), "header %d outside the buffer", k);
    int first = 0;
    while (strcmp(c->header[first], c->header[k])) first++;
    FZ_CHECK(study__csv_col(c, c->header[k]) == first, "column '%s' at %d, found at %d",
             c->header[k], first, study__csv_col(c, c->header[k]));
  }
  for (int r = 0; r < c->nrows; r++)
    for (int k = 0; k < c->ncols; k++)
      FZ_CHECK(c->rows[r] && in_buf(c->rows[r][k], c->buf, len + 1),
               "row %d field %d outside the buffer", r, k);
  if (c->ncols == 1)
    for (int r = 0; r < c->nrows; r++)
      FZ_CHECK(c->rows[r][0][0] != '\0', "row %d of a one-column table is empty", r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *text = (const char *)data;
  study__csv c;
  pp_err err = {0};
  int rc = study__csv_parse(text, size, "data.csv", &c, &err);
  if (rc) {
    fz_check_err(rc, &err, names);
    FZ_CHECK(rc == PP_INPUT, "code %d", rc);
    FZ_CHECK(c.nrows == 0 && c.ncols == 0 && !c.rows && !c.header && !c.buf,
             "a rejected file leaves a table");
    return 0;
  }
  check_table(&c, size);
  size_t breaks = 0;
  for (size_t i = 0; i < size; i++)
    breaks += text[i] == '\n' || (text[i] == '\r' && (i + 1 == size || text[i + 1] != '\n'));
  FZ_CHECK((size_t)c.nrows <= breaks, "%d rows from %zu line breaks", c.nrows, breaks);

  /* written back, it reads the same */
  char *out = NULL;
  size_t outlen = 0;
  FILE *f = open_memstream(&out, &outlen);
  FZ_CHECK(f != NULL, "open_memstream");
  for (int r = -1; r < c.nrows; r++)
    for (int k = 0; k < c.ncols; k++) {
      study__csv_field(f, r < 0 ? c.header[k] : c.rows[r][k]);
      fputc(k + 1 < c.ncols ? ',' : '\n', f);
    }
  fclose(f);
  study__csv back;
  pp_err err2 = {0};
  rc = study__csv_parse(out, outlen, "data.csv", &back, &err2);
  FZ_CHECK(rc == PP_OK, "written back, it fails: %s", err2.msg);
  FZ_CHECK(back.ncols == c.ncols && back.nrows == c.nrows, "written back: %d x %d, was %d x %d",
           back.nrows, back.ncols, c.nrows, c.ncols);
  for (int r = -1; r < c.nrows; r++)
    for (int k = 0; k < c.ncols; k++) {
      const char *a = r < 0 ? c.header[k] : c.rows[r][k];
      const char *b = r < 0 ? back.header[k] : back.rows[r][k];
      FZ_SAME_TEXT(a, b, "a field written back");
    }
  study__csv_free(&back);
  free(out);
  study__csv_free(&c);
  FZ_CHECK(c.nrows == 0 && c.ncols == 0 && !c.buf, "freed table not empty");
  return 0;
}
