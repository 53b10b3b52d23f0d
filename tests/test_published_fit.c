/* Every published configuration fits: runs study_validate over the whole of
 * benchmarks/data/published_runs.csv (the copy built into podplan and the file given as
 * argv[1], which must agree) and asserts that every row complete enough to evaluate memory
 * (the target and kept-aside rows, and any skipped row that states its plan, batch,
 * recompute and cluster) is predicted to fit, printing the tightest headroom. Then two edited
 * copies of the file, in a temporary directory: Nemotron-340B (row 49) without the bf16
 * gradient buffer its NeMo configuration states must not fit, and a skipped row (30) given
 * the name, micro-batch, batch and cluster it lacks must be evaluated too. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "podplan/study.h"
#include "testutil.h"

static int run(const char *data, study_validate_summary *s) {
  FILE *log = fopen("/dev/null", "w");
  study_validate_opts o = {.data = data, .out = log};
  pp_err err = {0};
  int rc = study_validate(&o, s, &err);
  fclose(log);
  if (rc) fprintf(stderr, "%s\n", err.msg);
  return rc;
}

/* text with the first `from` on the line that contains `line` replaced by `to` */
static char *edit(const char *text, const char *line, const char *from, const char *to) {
  const char *at = strstr(text, line);
  CHECK(at != NULL);
  const char *hit = at ? strstr(at, from) : NULL, *eol = at ? strchr(at, '\n') : NULL;
  CHECK(hit != NULL && (!eol || hit < eol));
  if (!hit) return strdup(text);
  size_t n = strlen(text) - strlen(from) + strlen(to) + 1, head = (size_t)(hit - text);
  char *out = malloc(n);
  memcpy(out, text, head);
  strcpy(out + head, to);
  strcat(out, hit + strlen(from));
  return out;
}

int main(int argc, char **argv) {
  if (argc < 2) return 2;
  study_validate_summary s, f;
  CHECK_EQ(run(NULL, &s), PP_OK);
  CHECK_EQ(s.mem_infeasible, 0);
  CHECK_EQ(s.mem_rows + s.mem_incomplete, s.rows);
  CHECK(s.mem_rows >= s.used);
  CHECK(s.min_headroom_gib > 0);
  fprintf(stderr, "%d of %d published configurations evaluated, all fit; tightest headroom "
                  "%.2f GiB (row %d); %d rows lack what memory needs\n",
          s.mem_rows, s.rows, s.min_headroom_gib, s.min_headroom_row, s.mem_incomplete);
  /* the file in the repository is the one built in */
  CHECK_EQ(run(argv[1], &f), PP_OK);
  CHECK_EQ(f.mem_rows, s.mem_rows);
  CHECK_NEAR(f.min_headroom_gib, s.min_headroom_gib, 1e-9);

  char *dir = tu_tmpdir("fit");
  char *text = tu_read(argv[1], NULL);
  CHECK(text != NULL);
  if (!text) return check_status();
  /* row 49 with fp32 gradients (the default) no longer fits: the check can fail */
  char *fp32 = edit(text, "\"NVIDIA/NeMo docs/source/performance/performance_summary.md @070a0bb1 "
                          "(NeMo 24.07, DGX-H100, FP8)\",Nemotron-340B",
                    "grad_bytes=2,grad_comm_bytes=2,", "grad_comm_bytes=2,");
  char *p = tu_write(dir, "fp32.csv", fp32, strlen(fp32));
  CHECK_EQ(run(p, &f), PP_OK);
  CHECK_EQ(f.mem_infeasible, 1);
  CHECK_EQ(f.min_headroom_row, 49);
  CHECK(f.min_headroom_gib < 0);
  fprintf(stderr, "row 49 with fp32 gradients: %.2f GiB over\n", -f.min_headroom_gib);
  free(p);
  /* row 30 (skipped: no batch) completed: its memory is checked although it is not predicted */
  char *full = edit(text, "Korthikanti et al. 2022 abstract", ",2240,8,35,8,,,,selective,",
                    ",2240,8,35,8,,1,1920,selective,");
  char *full2 = edit(full, "Korthikanti et al. 2022 abstract", "bf16,1,,1,1,", "bf16,1,dgx-a100,1,1,");
  char *full3 = edit(full2, "Korthikanti et al. 2022 abstract", ",30,unusable,,,",
                     ",30,unusable,,GPT-530B,");
  p = tu_write(dir, "full.csv", full3, strlen(full3));
  CHECK_EQ(run(p, &f), PP_OK);
  CHECK_EQ(f.used, s.used);
  CHECK_EQ(f.mem_rows, s.mem_rows + 1);
  CHECK_EQ(f.mem_incomplete, s.mem_incomplete - 1);
  CHECK_EQ(f.mem_infeasible, 0);
  free(p), free(full), free(full2), free(full3), free(fp32), free(text);
  tu_rmtree(dir);
  free(dir);
  return check_status();
}
