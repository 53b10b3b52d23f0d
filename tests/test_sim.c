/* The simulated iteration on real SimGrid runs: where no two groups share a link it matches
 * the cost model within 3% (11 plans on 6 fabrics, one without NVLink); a non-uniform plan laid
 * out like a uniform one simulates like it; collective jobs that move nothing are refused;
 * `podplan simulate` with a bad trace or platform path, fidelity or cluster file fails in one
 * line with exit status 2, and a good run writes a Perfetto trace, the platform XML and its
 * score; a plan lowering to more operations than sim_opts.max_ops (100) and a time limit of
 * 0.1 ms are refused with PP_LIMIT. The collectives themselves (fast against step, hand-computed contention) are tested
 * in test_sim_coll.c. */
#include <stdlib.h>
#include <unistd.h>

#include "check.h"
#include "podplan/sim.h"
#include "simtest.h"
#include "testutil.h"

/* Where no two groups share a link, an iteration simulates to the cost model's time. */
static void agreement(void) {
  struct {
    const char *model, *cluster;
    int gpus;
    const char *plan;
  } cases[] = {
      {"gpt3-1.3b", "dgx-h100", 16, "tp=2,pp=2,mbs=2,gbs=64"},
      {"gpt3-1.3b", "dgx-h100", 16, "tp=8,pp=2,mbs=1,gbs=64"},
      {"gpt3-6.7b", "dgx-a100", 64, "tp=8,pp=4,mbs=1,gbs=128,sp=1,recompute=selective"},
      {"gpt3-6.7b", "dgx-a100", 64, "tp=4,pp=4,vpp=2,mbs=1,gbs=128,zero=1"},
      {"llama3-8b", "h100-nvl256", 64, "tp=8,mbs=1,gbs=64,zero=1,sp=1"},
      {"gpt3-13b", "dgx-h100", 64, "tp=8,pp=8,mbs=1,gbs=256,schedule=gpipe"},
      {"mixtral-8x7b", "dgx-h100", 64, "tp=2,pp=4,ep=8,mbs=1,gbs=128,sp=1"},
      {"gpt3-13b", "tpu-v4-torus", 64, "tp=4,pp=4,mbs=1,gbs=64"},
      {"llama3-8b", "dgx-h100", 32, "tp=4,cp=2,mbs=1,gbs=32,sp=1"},
      {"llama3-8b", "gb200-nvl72", 72, "tp=4,pp=2,mbs=1,gbs=72,zero=1"},
      {"gpt3-1.3b", NULL, 16, "tp=8,mbs=1,gbs=16"}, /* nodes without NVLink: below */
  };
  /* GPUs without NVLink: a TP group inside a node talks through the GPUs' own NICs */
  char *dir = tu_tmpdir("agree");
  const char *nonvl = "{\"name\":\"pcie-nodes\",\"gpu\":\"h100-sxm\",\"gpus\":16,"
                      "\"gpus_per_node\":8,\"network\":{\"kind\":\"fat-tree\","
                      "\"nic_gbps\":400,\"nics_per_node\":8,\"latency_us\":3}}";
  char *nonvl_path = tu_write(dir, "pcie.json", nonvl, strlen(nonvl));
  cases[sizeof cases / sizeof cases[0] - 1].cluster = nonvl_path;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    spec_model m;
    spec_cluster c;
    spec_plan p;
    pp_err err = {0};
    cm_model *cm = NULL;
    cm_result pr;
    sim_result sr;
    int rc = spec_model_load(cases[i].model, &m, &err) ||
             spec_cluster_load(cases[i].cluster, cases[i].gpus, &c, &err) ||
             spec_plan_parse(cases[i].plan, &p, &err) || spec_plan_resolve(&p, &m, &c, &err) ||
             cm_model_create(&m, &c, NULL, &cm, &err) || cm_eval(cm, &p, &pr, &err) ||
             sim_run(cm, &p, NULL, &sr, &err);
    if (rc) fprintf(stderr, "%s: %s\n", cases[i].plan, err.msg);
    CHECK_EQ(rc, 0);
    if (!rc) {
      if (fabs(sr.iter_time_s / pr.iter_time_s - 1) > 0.03)
        fprintf(stderr, "%s %s %s: sim %.4f cm %.4f\n", cases[i].model, cases[i].cluster,
                cases[i].plan, sr.iter_time_s, pr.iter_time_s);
      CHECK_NEAR(sr.iter_time_s, pr.iter_time_s, 0.03);
      CHECK_EQ(sr.ranks, c.gpus);
      CHECK(sr.messages > 0);
      sim_result_clear(&sr);
    }
    cm_model_destroy(cm);
    spec_plan_clear(&p);
  }
  free(nonvl_path);
  tu_rmtree(dir);
  free(dir);
}

static void bad_input(const char *bin) {
  char *dir = tu_tmpdir("sim");
  char *trace = tu_path(dir, "no/such/dir/t.json"), *plat = tu_path(dir, "no/such/p.xml");
  char *ok_trace = tu_path(dir, "t.json");
  tu_run r;
  char *a[] = {(char *)bin, "simulate", "--model", "gpt3-1.3b", "--cluster", "dgx-h100",
               "--gpus", "16", "--plan", "tp=8,pp=2,gbs=32", "--trace", trace, NULL};
  tu_exec(a, &r);
  CHECK_EQ(r.status, 2);
  CHECK_CONTAINS(r.err, "cannot write the trace");
  CHECK_EQ(tu_lines(r.err), 1);
  tu_run_free(&r);
  char *b[] = {(char *)bin, "simulate", "--model", "gpt3-1.3b", "--cluster", "dgx-h100",
               "--gpus", "16", "--plan", "tp=8,pp=2,gbs=32", "--platform-out", plat, NULL};
  tu_exec(b, &r);
  CHECK_EQ(r.status, 2);
  CHECK_CONTAINS(r.err, "cannot write the platform");
  tu_run_free(&r);
  char *c[] = {(char *)bin, "simulate", "--model", "gpt3-1.3b", "--cluster", "dgx-h100",
               "--gpus", "16", "--plan", "tp=8,pp=2,gbs=32", "--fidelity", "exact", NULL};
  tu_exec(c, &r);
  CHECK_EQ(r.status, 2);
  CHECK_CONTAINS(r.err, "--fidelity: 'exact' is not fast or step");
  tu_run_free(&r);
  /* a good run writes a trace Perfetto can load: JSON with a track per GPU */
  char *d[] = {(char *)bin, "simulate", "--model", "gpt3-1.3b", "--cluster", "dgx-h100",
               "--gpus", "16", "--plan", "tp=8,pp=2,gbs=32", "--trace", ok_trace, "--json", NULL};
  tu_exec(d, &r);
  CHECK_EQ(r.status, 0);
  CHECK_CONTAINS(r.out, "\"sim_wall_s\"");
  CHECK_CONTAINS(r.out, "\"link_utilisation\"");
  tu_run_free(&r);
  char *text = tu_read(ok_trace, NULL);
  CHECK_CONTAINS(text, "\"traceEvents\"");
  CHECK_CONTAINS(text, "\"GPU 15\"");
  CHECK_CONTAINS(text, "\"name\":\"forward\"");
  free(text);
  /* a cluster file the spec rejects never reaches SimGrid: one line naming file and field */
  const char *bad_json = "{\"name\":\"mine\",\"gpu\":\"h100-sxm\",\"gpus\":16,\"gpus_per_node\":8,"
                         "\"network\":{\"kind\":\"fat-tree\",\"nic_gbps\":-400}}";
  char *badc = tu_write(dir, "bad-cluster.json", bad_json, strlen(bad_json));
  char *e[] = {(char *)bin, "simulate", "--model", "gpt3-1.3b", "--cluster", badc,
               "--plan", "tp=8,pp=2,gbs=32", NULL};
  tu_exec(e, &r);
  CHECK_EQ(r.status, 2);
  CHECK_CONTAINS(r.err, "bad-cluster.json");
  CHECK_CONTAINS(r.err, "nic_gbps");
  CHECK_EQ(tu_lines(r.err), 1);
  CHECK_STREQ(r.out, "");
  tu_run_free(&r);
  /* --platform-out: a complete XML file and nothing else; --db: the score with source sim */
  char *xml = tu_path(dir, "p.xml"), *part = tu_path(dir, "p.xml.part");
  char *db = tu_path(dir, "sim.db");
  char *g[] = {(char *)bin, "simulate", "--model", "gpt3-1.3b", "--cluster", "dgx-h100",
               "--gpus", "16", "--plan", "tp=8,pp=2,gbs=32", "--platform-out", xml,
               "--db", db, NULL};
  tu_exec(g, &r);
  CHECK_EQ(r.status, 0);
  tu_run_free(&r);
  text = tu_read(xml, NULL);
  CHECK_CONTAINS(text, "<platform version=");
  CHECK_CONTAINS(text, "</platform>");
  free(text);
  CHECK(access(part, F_OK) != 0);
  CHECK_EQ(tu_sql_int(db, "SELECT count(*) FROM scores WHERE source = 'sim' AND feasible = 1 "
                          "AND iter_time_s > 0 AND breakdown_json LIKE '%sim_wall_s%'"), 1);
  /* the same plan again replaces its score rather than adding one */
  tu_exec(g, &r);
  CHECK_EQ(r.status, 0);
  tu_run_free(&r);
  CHECK_EQ(tu_sql_int(db, "SELECT count(*) FROM scores WHERE source = 'sim'"), 1);
  free(badc), free(xml), free(part), free(db);
  free(trace), free(plat), free(ok_trace);
  tu_rmtree(dir);
  free(dir);
}

/* A non-uniform plan laid out like a uniform one simulates like it. */
static void nonuniform(void) {
  spec_model m;
  spec_cluster c = cluster("dgx-h100", 16);
  pp_err err = {0};
  CHECK_EQ(spec_model_load("gpt3-1.3b", &m, &err), PP_OK);
  const char *nu = "{\"gbs\":64,\"microbatches\":32,\"zero\":1,\"stages\":["
                   "{\"layers\":[0,12],\"gpus\":[0,1,2,3,4,5,6,7],\"tp\":4,\"dp\":2},"
                   "{\"layers\":[12,24],\"gpus\":[8,9,10,11,12,13,14,15],\"tp\":4,\"dp\":2}]}";
  spec_plan u, n;
  CHECK_EQ(spec_plan_parse("tp=4,pp=2,dp=2,mbs=1,gbs=64,zero=1", &u, &err), PP_OK);
  CHECK_EQ(spec_plan_parse(nu, &n, &err), PP_OK);
  CHECK_EQ(spec_plan_resolve(&u, &m, &c, &err), PP_OK);
  CHECK_EQ(spec_plan_resolve(&n, &m, &c, &err), PP_OK);
  sim_result ru, rn;
  cm_model *cm = NULL;
  CHECK_EQ(cm_model_create(&m, &c, NULL, &cm, &err), PP_OK);
  CHECK_EQ(sim_run(cm, &u, NULL, &ru, &err), PP_OK);
  CHECK_EQ(sim_run(cm, &n, NULL, &rn, &err), PP_OK);
  cm_model_destroy(cm);
  CHECK_NEAR(rn.iter_time_s, ru.iter_time_s, 1e-3);
  CHECK(ru.iter_time_s > 0);
  sim_result_clear(&ru), sim_result_clear(&rn);
  /* the limits: a program larger than max_ops, a time limit shorter than a run */
  sim_opts small = {.fidelity = SIM_FAST, .max_ops = 100}, brief = {.time_limit_s = 1e-4};
  CHECK_EQ(cm_model_create(&m, &c, NULL, &cm, &err), PP_OK);
  CHECK_EQ(sim_run(cm, &u, &small, &ru, &err), PP_LIMIT);
  CHECK_CONTAINS(err.msg, "more than 100 operations");
  CHECK_EQ(sim_run(cm, &u, &brief, &ru, &err), PP_LIMIT);
  CHECK_CONTAINS(err.msg, "time limit");
  cm_model_destroy(cm);
  spec_plan_clear(&u), spec_plan_clear(&n);
}

/* Collective jobs that move nothing are refused, not simulated as an instant. */
static void no_work(void) {
  spec_cluster c = cluster("dgx-h100", 16);
  pp_err err = {0};
  int g0[] = {0, 1, 2, 3}, g1[] = {5};
  sim_coll_job j[2] = {{.coll = CM_ALL_REDUCE, .algo = CM_ALGO_RING, .bytes = 0, .n = 4, .gpus = g0},
                       {.coll = CM_ALL_REDUCE, .algo = CM_ALGO_RING, .bytes = 1 << 20, .n = 1,
                        .gpus = g1}};
  cm_model *cm = coll_model(&c, NULL);
  CHECK_EQ(sim_collectives(cm, j, 2, SIM_FAST, &err), PP_INPUT);
  CHECK_CONTAINS(err.msg, "move no bytes");
  j[0].bytes = -1;
  CHECK_EQ(sim_collectives(cm, j, 1, SIM_FAST, &err), PP_INPUT);
  CHECK_CONTAINS(err.msg, "job 0");
  CHECK_EQ(sim_collectives(cm, j, 0, SIM_FAST, &err), PP_INPUT);
  cm_model_destroy(cm);
}

int main(int argc, char **argv) {
  nonuniform();
  no_work();
  agreement();
  if (argc > 1) bad_input(argv[1]);
  return check_status();
}
