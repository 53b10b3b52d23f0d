/* A small RFC 4180 CSV reader for the study data files. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "study_int.h"

void study__csv_free(study__csv *c) {
  if (!c) return;
  for (int i = 0; i < c->nrows; i++) free(c->rows[i]);
  free(c->rows);
  free(c->header);
  free(c->buf);
  memset(c, 0, sizeof *c);
}

int study__csv_col(const study__csv *c, const char *name) {
  for (int i = 0; i < c->ncols; i++)
    if (strcmp(c->header[i], name) == 0) return i;
  return -1;
}

/* Copies every field, unquoted and NUL-terminated, into one buffer, then indexes the records:
 * the first is the header, blank lines are skipped, short records get empty fields. */
int study__csv_parse(const char *text, size_t len, const char *origin, study__csv *out,
                     pp_err *err) {
  memset(out, 0, sizeof *out);
  char *buf = malloc(len + 1);
  size_t cap_f = 1024, nf = 0, cap_r = 64, nr = 0;
  char **fields = malloc(cap_f * sizeof *fields);
  size_t *rec_start = malloc(cap_r * sizeof *rec_start);
  if (!buf || !fields || !rec_start) goto nomem;
  size_t o = 0, i = 0;
  int line = 1;
  while (i < len) {
    if (nr == cap_r) {
      size_t *n = realloc(rec_start, (cap_r *= 2) * sizeof *n);
      if (!n) goto nomem;
      rec_start = n;
    }
    rec_start[nr++] = nf;
    for (;;) { /* one field */
      if (nf == cap_f) {
        char **n = realloc(fields, (cap_f *= 2) * sizeof *n);
        if (!n) goto nomem;
        fields = n;
      }
      fields[nf++] = buf + o;
      if (i < len && text[i] == '"') {
        int start = line;
        i++;
        for (;;) {
          if (i >= len) {
            pp_err_set(err, PP_INPUT, "%s:%d: unterminated quoted field", origin, start);
            goto fail;
          }
          if (text[i] == '"') {
            if (i + 1 < len && text[i + 1] == '"') {
              buf[o++] = '"';
              i += 2;
              continue;
            }
            i++;
            break;
          }
          if (text[i] == '\n') line++;
          buf[o++] = text[i++];
        }
        if (i < len && text[i] != ',' && text[i] != '\r' && text[i] != '\n') {
          pp_err_set(err, PP_INPUT, "%s:%d: text after the closing quote of a field", origin,
                     line);
          goto fail;
        }
      } else {
        while (i < len && text[i] != ',' && text[i] != '\n' && text[i] != '\r') buf[o++] = text[i++];
      }
      buf[o++] = '\0';
      if (i < len && text[i] == ',') {
        i++;
        continue;
      }
      if (i < len && text[i] == '\r') i++;
      if (i < len && text[i] == '\n') i++, line++;
      break;
    }
  }
  if (nr == 0) {
    pp_err_set(err, PP_INPUT, "%s: empty (no header)", origin);
    goto fail;
  }
  out->buf = buf;
  out->ncols = (int)((nr > 1 ? rec_start[1] : nf) - rec_start[0]);
  out->header = malloc((size_t)out->ncols * sizeof *out->header);
  out->rows = calloc(nr, sizeof *out->rows);
  if (!out->header || !out->rows) goto nomem_out;
  for (int k = 0; k < out->ncols; k++) out->header[k] = fields[k];
  for (size_t r = 1; r < nr; r++) {
    size_t a = rec_start[r], b = r + 1 < nr ? rec_start[r + 1] : nf;
    if (b - a == 1 && fields[a][0] == '\0') continue; /* blank line */
    if ((int)(b - a) > out->ncols) {
      pp_err_set(err, PP_INPUT, "%s: record %zu has %zu fields, the header %d", origin, r + 1,
                 b - a, out->ncols);
      goto fail_out;
    }
    char **row = malloc((size_t)out->ncols * sizeof *row);
    if (!row) goto nomem_out;
    for (int k = 0; k < out->ncols; k++) row[k] = a + (size_t)k < b ? fields[a + (size_t)k] : buf + o - 1;
    out->rows[out->nrows++] = row;
  }
  free(fields);
  free(rec_start);
  return PP_OK;
nomem_out:
  pp_err_set(err, PP_NOMEM, "%s: out of memory", origin);
fail_out:
  free(fields);
  free(rec_start);
  study__csv_free(out);
  return err->code;
nomem:
  pp_err_set(err, PP_NOMEM, "%s: out of memory", origin);
fail:
  free(buf);
  free(fields);
  free(rec_start);
  return err->code;
}

int study__csv_load(const char *path, const unsigned char *builtin, size_t builtin_len,
                    const char *name, study__csv *out, pp_err *err) {
  if (!path) return study__csv_parse((const char *)builtin, builtin_len, name, out, err);
  FILE *f = fopen(path, "rb");
  if (!f) return pp_err_set(err, PP_INPUT, "%s: cannot open: %s", path, strerror(errno));
  size_t cap = 1 << 16, n = 0, k;
  char *text = malloc(cap);
  while (text && (k = fread(text + n, 1, cap - n, f)) > 0) {
    n += k;
    if (n == cap) {
      char *t2 = realloc(text, cap *= 2);
      if (!t2) free(text);
      text = t2;
    }
  }
  int bad = ferror(f);
  fclose(f);
  if (!text) return pp_err_set(err, PP_NOMEM, "%s: out of memory", path);
  int rc = bad ? pp_err_set(err, PP_IO, "%s: read failed", path)
               : study__csv_parse(text, n, path, out, err);
  free(text);
  return rc;
}

void study__csv_field(FILE *f, const char *s) {
  if (!strpbrk(s, ",\"\r\n")) {
    fputs(s, f);
    return;
  }
  fputc('"', f);
  for (; *s; s++) {
    if (*s == '"') fputc('"', f);
    fputc(*s, f);
  }
  fputc('"', f);
}
