/* libFuzzer harness: nccl-tests logs. Feeds the input, as log text (no NUL needed), to
 * tr_nccl_parse_text.
 * Invariants: a rejection is one non-empty line naming the input ("log.txt..."), leaving the
 * log empty; an accepted log has rows in file order within its lines, a collective that
 * tr_nccl_collective knows, a rank count >= 0, a one-line warning, and maxima that bound
 * every row's bandwidths. */
#include <stdint.h>
#include <stdlib.h>

#include "fuzz_util.h"
#include "podplan/tr.h"

static const char *const origin_names[] = {"log.txt", NULL};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  tr_nccl_log L;
  pp_err err = {0};
  int rc = tr_nccl_parse_text((const char *)data, size, "log.txt", &L, &err);
  if (rc) {
    fz_check_err(rc, &err, origin_names);
    FZ_CHECK(L.rows == NULL && L.nrows == 0, "a rejected log keeps %zu rows", L.nrows);
    return 0;
  }
  FZ_CHECK(L.nrows > 0 && L.rows, "accepted with no rows");
  const char *norm = tr_nccl_collective(L.collective);
  FZ_CHECK(norm && strcmp(norm, L.collective) == 0, "collective '%s'", L.collective);
  FZ_CHECK(L.collective_from && L.ranks_from, "origins of collective/ranks not set");
  FZ_CHECK(L.ranks >= 0, "ranks %d", L.ranks);
  FZ_CHECK(fz_one_line(L.warning), "warning on two lines: %s", L.warning);
  FZ_CHECK(memchr(L.version, '\0', sizeof L.version) != NULL, "version unterminated");
  for (size_t r = 0; r < L.nrows; r++) {
    const tr_nccl_row *w = &L.rows[r];
    FZ_CHECK(w->line >= 1 && w->line <= L.lines, "row %zu on line %ld of %ld", r, w->line,
             L.lines);
    FZ_CHECK(r == 0 || w->line > L.rows[r - 1].line, "row %zu (line %ld) after line %ld", r,
             w->line, L.rows[r - 1].line);
    FZ_CHECK(memchr(w->type, '\0', sizeof w->type) && memchr(w->redop, '\0', sizeof w->redop),
             "row %zu: unterminated type or redop", r);
    const tr_nccl_result *res[2] = {&w->out, &w->in};
    for (int k = 0; k < 2; k++) {
      FZ_CHECK(!(res[k]->busbw_gbps > L.max_busbw_gbps), "row %zu busbw %g > max %g", r,
               res[k]->busbw_gbps, L.max_busbw_gbps);
      FZ_CHECK(!(res[k]->algbw_gbps > L.max_algbw_gbps), "row %zu algbw %g > max %g", r,
               res[k]->algbw_gbps, L.max_algbw_gbps);
    }
  }
  tr_nccl_log_free(&L);
  FZ_CHECK(L.rows == NULL && L.nrows == 0, "freed log not empty");
  return 0;
}
