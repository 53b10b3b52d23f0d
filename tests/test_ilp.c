/* The intra-operator ILP of two-level (search/search_ilp.c), solved by the real CBC, against a
 * brute-force enumeration of the same objective:
 *  - a hand-made graph of 4 operators (2-3 strategies, 5 edges, a cycle), without and with a
 *    memory row that excludes the unconstrained optimum: the same objective, the same choice;
 *    a memory budget nothing fits is refused by both the solver and the enumeration;
 *  - the transformer-layer graph of gpt3-1.3b (gelu) and llama3-8b (swiglu, GQA) on a 1x2 mesh,
 *    a 2x2 mesh with the batch forced onto axis 0 (Alpa's 2-D logical meshes) and an unforced
 *    2x2 mesh, each priced both ways: by the cost model (dgx-h100 GPUs 0-3) and by Alpa's
 *    alpha-beta weights, with and without sequence-split strategies: the same objective value;
 *  - the weights' state on a data axis (Alpa's prefer_reduce_scatter and force_zero_stage_3):
 *    on a (4, 1) mesh of gpt3-1.3b with Alpa's weights, a batch-split matmul costs the
 *    all-reduce of its gradient at zero 0 and 1 (Alpa rewrites it after solving) and two
 *    all-gathers of its weights plus a reduce-scatter at zero 3, by Alpa's published
 *    alpha-beta formulas; its memory is 16 bytes a parameter, 4 + 12/4 and 16/4; with the cost
 *    model's prices over 8 microbatches zero 1 costs less than zero 3, which pays every
 *    microbatch, and CBC and the enumeration agree at every zero;
 *  - the mapping of solutions: Alpa's weights put Megatron's tensor split on the cheap axis 1
 *    of a forced (2, 4) mesh (tp 4, dp 2, as Alpa's GPT-15B plan) and a layout with every heavy
 *    operator split by batch maps to data parallelism. */
#include <stdlib.h>

#include "check.h"
#include "search_ilp.h"

static void same(const search__ilp_graph *g, const char *what) {
  search__ilp_sol c, b;
  pp_err err = {0};
  int rc = search__ilp_solve(g, &c, &err);
  if (rc) fprintf(stderr, "%s: %s\n", what, err.msg);
  CHECK_EQ(rc, PP_OK);
  rc = search__ilp_brute(g, 5e7, &b, &err);
  if (rc) fprintf(stderr, "%s: %s\n", what, err.msg);
  CHECK_EQ(rc, PP_OK);
  CHECK(c.optimal && b.optimal);
  if (!(fabs(c.objective - b.objective) <= 1e-9 * fabs(b.objective) + 1e-15))
    fprintf(stderr, "%s: CBC %.12g, brute force %.12g\n", what, c.objective, b.objective);
  CHECK_NEAR(c.objective, b.objective, 1e-9);
  CHECK_NEAR(search__ilp_objective(g, c.choice), c.objective, 1e-12);
}

static void tiny(void) {
  search__ilp_graph g;
  pp_err err = {0};
  search__ilp_graph_init(&g);
  /* a: 3 strategies, b: 2, c: 3, d: 2; edges a->b, b->c, a->c, c->d, d->a */
  double ca[] = {1, 2, 0.5}, ma[] = {4, 1, 6};
  double cb[] = {0, 3}, mb[] = {2, 2};
  double cc[] = {2, 1, 4}, mc[] = {1, 5, 1};
  double cd[] = {0.25, 0}, md[] = {1, 3};
  CHECK_EQ(search__ilp_op_add(&g, "a", 3, ca, ma, &err), 0);
  CHECK_EQ(search__ilp_op_add(&g, "b", 2, cb, mb, &err), 1);
  CHECK_EQ(search__ilp_op_add(&g, "c", 3, cc, mc, &err), 2);
  CHECK_EQ(search__ilp_op_add(&g, "d", 2, cd, md, &err), 3);
  double ab[] = {0, 2, 5, 0, 1, 1};            /* 3 x 2 */
  double bc[] = {0, 3, 1, 2, 0, 4};            /* 2 x 3 */
  double ac[] = {0, 1, 1, 1, 0, 1, 2, 2, 0};   /* 3 x 3 */
  double cdr[] = {1, 0, 0, 2, 3, 0.5};         /* 3 x 2 */
  double da[] = {0, 1, 0.5, 2, 0, 0};          /* 2 x 3 */
  CHECK_EQ(search__ilp_edge_add(&g, 0, 1, ab, &err), PP_OK);
  CHECK_EQ(search__ilp_edge_add(&g, 1, 2, bc, &err), PP_OK);
  CHECK_EQ(search__ilp_edge_add(&g, 0, 2, ac, &err), PP_OK);
  CHECK_EQ(search__ilp_edge_add(&g, 2, 3, cdr, &err), PP_OK);
  CHECK_EQ(search__ilp_edge_add(&g, 3, 0, da, &err), PP_OK);
  same(&g, "tiny");
  search__ilp_sol free_sol, mem_sol;
  CHECK_EQ(search__ilp_solve(&g, &free_sol, &err), PP_OK);
  /* the memory the unconstrained optimum uses, then a row just below it */
  double mem = 0;
  double mv[4][3] = {{4, 1, 6}, {2, 2, 0}, {1, 5, 1}, {1, 3, 0}};
  for (int v = 0; v < 4; v++) mem += mv[v][free_sol.choice[v]];
  g.mem_budget = mem - 0.5; /* the unconstrained optimum no longer fits */
  same(&g, "tiny with memory");
  CHECK_EQ(search__ilp_solve(&g, &mem_sol, &err), PP_OK);
  CHECK(mem_sol.objective >= free_sol.objective);
  double m2 = 0;
  for (int v = 0; v < 4; v++) m2 += mv[v][mem_sol.choice[v]];
  CHECK(m2 <= g.mem_budget);
  g.mem_budget = 0.5; /* nothing fits */
  search__ilp_sol none;
  CHECK(search__ilp_solve(&g, &none, &err) != PP_OK);
  CHECK(search__ilp_brute(&g, 1e6, &none, &err) != PP_OK);
  search__ilp_graph_free(&g);
}

static void layers(void) {
  const char *models[] = {"gpt3-1.3b", "llama3-8b"};
  int gpus[4] = {0, 1, 2, 3};
  struct {
    int shape[2], force;
  } meshes[] = {{{1, 2}, 1}, {{2, 2}, 1}, {{2, 2}, 0}};
  for (size_t mi = 0; mi < 2; mi++) {
    spec_model m;
    spec_cluster c;
    pp_err err = {0};
    CHECK_EQ(spec_model_load(models[mi], &m, &err), PP_OK);
    CHECK_EQ(spec_cluster_load("dgx-h100", 8, &c, &err), PP_OK);
    cm_model *cm = NULL;
    CHECK_EQ(cm_model_create(&m, &c, NULL, &cm, &err), PP_OK);
    for (size_t k = 0; k < sizeof meshes / sizeof meshes[0]; k++)
      for (int alpa = 0; alpa < 2; alpa++)
        for (int seq = 0; seq < 2; seq++)
          for (int zero = 0; zero <= 3; zero += 3) {
          search__ilp_mesh mesh = {{meshes[k].shape[0], meshes[k].shape[1]}, gpus,
                                   meshes[k].force};
          search__ilp_costs co;
          search__ilp_costs_alpa(&co, 4);
          if (!alpa) co.alpa = 0, co.cm = cm, co.grad_bytes = 4;
          co.allow_seq = seq, co.zero = zero;
          search__ilp_graph g;
          int rc = search__ilp_layer(&m, &mesh, &co, &g, &err);
          if (rc) fprintf(stderr, "%s: %s\n", models[mi], err.msg);
          CHECK_EQ(rc, PP_OK);
          char what[128];
          snprintf(what, sizeof what, "%s on %dx%d%s, %s costs%s, zero %d", models[mi],
                   mesh.shape[0], mesh.shape[1], mesh.force_batch0 ? " (batch on axis 0)" : "",
                   alpa ? "Alpa's" : "the cost model's", seq ? ", sequence splits" : "", zero);
          CHECK(g.nops >= 11);
          same(&g, what);
          search__ilp_graph_free(&g);
        }
    cm_model_destroy(cm);
  }
}

/* The qkv matmul of a (4, 1) mesh with the batch forced on axis 0 (its one strategy) at a
 * zero, Alpa's weights or the cost model's prices over 8 microbatches. */
static search__ilp_strat qkv_at(const spec_model *m, cm_model *cm, int zero, int ops) {
  int gpus[4] = {0, 1, 2, 3};
  search__ilp_mesh mesh = {{4, 1}, gpus, 1};
  search__ilp_costs co;
  search__ilp_costs_alpa(&co, 8);
  if (cm) co.alpa = 0, co.cm = cm, co.microbatches = 8;
  co.zero = zero;
  search__ilp_graph g;
  pp_err err = {0};
  CHECK_EQ(search__ilp_layer(m, &mesh, &co, &g, &err), PP_OK);
  search__ilp_strat s = {0};
  CHECK_EQ(g.op[2].nstrat, 1);
  CHECK(!strcmp(g.op[2].name, "qkv"));
  if (g.op[2].nstrat == 1) s = g.op[2].s[0];
  CHECK(g.nops == ops);
  same(&g, cm ? "qkv, the cost model's prices" : "qkv, Alpa's weights");
  search__ilp_graph_free(&g);
  return s;
}

static void state_sharding(void) {
  spec_model m;
  spec_cluster c;
  pp_err err = {0};
  CHECK_EQ(spec_model_load("gpt3-1.3b", &m, &err), PP_OK);
  CHECK_EQ(spec_cluster_load("dgx-h100", 8, &c, &err), PP_OK);
  double W = (double)m.hidden * 3 * m.hidden, n = 4, f = (n - 1) / n;
  /* Alpa's LogicalDeviceMesh, alpha = beta = 1 on axis 0, 2-byte gradients and weights */
  double ar = 1 + 2 * f * 2 * W + 0.01, ag = 1 + f * 2 * W + 0.1, rs = 1 + f * 2 * W + 0.001;
  search__ilp_strat z0 = qkv_at(&m, NULL, 0, 11), z1 = qkv_at(&m, NULL, 1, 11);
  search__ilp_strat z3 = qkv_at(&m, NULL, 3, 11);
  CHECK_NEAR(z0.cost, ar, 1e-12);
  CHECK_NEAR(z1.cost, ar, 1e-12);
  CHECK_NEAR(z3.cost, 2 * ag + rs, 1e-12);
  CHECK_NEAR(z0.mem, 16 * W, 1e-12);
  CHECK_NEAR(z1.mem, (2 + 2 + 12 / n) * W, 1e-12);
  CHECK_NEAR(z3.mem, 16 / n * W, 1e-12);
  cm_model *cm = NULL;
  CHECK_EQ(cm_model_create(&m, &c, NULL, &cm, &err), PP_OK);
  search__ilp_strat d0 = qkv_at(&m, cm, 0, 11), d1 = qkv_at(&m, cm, 1, 11);
  search__ilp_strat d3 = qkv_at(&m, cm, 3, 11);
  CHECK(d0.cost > 0 && d1.cost > 0);
  CHECK(d3.cost > 4 * d1.cost); /* paid 8 times an iteration, not once */
  CHECK(d1.mem < d0.mem && d3.mem < d1.mem);
  cm_model_destroy(cm);
}

static void mapping(void) {
  spec_model m;
  pp_err err = {0};
  CHECK_EQ(spec_model_load("gpt-15b", &m, &err), PP_OK);
  int gpus[8] = {0, 1, 2, 3, 4, 5, 6, 7};
  search__ilp_mesh mesh = {{2, 4}, gpus, 1};
  search__ilp_costs co;
  search__ilp_costs_alpa(&co, 8);
  search__ilp_graph g;
  CHECK_EQ(search__ilp_layer(&m, &mesh, &co, &g, &err), PP_OK);
  search__ilp_sol s;
  CHECK_EQ(search__ilp_solve(&g, &s, &err), PP_OK);
  search__ilp_map mp;
  search__ilp_map_solution(&g, &s, &mp);
  CHECK_EQ(mp.role[0], SEARCH__ROLE_DATA);
  CHECK_EQ(mp.role[1], SEARCH__ROLE_MODEL);
  CHECK_EQ(mp.tp, 4);
  CHECK_EQ(mp.dp, 2);
  CHECK_EQ(mp.expressible, 1);
  /* every operator batch-split on both axes: data parallelism over 8 */
  int all_b[SEARCH__ILP_MAX_OPS];
  for (int v = 0; v < g.nops; v++) {
    all_b[v] = -1;
    for (int i = 0; i < g.op[v].nstrat; i++)
      if (g.op[v].s[i].mode[0] == SEARCH__AX_B && g.op[v].s[i].mode[1] == SEARCH__AX_B)
        all_b[v] = i;
    CHECK(all_b[v] >= 0);
  }
  search__ilp_sol d = {0};
  memcpy(d.choice, all_b, sizeof all_b);
  search__ilp_map_solution(&g, &d, &mp);
  CHECK_EQ(mp.tp, 1);
  CHECK_EQ(mp.dp, 8);
  CHECK_EQ(mp.expressible, 1);
  search__ilp_graph_free(&g);
}

int main(void) {
  if (!search__ilp_have_cbc()) {
    fprintf(stderr, "built without CBC: skipped\n");
    return 77;
  }
  tiny();
  layers();
  state_sharding();
  mapping();
  return check_status();
}
