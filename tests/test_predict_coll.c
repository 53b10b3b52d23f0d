/* podplan predict --collective through the real binary.
 *
 *   test_predict_coll PODPLAN
 *     --json on 16 H100 (dgx-h100, two nodes) for 64 MiB, 1 GiB and 8 GiB of all-reduce: the
 *     keys collective, cluster, gpus and rows, each row with bytes, time_s, algorithm,
 *     algbw_gbps and busbw_gbps; busbw = algbw * 2(n-1)/n and algbw = bytes / time_s;
 *     NVLSTree at 8 GiB above the 8 x 48 GB/s of the node's NICs; sizes with K/M/G;
 *     all-gather's busbw factor (n-1)/n; the text table names the algorithm (NVLS on one
 *     8-GPU node);
 *     bad input (unknown collective, bad size, --bytes without --collective, --collective
 *     with --plan, no --cluster): one line on stderr, exit 2, nothing on stdout. */
#include <jansson.h>
#include <math.h>
#include <string.h>

#include "check.h"
#include "testutil.h"

static char *bin;

static void run(const char *const *args, tu_run *r) {
  char *a[24];
  int n = 0;
  a[n++] = bin;
  a[n++] = "predict";
  for (int i = 0; args[i]; i++) a[n++] = (char *)args[i];
  a[n] = NULL;
  tu_exec(a, r);
}

static void json_rows(void) {
  tu_run r;
  const char *args[] = {"--cluster", "dgx-h100", "--gpus", "16", "--collective", "all_reduce",
                        "--bytes", "64M,1073741824,8G", "--json", NULL};
  run(args, &r);
  CHECK_EQ(r.status, 0);
  json_error_t je;
  json_t *o = json_loads(r.out, 0, &je);
  CHECK(o != NULL);
  if (o) {
    CHECK_STREQ(json_string_value(json_object_get(o, "collective")), "all_reduce");
    CHECK_STREQ(json_string_value(json_object_get(o, "cluster")), "dgx-h100");
    CHECK_EQ(json_integer_value(json_object_get(o, "gpus")), 16);
    json_t *rows = json_object_get(o, "rows");
    CHECK_EQ(json_array_size(rows), 3);
    const double want[] = {64.0 * 1048576, 1073741824.0, 8.0 * 1073741824};
    for (size_t i = 0; i < json_array_size(rows) && i < 3; i++) {
      json_t *row = json_array_get(rows, i);
      double b = json_real_value(json_object_get(row, "bytes"));
      double t = json_real_value(json_object_get(row, "time_s"));
      double alg = json_real_value(json_object_get(row, "algbw_gbps"));
      double bus = json_real_value(json_object_get(row, "busbw_gbps"));
      CHECK(json_is_string(json_object_get(row, "algorithm")));
      CHECK_NEAR(b, want[i], 1e-12);
      CHECK(t > 0);
      CHECK_NEAR(alg, b / t / 1e9, 1e-9);
      CHECK_NEAR(bus, alg * 2 * 15.0 / 16, 1e-9);
      if (i == 2) {
        CHECK_STREQ(json_string_value(json_object_get(row, "algorithm")), "nvlstree");
        CHECK(bus > 8 * 48.0);
      }
    }
    json_decref(o);
  }
  tu_run_free(&r);
  /* all-gather: busbw = algbw * (n-1)/n; the text table */
  const char *ag[] = {"--cluster", "dgx-h100", "--gpus", "32", "--collective", "all_gather",
                      "--bytes", "512K,1G", "--json", NULL};
  run(ag, &r);
  CHECK_EQ(r.status, 0);
  o = json_loads(r.out, 0, &je);
  CHECK(o != NULL);
  if (o) {
    json_t *row = json_array_get(json_object_get(o, "rows"), 1);
    CHECK_NEAR(json_real_value(json_object_get(row, "busbw_gbps")),
               json_real_value(json_object_get(row, "algbw_gbps")) * 31 / 32, 1e-9);
    CHECK_NEAR(json_real_value(json_object_get(json_array_get(json_object_get(o, "rows"), 0),
                                               "bytes")),
               512 * 1024.0, 1e-12);
    json_decref(o);
  }
  tu_run_free(&r);
  const char *text[] = {"--cluster", "dgx-h100", "--gpus", "8", "--collective", "all_reduce",
                        "--bytes", "1G", NULL};
  run(text, &r);
  CHECK_EQ(r.status, 0);
  CHECK_CONTAINS(r.out, "busbw_GB/s");
  CHECK_CONTAINS(r.out, " nvls ");
  tu_run_free(&r);
}

static void bad_input(void) {
  const char *const cases[][12] = {
      {"--cluster", "dgx-h100", "--collective", "allreduce", "--bytes", "1G", NULL},
      {"--cluster", "dgx-h100", "--collective", "all_reduce", "--bytes", "1X", NULL},
      {"--cluster", "dgx-h100", "--collective", "all_reduce", "--bytes", "-5", NULL},
      {"--cluster", "dgx-h100", "--collective", "all_reduce", "--bytes", "1G,", NULL},
      {"--cluster", "dgx-h100", "--collective", "all_reduce", NULL},
      {"--cluster", "dgx-h100", "--bytes", "1G", NULL},
      {"--cluster", "dgx-h100", "--collective", "all_reduce", "--bytes", "1G", "--plan", "tp=8",
       NULL},
      {"--collective", "all_reduce", "--bytes", "1G", NULL},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    tu_run r;
    run(cases[i], &r);
    CHECK_EQ(r.status, 2);
    CHECK_EQ(tu_lines(r.err), 1);
    CHECK_EQ(strlen(r.out), 0);
    tu_run_free(&r);
  }
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: test_predict_coll PODPLAN\n");
    return 2;
  }
  bin = argv[1];
  json_rows();
  bad_input();
  return check_status();
}
