/* The validation study end to end on the built-in data: the accuracy the cost model must keep
 * (MAPE of iteration time <= 10% over the SC'21 Table 1, Korthikanti and MT-NLG rows, every
 * published configuration of those feasible; all-reduce bus bandwidth on one 8-GPU node within
 * 10% of the published nccl-tests curves for messages >= 64 MiB; as a regression pin, not a
 * target met, at least 34 of the (at least 44) multi-node and NVLink-domain points within 15%,
 * one system flagged and not counted), its CSV and its rows in a
 * real database. Also `podplan predict` through the CLI: the JSON keys of docs/cli.md
 * and an infeasible plan that says by how much. Kendall's tau-b on hand-checked examples and
 * per set of runs of one model (validate_rank.csv). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "podplan/study.h"
#include "testutil.h"

static void study(const char *dir) {
  char *db = tu_path(dir, "v.db"), *out = tu_path(dir, "out");
  FILE *log = fopen("/dev/null", "w");
  study_validate_opts o = {.out_dir = out, .db = db, .out = log};
  study_validate_summary s;
  pp_err err = {0};
  CHECK_EQ(study_validate(&o, &s, &err), PP_OK);
  fclose(log);
  if (err.code) fprintf(stderr, "%s\n", err.msg);
  CHECK_EQ(s.target_rows, 21);
  CHECK(s.target_mape <= 10.0);
  CHECK_EQ(s.target_infeasible, 0);
  CHECK(s.holdout_rows >= 30);
  CHECK(s.coll_points >= 11);
  CHECK(s.coll_max_err <= 10.0);
  /* the multi-node and NVLink-domain curves (all-reduce and all-gather) are compared too;
   * the one system its author reports as underperforming (nccl#2409) is flagged, not counted.
   * Their target (every point within 15%) is not met (README); what follows is a regression
   * pin, not validation: 34 of the 44 points were within 15% when last regenerated
   * (`podplan study validate` prints the count; docs/models.md lists the others), and fewer
   * means the collective model got worse there */
  CHECK(s.coll_multi_points >= 44);
  CHECK_EQ(s.coll_flagged, 1);
  if (s.coll_multi_within < 34)
    fprintf(stderr, "regression pin: %d of %d multi-node points within 15%%, pinned 34\n",
            s.coll_multi_within, s.coll_multi_points);
  CHECK(s.coll_multi_within >= 34);
  fprintf(stderr, "target MAPE %.1f%% (max %.1f%%), holdout MAPE %.1f%%, busbw max %.1f%%\n",
          s.target_mape, s.target_max, s.holdout_mape, s.coll_max_err);
  /* Kendall's tau per set of runs of one model: SC'21 Table 2's GPT-175B and GPT-530B sets
   * (three ZeRO-3 and three PTD-P rows each) are among them, and validate_rank.csv has a line
   * per set */
  int t2 = 0;
  for (int i = 0; i < s.rank_groups; i++) {
    CHECK(s.rank[i].tau >= -1 && s.rank[i].tau <= 1);
    if (strncmp(s.rank[i].name, "SC'21 T2", 8) == 0) {
      CHECK_EQ(s.rank[i].rows, 6);
      t2++;
    }
  }
  CHECK_EQ(t2, 2);
  char *rank_csv = tu_path(out, "validate_rank.csv");
  char *rank_text = tu_read(rank_csv, NULL);
  CHECK(rank_text != NULL);
  CHECK_EQ(tu_lines(rank_text), s.rank_groups + 1);
  free(rank_text), free(rank_csv);
  char *csv = tu_path(out, "validate.csv");
  char *text = tu_read(csv, NULL);
  CHECK(text != NULL);
  CHECK_EQ(tu_lines(text), s.used + 1);
  /* one score per (plan, model, cluster, source): rows 51 and 55 publish the same
   * configuration (two NeMo containers) and share a row, the later one kept */
  CHECK_EQ(tu_sql_int(db, "SELECT count(*) FROM scores WHERE source = 'published'"), s.used - 1);
  CHECK_EQ(tu_sql_int(db, "SELECT count(*) FROM scores WHERE source = 'costmodel'"), s.used - 1);
  /* a rerun stores nothing twice */
  log = fopen("/dev/null", "w");
  o.out = log;
  CHECK_EQ(study_validate(&o, &s, &err), PP_OK);
  fclose(log);
  CHECK_EQ(tu_sql_int(db, "SELECT count(*) FROM scores WHERE source = 'published'"), s.used - 1);
  /* a broken data file is one clear error */
  char *bad = tu_write(dir, "bad.csv", "row,set\n\"1,target\n", 18);
  study_validate_opts ob = {.data = bad, .out = stdout};
  CHECK_EQ(study_validate(&ob, &s, &err), PP_INPUT);
  CHECK_CONTAINS(err.msg, "unterminated quoted field");
  free(text), free(csv), free(db), free(out), free(bad);
}

/* Kendall's tau-b on hand-checked examples: 1 2 3 4 against 1 3 2 4 has 5 concordant pairs
 * and 1 discordant, tau = (5 - 1) / 6; 1 2 3 against 1 1 2 has 2 concordant pairs and one
 * tied in y, tau = 2 / sqrt(3 * 2); reversed order gives -1; all ties give 0. */
static void kendall(void) {
  double a[] = {1, 2, 3, 4}, b[] = {1, 3, 2, 4}, c[] = {1, 2, 3}, d[] = {1, 1, 2};
  double rev[] = {4, 3, 2, 1}, same[] = {5, 5, 5, 5};
  int cc = -1, dd = -1;
  CHECK_NEAR(study_kendall_tau(a, b, 4, &cc, &dd), 4.0 / 6.0, 1e-12);
  CHECK_EQ(cc, 5);
  CHECK_EQ(dd, 1);
  CHECK_NEAR(study_kendall_tau(c, d, 3, &cc, &dd), 2.0 / sqrt(6.0), 1e-12);
  CHECK_EQ(cc, 2);
  CHECK_EQ(dd, 0);
  CHECK_NEAR(study_kendall_tau(a, rev, 4, NULL, NULL), -1.0, 1e-12);
  CHECK_NEAR(study_kendall_tau(a, same, 4, NULL, NULL), 0.0, 1e-12);
}

static void predict_cli(const char *bin) {
  tu_run r;
  char *a[] = {(char *)bin, "predict", "--model", "gpt3-175b", "--cluster", "dgx-h100", "--gpus",
               "1024", "--plan", "tp=8,pp=16,mbs=1,gbs=1536,sp=1,recompute=selective,zero=1",
               "--json", NULL};
  tu_exec(a, &r);
  CHECK_EQ(r.status, 0);
  const char *keys[] = {"\"iter_time_s\"", "\"tokens_per_s\"", "\"model_tflops_per_gpu\"",
                        "\"mfu\"", "\"hfu\"", "\"mem_gib_per_gpu\"", "\"feasible\": true",
                        "\"breakdown\"", "\"compute_s\"", "\"pp_bubble_s\"", "\"dp_comm_s\"",
                        "\"sc21_tflops_per_gpu\""};
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) CHECK_CONTAINS(r.out, keys[i]);
  tu_run_free(&r);
  char *b[] = {(char *)bin, "predict", "--model", "gpt3-175b", "--cluster", "dgx-h100", "--plan",
               "tp=8,mbs=1,gbs=64", NULL};
  tu_exec(b, &r);
  CHECK_EQ(r.status, 0);
  CHECK_CONTAINS(r.out, "does NOT fit");
  CHECK_CONTAINS(r.out, "infeasible: ");
  CHECK_CONTAINS(r.out, "GiB per GPU more than the 80 GiB of h100-sxm");
  tu_run_free(&r);
  char *c[] = {(char *)bin, "predict", "--model", "gpt3-175b", "--cluster", "dgx-h100", "--plan",
               "tp=64,gbs=64", NULL};
  tu_exec(c, &r);
  CHECK_EQ(r.status, 2);
  CHECK_CONTAINS(r.err, "rule 'tp divides heads'");
  tu_run_free(&r);
}

int main(int argc, char **argv) {
  if (argc < 2) return 2;
  char *dir = tu_tmpdir("study");
  kendall();
  study(dir);
  predict_cli(argv[1]);
  tu_rmtree(dir);
  free(dir);
  return check_status();
}
