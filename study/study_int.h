/* Internals of study/: a CSV reader (RFC 4180: quoted fields, doubled quotes, CRLF) and the
 * built-in copies of benchmarks/data/published_runs.csv and nccl_busbw.csv. */
#ifndef PODPLAN_STUDY_INT_H
#define PODPLAN_STUDY_INT_H

#include <stddef.h>

#include "podplan/err.h"

typedef struct study__csv {
  int nrows;      /* data rows (header excluded) */
  int ncols;      /* columns of the header */
  char **header;  /* ncols names */
  char ***rows;   /* nrows x ncols fields ("" when a row is short) */
  char *buf;      /* storage of every field */
} study__csv;

/* Parses text (len bytes). A row with more fields than the header, an unterminated quote or
 * an empty header fail with a message naming `origin` and the line. */
int study__csv_parse(const char *text, size_t len, const char *origin, study__csv *out,
                     pp_err *err);
void study__csv_free(study__csv *c);
/* Column index by name, or -1. */
int study__csv_col(const study__csv *c, const char *name);

/* benchmarks/data/published_runs.csv and nccl_busbw.csv as built into the binary
 * (study/CMakeLists.txt embeds them). */
extern const unsigned char study__published_runs[];
extern const size_t study__published_runs_len;
extern const unsigned char study__nccl_busbw[];
extern const size_t study__nccl_busbw_len;

/* Reads a CSV file, or the built-in text when path is NULL. */
int study__csv_load(const char *path, const unsigned char *builtin, size_t builtin_len,
                    const char *name, study__csv *out, pp_err *err);

#endif
