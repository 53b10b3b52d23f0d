/* Cluster defaults and NVLink partitions on the real spec loader and the real cost model:
 * - a cluster written from a paper (GPU, GPUs per node, NVLink bandwidth, NIC speed and count)
 *   gets every other figure from its GPU and NIC generation, older papers' too (V100, EDR
 *   InfiniBand inferred from 100 Gbit/s, Omni-Path and 100 GbE named, 25 GbE inferred); spec_cluster_defaults() names
 *   each one, and the canonical JSON carries the values and re-parses to the same cluster;
 * - paper specs of dgx-a100, dgx-h100, dgx-b200 and gb200-nvl72 predict exactly what the
 *   presets predict (the generation defaults are the presets' figures);
 * - regression pins (not validation): six presets' predictions (dgx-a100, h100-nvl256,
 *   gb200-nvl72, dgx-h100, tpu-v4-torus, p3.16xlarge) as last regenerated, to 1e-9: a change
 *   that moves them must regenerate them on purpose (the command is at regression_pins);
 * - GB200 NVL72 jobs of 128, 256 and 512 GPUs run in derived 64-GPU partitions; a given
 *   nvlink.domain_gpus_used and a (hypothetical) 64-GPU domain predict exactly the same;
 *   TP and EP groups stay on NVLink inside a partition, DP groups cross partitions over the
 *   network; resizing re-derives a derived partition and keeps a given one. */
#include <stdlib.h>

#include "check.h"
#include "podplan/cm.h"
#include "podplan/spec.h"

static spec_cluster load(const char *arg, int gpus) {
  spec_cluster c;
  pp_err err = {0};
  if (spec_cluster_load(arg, gpus, &c, &err)) {
    fprintf(stderr, "%s\n", err.msg);
    abort();
  }
  return c;
}

/* iter_time_s of a plan on a cluster (the cost model, default parameters). */
static double predict(const char *model, const spec_cluster *c, const char *plan) {
  spec_model m;
  spec_plan p;
  cm_model *cm = NULL;
  cm_result r;
  pp_err err = {0};
  memset(&p, 0, sizeof p);
  int rc = spec_model_load(model, &m, &err) || spec_plan_parse(plan, &p, &err) ||
           spec_plan_resolve(&p, &m, c, &err) || cm_model_create(&m, c, NULL, &cm, &err) ||
           cm_eval(cm, &p, &r, &err);
  if (rc) fprintf(stderr, "%s on %s: %s\n", plan, c->name, err.msg);
  CHECK_EQ(rc, 0);
  cm_model_destroy(cm);
  spec_plan_clear(&p);
  return rc ? -1 : r.iter_time_s;
}

static int has_default(const spec_cluster *c, const char *field, double *value,
                       const char **from) {
  spec_default_info d[SPEC_NDEFS];
  int n = spec_cluster_defaults(c, d, SPEC_NDEFS);
  for (int i = 0; i < n; i++)
    if (strcmp(d[i].field, field) == 0) {
      *value = d[i].value;
      *from = d[i].from;
      CHECK(d[i].source && strlen(d[i].source) > 10);
      return 1;
    }
  return 0;
}

static void paper_specs(void) {
  /* H100, 8 per node, 200G NICs: HDR defaults (QM8700, 40 ports), NVLS on Hopper */
  spec_cluster c = load("{\"name\":\"paper\",\"gpu\":\"h100-sxm\",\"gpus\":512,\"gpus_per_node\":8,"
                        "\"nvlink\":{\"domain_gpus\":8,\"gbps_per_gpu\":450},"
                        "\"network\":{\"kind\":\"fat-tree\",\"nic_gbps\":200,\"nics_per_node\":8}}",
                        0);
  CHECK_NEAR(c.nvlink.latency_us, 0.6, 1e-12);
  CHECK_EQ(c.nvlink.in_network_reduce, 1);
  CHECK_NEAR(c.network.latency_us, 2.7, 1e-12);
  CHECK_EQ(c.network.switch_radix, 40);
  CHECK_EQ(c.network.in_network_reduce, 0);
  double v;
  const char *from;
  CHECK(has_default(&c, "nvlink.latency_us", &v, &from) && v == 0.6);
  CHECK_CONTAINS(from, "Hopper H100");
  CHECK(has_default(&c, "network.switch_radix", &v, &from) && v == 40);
  CHECK_CONTAINS(from, "HDR");
  CHECK(!has_default(&c, "nvlink.gbps_per_gpu", &v, &from));
  CHECK(!has_default(&c, "nvlink.taper", &v, &from)); /* one node per domain: no taper */
  /* stored as resolved: the canonical JSON has every figure and re-reads with no defaults */
  char *j = spec_cluster_json(&c);
  CHECK_CONTAINS(j, "\"switch_radix\":40");
  spec_cluster r;
  pp_err err = {0};
  CHECK_EQ(spec_cluster_parse(j, strlen(j), "canon", 0, &r, &err), PP_OK);
  CHECK_EQ(r.defaulted, 0u);
  char *j2 = spec_cluster_json(&r);
  CHECK_STREQ(j, j2);
  free(j), free(j2);

  /* each NIC generation's radix; A100 has no NVLS; a named nic gives the speed */
  const struct {
    const char *gpu, *net;
    int radix, nvls;
    double gbit;
  } gens[] = {
      {"a100-80g", "\"nic_gbps\":200", 40, 0, 200},  {"h200", "\"nic_gbps\":400", 64, 1, 400},
      {"b200", "\"nic_gbps\":800", 144, 1, 800},      {"gb200", "\"nic\":\"xdr\"", 144, 1, 800},
      {"h100-sxm", "\"nic\":\"roce-400g\"", 128, 1, 400},
      /* older papers' clusters: EDR (inferred from 100), Omni-Path, 100 and 25 GbE, V100 */
      {"v100-16g", "\"nic_gbps\":100", 36, 0, 100}, {"v100-16g", "\"nic\":\"opa-100\"", 48, 0, 100},
      {"a100-40g", "\"nic\":\"roce-100g\"", 32, 0, 100}, {"v100-16g", "\"nic_gbps\":25", 48, 0, 25},
  };
  for (size_t i = 0; i < sizeof gens / sizeof gens[0]; i++) {
    char js[512];
    snprintf(js, sizeof js,
             "{\"name\":\"g\",\"gpu\":\"%s\",\"gpus\":64,\"gpus_per_node\":8,"
             "\"nvlink\":{\"domain_gpus\":8,\"gbps_per_gpu\":300},"
             "\"network\":{\"kind\":\"fat-tree\",%s,\"nics_per_node\":8}}",
             gens[i].gpu, gens[i].net);
    spec_cluster g = load(js, 0);
    CHECK_EQ(g.network.switch_radix, gens[i].radix);
    CHECK_EQ(g.nvlink.in_network_reduce, gens[i].nvls);
    CHECK_NEAR(g.network.nic_gbps, gens[i].gbit, 1e-12);
    CHECK_NEAR(g.nvlink.latency_us, 0.6, 1e-12);
    CHECK_NEAR(g.network.latency_us, 2.7, 1e-12);
  }
  /* a figure the spec gives is never replaced */
  spec_cluster given = load("{\"name\":\"g\",\"gpu\":\"h100-sxm\",\"gpus\":64,\"gpus_per_node\":8,"
                            "\"nvlink\":{\"domain_gpus\":8,\"gbps_per_gpu\":450,\"latency_us\":1.5,"
                            "\"in_network_reduce\":false},\"network\":{\"kind\":\"fat-tree\","
                            "\"nic_gbps\":400,\"nics_per_node\":8,\"switch_radix\":32}}",
                            0);
  CHECK_NEAR(given.nvlink.latency_us, 1.5, 1e-12);
  CHECK_EQ(given.nvlink.in_network_reduce, 0);
  CHECK_EQ(given.network.switch_radix, 32);
  CHECK(!has_default(&given, "network.switch_radix", &v, &from));
  /* presets were written with every figure: nothing defaulted */
  for (size_t i = 0; i < spec_cluster_preset_count(); i++)
    CHECK_EQ(spec_cluster_preset(i)->defaulted, 0u);
}

/* Paper specs of four presets: only GPU, node, NVLink bandwidth, NIC speed and count, rails. */
static void paper_equals_preset(void) {
  const struct {
    const char *preset, *json, *model, *plan;
    int gpus;
  } cases[] = {
      {"dgx-a100",
       "{\"name\":\"a\",\"gpu\":\"a100-80g\",\"gpus\":64,\"gpus_per_node\":8,"
       "\"nvlink\":{\"domain_gpus\":8,\"gbps_per_gpu\":300},\"network\":{\"kind\":\"fat-tree\","
       "\"rail_optimized\":true,\"nic_gbps\":200,\"nics_per_node\":8}}",
       "gpt3-175b", "tp=8,pp=16,mbs=1,gbs=1536,sp=1,recompute=selective,zero=1", 2048},
      {"dgx-h100",
       "{\"name\":\"h\",\"gpu\":\"h100-sxm\",\"gpus\":64,\"gpus_per_node\":8,"
       "\"nvlink\":{\"domain_gpus\":8,\"gbps_per_gpu\":450},\"network\":{\"kind\":\"fat-tree\","
       "\"rail_optimized\":true,\"nic_gbps\":400,\"nics_per_node\":8}}",
       "llama3-70b", "tp=8,pp=4,vpp=5,mbs=1,gbs=512,sp=1,zero=1", 512},
      {"dgx-b200",
       "{\"name\":\"b\",\"gpu\":\"b200\",\"gpus\":64,\"gpus_per_node\":8,"
       "\"nvlink\":{\"domain_gpus\":8,\"gbps_per_gpu\":900},\"network\":{\"kind\":\"fat-tree\","
       "\"rail_optimized\":true,\"nic\":\"ndr\",\"nics_per_node\":8}}",
       "mixtral-8x7b", "tp=2,ep=8,pp=2,mbs=1,gbs=256,sp=1,zero=1", 128},
      {"gb200-nvl72",
       "{\"name\":\"g\",\"gpu\":\"gb200\",\"gpus\":72,\"gpus_per_node\":4,"
       "\"nvlink\":{\"domain_gpus\":72,\"gbps_per_gpu\":900},\"network\":{\"kind\":\"fat-tree\","
       "\"rail_optimized\":true,\"nic_gbps\":400,\"nics_per_node\":4}}",
       "llama3-70b", "tp=4,pp=4,mbs=1,gbs=288,zero=1", 288},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    spec_cluster pre = load(cases[i].preset, cases[i].gpus);
    spec_cluster pap = load(cases[i].json, cases[i].gpus);
    CHECK(pap.defaulted != 0u);
    double a = predict(cases[i].model, &pre, cases[i].plan);
    double b = predict(cases[i].model, &pap, cases[i].plan);
    if (a != b) fprintf(stderr, "%s: preset %.17g, paper spec %.17g\n", cases[i].preset, a, b);
    CHECK(a > 0 && a == b);
  }
}

/* Regression pins, not validation: what the cost model predicted for these plans when last
 * regenerated (when each pipeline stage came to pay its own two boundaries' p2p), so that a
 * prediction that moves is seen. How close the model is to real runs is checked against
 * published runs (test_study, test_published_fit), not here. Regenerate only for a deliberate
 * cost-model change, with each row's
 *   build/cli/podplan predict --model M --cluster C --gpus N --plan P --json
 * (its iter_time_s, 10 significant digits). */
static void regression_pins(void) {
  const struct {
    const char *model, *cluster;
    int gpus;
    const char *plan;
    double iter_time_s;
  } pins[] = {
      {"gpt3-175b", "dgx-a100", 1024, "tp=8,pp=16,mbs=1,gbs=1536,sp=1,recompute=selective,zero=1",
       19.85945472},
      {"llama3-405b", "h100-nvl256", 1024, "tp=8,pp=8,cp=2,vpp=2,gbs=1536,sp=1", 54.63044253},
      {"llama3-70b", "gb200-nvl72", 144, "tp=4,pp=4,mbs=1,gbs=288,zero=1", 6.083566716},
      {"mixtral-8x7b", "dgx-h100", 128, "tp=2,ep=8,pp=2,mbs=1,gbs=256,sp=1,zero=1", 1.542230125},
      {"gpt3-13b", "tpu-v4-torus", 64, "tp=4,pp=4,mbs=1,gbs=64", 1.585493566},
      {"gpt-15b", "p3.16xlarge", 32, "tp=4,pp=2,mbs=2,gbs=128", 22.4312808},
  };
  for (size_t i = 0; i < sizeof pins / sizeof pins[0]; i++) {
    spec_cluster c = load(pins[i].cluster, pins[i].gpus);
    double t = predict(pins[i].model, &c, pins[i].plan);
    if (fabs(t / pins[i].iter_time_s - 1) > 1e-9)
      fprintf(stderr, "regression pin: %s on %s: %.10g s, pinned %.10g s\n", pins[i].model,
              pins[i].cluster, t, pins[i].iter_time_s);
    CHECK_NEAR(t, pins[i].iter_time_s, 1e-9);
  }
}

static void partitions(void) {
  /* derived: 64 per domain for 128, 256, 512; whole domains for 72 and 144 */
  const int sizes[][3] = {{128, 64, 2}, {256, 64, 4}, {512, 64, 8}, {72, 72, 1}, {144, 72, 2},
                          {64, 72, 1}};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    spec_cluster c = load("gb200-nvl72", sizes[i][0]);
    CHECK_EQ(c.nvlink.domain_gpus, sizes[i][1]);
    CHECK_EQ(spec_cluster_domains(&c), sizes[i][2]);
    CHECK_EQ(spec_cluster_domain_hw(&c), 72);
    char text[256];
    CHECK_EQ(spec_cluster_partition_text(&c, text, sizeof text), sizes[i][1] != 72);
  }
  /* resizing re-derives; a given partition stays, and must divide the new size */
  spec_cluster c = load("gb200-nvl72", 128);
  pp_err err = {0};
  CHECK_EQ(spec_cluster_resize(&c, 144, &err), PP_OK);
  CHECK_EQ(c.nvlink.domain_gpus, 72);
  CHECK_EQ(c.nvlink.domain_gpus_hw, 0);
  const char *given = "{\"name\":\"p\",\"gpu\":\"gb200\",\"gpus\":128,\"gpus_per_node\":4,"
                      "\"nvlink\":{\"domain_gpus\":72,\"gbps_per_gpu\":900,"
                      "\"domain_gpus_used\":32},\"network\":{\"kind\":\"fat-tree\","
                      "\"rail_optimized\":true,\"nic_gbps\":400,\"nics_per_node\":4}}";
  spec_cluster g = load(given, 0);
  CHECK_EQ(g.nvlink.domain_gpus, 32);
  CHECK_EQ(spec_cluster_domains(&g), 4);
  CHECK_EQ(spec_cluster_resize(&g, 64, &err), PP_OK);
  CHECK_EQ(g.nvlink.domain_gpus, 32);
  CHECK_EQ(spec_cluster_resize(&g, 96, &err), PP_OK);
  CHECK_EQ(spec_cluster_resize(&g, 72, &err), PP_INPUT);
  CHECK_CONTAINS(err.msg, "nvlink.domain_gpus_used: 72 GPUs exceed one NVLink domain partition of 32");
  /* canonical JSON: physical domain and partition, round trip */
  spec_cluster d = load("gb200-nvl72", 256);
  char *j = spec_cluster_json(&d);
  CHECK_CONTAINS(j, "\"domain_gpus\":72,\"domain_gpus_used\":64");
  spec_cluster r;
  CHECK_EQ(spec_cluster_parse(j, strlen(j), "canon", 0, &r, &err), PP_OK);
  char *j2 = spec_cluster_json(&r);
  CHECK_STREQ(j, j2);
  free(j), free(j2);
}

/* A 128-GPU MoE job on GB200 NVL72: tp=4, ep=8 inside a 64-GPU partition, dp=32 across. */
static void partition_placement(void) {
  const char *model = "mixtral-8x7b", *plan = "tp=4,ep=8,mbs=1,gbs=256,zero=1";
  spec_cluster derived = load("gb200-nvl72", 128);
  spec_cluster given = load("{\"name\":\"gb200-nvl72\",\"gpu\":\"gb200\",\"gpus\":128,"
                            "\"gpus_per_node\":4,\"nvlink\":{\"domain_gpus\":72,"
                            "\"domain_gpus_used\":64,\"gbps_per_gpu\":900,\"latency_us\":0.6,"
                            "\"in_network_reduce\":true},\"network\":{\"kind\":\"fat-tree\","
                            "\"rail_optimized\":true,\"nic_gbps\":400,\"nics_per_node\":4,"
                            "\"latency_us\":2.7,\"switch_radix\":64}}",
                            0);
  spec_cluster nvl64 = load("{\"name\":\"gb200-nvl72\",\"gpu\":\"gb200\",\"gpus\":128,"
                            "\"gpus_per_node\":4,\"nvlink\":{\"domain_gpus\":64,"
                            "\"gbps_per_gpu\":900,\"latency_us\":0.6,\"in_network_reduce\":true},"
                            "\"network\":{\"kind\":\"fat-tree\",\"rail_optimized\":true,"
                            "\"nic_gbps\":400,\"nics_per_node\":4,\"latency_us\":2.7,"
                            "\"switch_radix\":64}}",
                            0);
  double t_derived = predict(model, &derived, plan), t_given = predict(model, &given, plan);
  double t_64 = predict(model, &nvl64, plan);
  CHECK(t_derived > 0);
  CHECK(t_derived == t_given);
  CHECK(t_derived == t_64);

  /* the groups: EP members in one partition, DP members in both; GPU g is in partition g/64 */
  spec_model m;
  spec_plan p;
  spec_layout l;
  pp_err err = {0};
  memset(&p, 0, sizeof p);
  CHECK_EQ(spec_model_load(model, &m, &err) || spec_plan_parse(plan, &p, &err) ||
               spec_plan_resolve(&p, &m, &derived, &err) ||
               spec_layout_build(&p, &m, derived.gpus, &l, &err),
           0);
  int ep = 0, dp = 0;
  for (int i = 0; i < l.ngroups; i++) {
    const spec_group *g = &l.groups[i];
    int lo = g->gpus[0] / 64, hi = lo;
    for (int k = 0; k < g->n; k++) {
      lo = g->gpus[k] / 64 < lo ? g->gpus[k] / 64 : lo;
      hi = g->gpus[k] / 64 > hi ? g->gpus[k] / 64 : hi;
    }
    if (g->kind == SPEC_GRP_TP || g->kind == SPEC_GRP_EP) CHECK_EQ(hi - lo, 0);
    if (g->kind == SPEC_GRP_DP) CHECK_EQ(hi - lo, 1);
    ep += g->kind == SPEC_GRP_EP, dp += g->kind == SPEC_GRP_DP;
  }
  CHECK_EQ(ep, 16);
  CHECK_EQ(dp, 4);
  spec_layout_free(&l);

  /* the cost model's placement of those groups: TP and EP on NVLink, DP over the network */
  cm_model *cm = NULL, *whole = NULL;
  CHECK_EQ(cm_model_create(&m, &derived, NULL, &cm, &err), PP_OK);
  spec_grp_rule rules[SPEC_NGRPS];
  spec_grp_rules(p.tp, p.cp, p.dp, p.ep, rules);
  const unsigned NVL = 1u << CM_LVL_NVLINK, UP = 1u << CM_LVL_NVLINK_UP, NET = 1u << CM_LVL_NET;
  cm_place pl;
  cm_place_group(cm, rules[SPEC_GRP_TP].count, rules[SPEC_GRP_TP].stride, &pl);
  CHECK_EQ(pl.levels, NVL);
  cm_place_group(cm, rules[SPEC_GRP_EP].count, rules[SPEC_GRP_EP].stride, &pl);
  CHECK_EQ(pl.levels, UP);
  CHECK_EQ(pl.domains, 1);
  cm_place_group(cm, rules[SPEC_GRP_DP].count, rules[SPEC_GRP_DP].stride, &pl);
  CHECK(pl.levels & NET);
  CHECK_EQ(pl.domains, 2);
  CHECK_EQ(pl.per_domain, 16);
  /* GPUs 0 and 64: the network between partitions; inside one 72-GPU domain at 144 GPUs */
  const int pair[2] = {0, 64};
  cm_place_list(cm, pair, 2, &pl);
  CHECK(pl.levels & NET);
  spec_cluster c144 = load("gb200-nvl72", 144);
  CHECK_EQ(cm_model_create(&m, &c144, NULL, &whole, &err), PP_OK);
  cm_place_list(whole, pair, 2, &pl);
  CHECK(!(pl.levels & NET));
  CHECK_EQ(pl.levels, UP);
  cm_model_destroy(cm);
  cm_model_destroy(whole);
  spec_plan_clear(&p);
}

int main(void) {
  paper_specs();
  paper_equals_preset();
  regression_pins();
  partitions();
  partition_placement();
  return check_status();
}
