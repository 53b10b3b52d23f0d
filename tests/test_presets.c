/* Every preset loads, validates and round-trips through its canonical JSON; parameter counts
 * match the published sizes; clusters take exactly the sizes their fabric allows; the GPU
 * presets load and validate, the 7 taken from benchmarks/data/hardware.csv (argv[1]) carry its
 * figures exactly, and an unknown one is refused by name; the spec hash is FNV-1a 64 (its
 * published test vectors). */
#include <stdlib.h>

#include "check.h"
#include "podplan/spec.h"
#include "study_int.h"

/* Published sizes (billions) and how many significant digits were printed. */
static const struct {
  const char *name;
  double params_b, active_b;
  int digits;
} published[] = {
    {"gpt3-1.3b", 1.3, 1.3, 2},        /* Brown et al. 2020 */
    {"gpt3-2.6b", 2.6, 2.6, 2},        /* Alpa's name for the 2.7B shape */
    {"gpt3-6.7b", 6.7, 6.7, 2},        /* Brown et al. 2020 */
    {"gpt3-13b", 13, 13, 2},           /* Brown et al. 2020 */
    {"gpt3-39b", 39.1, 39.1, 3},       /* Narayanan et al. SC'21 Table 1 */
    {"gpt3-175b", 174.6, 174.6, 4},    /* Narayanan et al. SC'21 Table 2 */
    {"opt-175b", 175, 175, 3},         /* Zhang et al. 2022 */
    {"megatron-1t", 1008.0, 1008.0, 5},/* Narayanan et al. SC'21 Table 1 */
    {"llama3-8b", 8.03, 8.03, 3},      /* Hugging Face model card (8.03B) */
    {"llama3-70b", 70.6, 70.6, 3},     /* Hugging Face model card (70.6B) */
    {"llama3-405b", 405, 405, 3},      /* Llama Team 2024 */
    {"mixtral-8x7b", 46.7, 12.9, 3},   /* Jiang et al. 2024: 46.7B total, 12.9B active */
    {"mixtral-8x22b", 141, 39, 3},     /* Mistral AI 2024: 141B total, 39B active */
    {"gpt-15b", 15, 15, 2},            /* Alpa OSDI'22 Table 4 ("15B") */
    {"gpt-39b-alpa", 39, 39, 2},       /* Alpa OSDI'22 Table 4 ("39B") */
};

/* within 1%, or equal at the precision the source printed */
static int matches(double got, double pub, int digits) {
  if (fabs(got - pub) <= 0.01 * pub) return 1;
  double mag = pow(10, floor(log10(pub)) - digits + 1);
  return fabs(round(got / mag) * mag - pub) < mag * 1e-6;
}

static void models(void) {
  CHECK_EQ(spec_model_preset_count(), 15);
  for (size_t i = 0; i < spec_model_preset_count(); i++) {
    const spec_model *m = spec_model_preset(i);
    pp_err err = {0};
    CHECK_EQ(spec_model_validate(m, &err), PP_OK);
    CHECK(spec_model_preset_source(i) && strlen(spec_model_preset_source(i)) > 10);
    spec_model l, r;
    CHECK_EQ(spec_model_load(m->name, &l, &err), PP_OK);
    CHECK(memcmp(&l, m, sizeof l) == 0);
    char *j = spec_model_json(m);
    CHECK_EQ(spec_model_parse(j, strlen(j), "canon", &r, &err), PP_OK);
    char *j2 = spec_model_json(&r);
    CHECK_STREQ(j, j2);
    /* inline JSON loads like a file */
    CHECK_EQ(spec_model_load(j, &r, &err), PP_OK);
    free(j);
    free(j2);
    int found = 0;
    for (size_t k = 0; k < sizeof published / sizeof published[0]; k++) {
      if (strcmp(published[k].name, m->name)) continue;
      found = 1;
      double p = spec_model_params(m) / 1e9, a = spec_model_active_params(m) / 1e9;
      if (!matches(p, published[k].params_b, published[k].digits) ||
          !matches(a, published[k].active_b, 2))
        fprintf(stderr, "%s: %.4fB (%.4fB active), published %gB (%gB)\n", m->name, p, a,
                published[k].params_b, published[k].active_b);
      CHECK(matches(p, published[k].params_b, published[k].digits));
      CHECK(matches(a, published[k].active_b, 2));
    }
    CHECK(found);
  }
}

static void gpus(void) {
  const char *want[] = {"a100-40g", "a100-80g", "h100-sxm", "h200", "b200", "gb200", "v100-16g"};
  for (size_t k = 0; k < 7; k++) {
    spec_gpu g;
    pp_err err = {0};
    CHECK_EQ(spec_gpu_load(want[k], &g, &err), PP_OK);
    CHECK_EQ(spec_gpu_validate(&g, &err), PP_OK);
    CHECK(g.bf16_tflops > 0 && g.hbm_gib > 0 && g.hbm_tbps > 0);
  }
  spec_gpu g;
  pp_err err = {0};
  CHECK_EQ(spec_gpu_load("h300", &g, &err), PP_NOTFOUND);
  CHECK_CONTAINS(err.msg, "unknown preset 'h300'");
}

/* A number of hardware.csv (an empty field is 0: no fp8 on the part). */
static double csv_num(const study__csv *c, int row, const char *col) {
  int k = study__csv_col(c, col);
  CHECK(k >= 0);
  return k < 0 ? NAN : atof(c->rows[row][k]);
}

/* Every GPU preset whose source names a row of benchmarks/data/hardware.csv (the published
 * hardware facts, each with its source) carries that row's dense bf16 and fp8 TFLOP/s, HBM
 * capacity (GB as printed) and HBM bandwidth exactly; the row is the one whose item starts
 * with the name the source quotes. All but the V100 and the CPU core name one. */
static void gpus_vs_hardware_csv(const char *path) {
  study__csv c;
  pp_err err = {0};
  if (study__csv_load(path, NULL, 0, path, &c, &err)) {
    fprintf(stderr, "%s\n", err.msg);
    CHECK(0);
    return;
  }
  int compared = 0;
  for (size_t i = 0; i < spec_gpu_preset_count(); i++) {
    const spec_gpu *g = spec_gpu_preset(i);
    const char *src = spec_gpu_preset_source(i), *q;
    if (strncmp(src, "hardware.csv '", 14) || !(q = strchr(src + 14, '\''))) continue;
    size_t len = (size_t)(q - (src + 14));
    int row = -1;
    for (int r = 0; r < c.nrows && row < 0; r++) {
      const char *item = c.rows[r][0];
      if (!strncmp(item, src + 14, len) && (item[len] == '\0' || item[len] == ' ')) row = r;
    }
    if (row < 0) fprintf(stderr, "%s: no row %.*s in %s\n", g->name, (int)len, src + 14, path);
    CHECK(row >= 0);
    if (row < 0) continue;
    CHECK_DEQ(g->bf16_tflops, csv_num(&c, row, "bf16_dense_tflops"));
    CHECK_DEQ(g->fp8_tflops, csv_num(&c, row, "fp8_dense_tflops"));
    CHECK_DEQ(g->hbm_gib, csv_num(&c, row, "hbm_capacity_gb"));
    CHECK_DEQ(g->hbm_tbps, csv_num(&c, row, "hbm_bandwidth_tb_s"));
    compared++;
  }
  CHECK_EQ(compared, 7);
  study__csv_free(&c);
}

typedef struct size_case {
  const char *cluster;
  int gpus;
  int ok;
  int nodes, domains;     /* when ok */
  int dims[3];            /* torus shape when ok */
  const char *expect;     /* message when not ok */
} size_case;

static const size_case sizes[] = {
    {"dgx-h100", 1, 1, 1, 1},
    {"dgx-h100", 4, 1, 1, 1},
    {"dgx-h100", 8, 1, 1, 1},
    {"dgx-h100", 1024, 1, 128, 128},
    {"dgx-h100", 3, 0, 0, 0, {0}, "must divide gpus_per_node 8"},
    {"dgx-h100", 12, 0, 0, 0, {0}, "12 is not a multiple of gpus_per_node 8"},
    {"dgx-a100", 4096, 1, 512, 512},
    {"h100-nvl256", 8, 1, 1, 1},
    {"h100-nvl256", 64, 1, 8, 1},
    {"h100-nvl256", 256, 1, 32, 1},
    {"h100-nvl256", 1024, 1, 128, 4},
    {"h100-nvl256", 384, 1, 48, 2},     /* two 192-GPU partitions of the 256-GPU domains */
    {"gb200-nvl72", 2, 1, 1, 1},
    {"gb200-nvl72", 72, 1, 18, 1},
    {"gb200-nvl72", 576, 1, 144, 8},
    {"gb200-nvl72", 100, 1, 25, 5},     /* five 20-GPU partitions */
    {"gb200-nvl72", 128, 1, 32, 2},     /* 64-GPU partitions (16 of 18 trays) */
    {"gb200-nvl72", 512, 1, 128, 8},
    {"gb200-nvl72", 70, 0, 0, 0, {0}, "70 is not a multiple of gpus_per_node 4"},
    {"tpu-v4-torus", 4, 1, 1, 4, {1, 2, 2}},
    {"tpu-v4-torus", 32, 1, 8, 32, {2, 4, 4}},
    {"tpu-v4-torus", 64, 1, 16, 64, {4, 4, 4}},
    {"tpu-v4-torus", 128, 1, 32, 128, {4, 4, 8}},
    {"tpu-v4-torus", 192, 1, 48, 192, {4, 4, 12}},
    {"tpu-v4-torus", 4096, 1, 1024, 4096, {16, 16, 16}},
    {"tpu-v4-torus", 96, 0, 0, 0, {0}, "96 chips form no torus slice"},
    {"dgx-h100", 0, 0, 0, 0, {0}, "gpus: must be 1.."},
    {"p3.16xlarge", 32, 1, 4, 4},      /* Alpa's GPT-15B run */
    {"p3.16xlarge", 64, 1, 8, 8},      /* Alpa's GPT-39B run */
};

static void clusters(void) {
  CHECK_EQ(spec_cluster_preset_count(), 8);
  for (size_t i = 0; i < spec_cluster_preset_count(); i++) {
    const spec_cluster *c = spec_cluster_preset(i);
    pp_err err = {0};
    CHECK_EQ(spec_cluster_validate(c, &err), PP_OK);
    char *j = spec_cluster_json(c);
    spec_cluster r;
    CHECK_EQ(spec_cluster_parse(j, strlen(j), "canon", 0, &r, &err), PP_OK);
    char *j2 = spec_cluster_json(&r);
    CHECK_STREQ(j, j2);
    free(j);
    free(j2);
  }
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    const size_case *s = &sizes[i];
    spec_cluster c;
    pp_err err = {0};
    int rc = spec_cluster_load(s->cluster, 0, &c, &err);
    CHECK_EQ(rc, PP_OK);
    rc = spec_cluster_resize(&c, s->gpus, &err);
    if (s->ok) {
      if (rc) fprintf(stderr, "%s at %d: %s\n", s->cluster, s->gpus, err.msg);
      CHECK_EQ(rc, PP_OK);
      CHECK_EQ(spec_cluster_nodes(&c), s->nodes);
      CHECK_EQ(spec_cluster_domains(&c), s->domains);
      if (s->dims[0])
        for (int d = 0; d < 3; d++) CHECK_EQ(c.network.dims[d], s->dims[d]);
    } else {
      CHECK_EQ(rc, PP_INPUT);
      CHECK_CONTAINS(err.msg, s->expect);
    }
  }
  /* loading with --gpus resizes the same way */
  spec_cluster c;
  pp_err err = {0};
  CHECK_EQ(spec_cluster_load("h100-nvl256", 512, &c, &err), PP_OK);
  CHECK_EQ(c.gpus, 512);
  CHECK_EQ(spec_cluster_load("h100-nvl256", 384, &c, &err), PP_OK);
  CHECK_EQ(c.nvlink.domain_gpus, 192);
  CHECK_EQ(c.nvlink.domain_gpus_hw, 256);
}

static void hash(void) {
  /* FNV-1a 64 test vectors (Fowler, Noll, Vo) */
  char h[SPEC_HASH_LEN];
  spec_hash("", h);
  CHECK_STREQ(h, "cbf29ce484222325");
  spec_hash("a", h);
  CHECK_STREQ(h, "af63dc4c8601ec8c");
  spec_hash("foobar", h);
  CHECK_STREQ(h, "85944171f73967e8");
}

int main(int argc, char **argv) {
  if (argc < 2) return 2;
  models();
  gpus();
  gpus_vs_hardware_csv(argv[1]);
  clusters();
  hash();
  return check_status();
}
