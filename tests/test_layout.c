/* One group layout: the groups the cost model prices are the layout's groups.
 * Runs, on the Mixtral-8x7B preset (so ep > 1 is allowed) over dgx-h100 clusters:
 * - 400 random uniform plans (tp, cp, dp, ep, pp drawn; the ones spec_plan_resolve accepts)
 *   and 400 random non-uniform plans (1-4 stages on a random permutation of the GPUs, each
 *   stage with its own tp, cp, dp, ep): spec_layout_build, then for every stage and group
 *   kind, the placement cm_eval prices the group at (cm_stage_places: the placements of the
 *   coefficients cm_eval evaluates the stage with) must equal the placement of the layout's
 *   members (cm_place_list): non-uniform stages, the layout's group holding the stage's first
 *   GPU; uniform plans (groups placed by count and stride), the layout's copy of that kind
 *   that spans the most NVLink domains, then nodes. Every layout group has the size
 *   spec_grp_rules gives and lies inside one stage; cm_eval succeeds with a finite, positive
 *   iteration time (under the sanitizer build this also proves cm_eval reads only the
 *   stage's GPUs).
 * - the regression case: the 75-byte non-uniform plan with cp=2 on 2 GPUs whose expert
 *   data-parallel group used to be read past the stage's GPU array. */
#include <stdlib.h>

#include "check.h"
#include "podplan/cm.h"

static unsigned rnd_state = 12345;
static int rnd(int n) {
  rnd_state = rnd_state * 1103515245u + 12345u;
  return (int)((rnd_state >> 16) % (unsigned)n);
}
static int pick(const int *v, int n) { return v[rnd(n)]; }

typedef struct counts {
  int plans, cp_gt1, ep_gt1, groups;
} counts;

/* The layout's group of `kind` holding GPU `gpu`, or NULL. */
static const spec_group *layout_group(const spec_layout *l, int gpu, spec_grp kind) {
  int s = l->slot_of_gpu[gpu];
  return s < 0 ? NULL : &l->groups[l->slots[s].group[kind]];
}

/* a and b place a group alike: its size, the levels it crosses, the nodes and domains it
 * spans, its members per node and per domain, and its bandwidth and latency at each level */
static int same_place(const cm_place *a, const cm_place *b) {
  int same = a->ranks == b->ranks && a->levels == b->levels && a->nodes == b->nodes &&
             a->domains == b->domains && a->per_node == b->per_node &&
             a->per_domain == b->per_domain;
  for (int v = 0; v < CM_NLEVELS; v++)
    if (a->levels >> v & 1) same &= a->bw_gbps[v] == b->bw_gbps[v] && a->lat_us[v] == b->lat_us[v];
  if (!same)
    fprintf(stderr, "placements differ: %d ranks, levels %#x, %d nodes, %d domains, %d/node, "
                    "%d/domain vs %d, %#x, %d, %d, %d, %d\n", a->ranks, a->levels, a->nodes,
            a->domains, a->per_node, a->per_domain, b->ranks, b->levels, b->nodes, b->domains,
            b->per_node, b->per_domain);
  return same;
}

/* Where the layout's groups of `kind` sit that every copy waits for: of all of them (they tile
 * the cluster), the one spanning the most NVLink domains, then nodes. */
static void widest_copy(const cm_model *cm, const spec_layout *l, spec_grp kind, cm_place *out) {
  int found = 0;
  for (int i = 0; i < l->ngroups; i++) {
    if (l->groups[i].kind != kind) continue;
    cm_place b;
    cm_place_list(cm, l->groups[i].gpus, l->groups[i].n, &b);
    if (!found || b.domains > out->domains ||
        (b.domains == out->domains && b.nodes > out->nodes))
      *out = b, found = 1;
  }
  CHECK(found);
}

/* Every stage's groups as cm_eval prices them (cm_stage_places: the placements of the
 * coefficients cm_eval evaluates the stage with) against the layout's groups: a non-uniform
 * stage's are those of the layout's group holding the stage's first GPU; a uniform plan's,
 * alike for every stage, those of the layout's widest copy of each kind. */
static void check_places(cm_model *cm, const spec_plan *p, const spec_layout *l, counts *n) {
  int uniform = p->nstages == 0, P = uniform ? p->pp : p->nstages;
  pp_err err = {0};
  for (int s = 0; s < P; s++) {
    const spec_stage *st = uniform ? NULL : &p->stages[s];
    spec_grp_rule r[SPEC_NGRPS];
    spec_grp_rules(uniform ? p->tp : st->tp, uniform ? p->cp : st->cp,
                   uniform ? p->dp : st->dp, uniform ? p->ep : st->ep, r);
    cm_place pl[SPEC_NGRPS];
    CHECK_EQ(cm_stage_places(cm, p, s, pl, &err), PP_OK);
    for (int k = 0; k < SPEC_NGRPS; k++) {
      cm_place want;
      CHECK_EQ(pl[k].ranks, r[k].count);
      if (uniform) {
        widest_copy(cm, l, (spec_grp)k, &want);
      } else {
        const spec_group *g = layout_group(l, st->gpus[0], (spec_grp)k);
        CHECK(g != NULL);
        if (!g) continue;
        CHECK_EQ(g->stage, s);
        cm_place_list(cm, g->gpus, g->n, &want);
      }
      CHECK(same_place(&pl[k], &want));
      n->groups++;
    }
  }
  cm_place none[SPEC_NGRPS];
  CHECK_EQ(cm_stage_places(cm, p, P, none, &err), PP_PLAN);
}

static void check_plan(const spec_model *m, const spec_cluster *c, spec_plan *p, counts *n) {
  pp_err err = {0};
  spec_layout l;
  if (spec_layout_build(p, m, c->gpus, &l, &err)) {
    fprintf(stderr, "layout: %s\n", err.msg);
    CHECK(0);
    return;
  }
  int uniform = p->nstages == 0;
  cm_model *cm = NULL;
  CHECK(cm_model_create(m, c, NULL, &cm, &err) == PP_OK);
  check_places(cm, p, &l, n);
  /* every group the layout has: the rule's size, members from one stage */
  for (int i = 0; i < l.ngroups; i++) {
    const spec_group *g = &l.groups[i];
    const spec_stage *st = uniform ? NULL : &p->stages[g->stage];
    spec_grp_rule r[SPEC_NGRPS];
    spec_grp_rules(uniform ? p->tp : st->tp, uniform ? p->cp : st->cp, uniform ? p->dp : st->dp,
                   uniform ? p->ep : st->ep, r);
    CHECK_EQ(g->n, r[g->kind].count);
    for (int q = 0; q < g->n; q++) CHECK_EQ(l.slots[l.slot_of_gpu[g->gpus[q]]].stage, g->stage);
  }
  cm_result res;
  int rc = cm_eval(cm, p, &res, &err);
  if (rc) fprintf(stderr, "cm_eval: %s\n", err.msg);
  CHECK_EQ(rc, PP_OK);
  CHECK(isfinite(res.iter_time_s) && res.iter_time_s > 0);
  cm_model_destroy(cm);
  spec_layout_free(&l);
}

static void uniform_plans(const spec_model *m, counts *n) {
  static const int deg[] = {1, 2, 4}, pps[] = {1, 2, 4};
  for (int t = 0; t < 400; t++) {
    int tp = pick(deg, 3), cp = pick(deg, 3), dp = pick(deg, 3), pp = pick(pps, 3);
    int ep = pick(deg, 3), gpus = tp * cp * dp * pp;
    if (gpus % 8) continue; /* dgx-h100 comes in whole nodes */
    spec_cluster c;
    spec_plan p;
    pp_err err = {0};
    char text[160];
    snprintf(text, sizeof text, "tp=%d,pp=%d,dp=%d,cp=%d,ep=%d,mbs=1,gbs=%d", tp, pp, dp, cp, ep,
             dp * 8);
    if (spec_cluster_load("dgx-h100", gpus, &c, &err)) continue;
    if (spec_plan_parse(text, &p, &err) == PP_OK && spec_plan_resolve(&p, m, &c, &err) == PP_OK) {
      check_plan(m, &c, &p, n);
      n->plans++, n->cp_gt1 += cp > 1, n->ep_gt1 += ep > 1;
    }
    spec_plan_clear(&p);
  }
}

static void nonuniform_plans(const spec_model *m, counts *n) {
  static const int deg[] = {1, 2, 4}, cps[] = {1, 2}, sizes[] = {8, 16, 32};
  for (int t = 0; t < 400; t++) {
    int gpus = pick(sizes, 3), S = 1 + rnd(4), perm[32], at = 0, cp_gt1 = 0, ep_gt1 = 0;
    for (int i = 0; i < gpus; i++) perm[i] = i;
    for (int i = gpus - 1; i > 0; i--) {
      int j = rnd(i + 1), x = perm[i];
      perm[i] = perm[j], perm[j] = x;
    }
    char text[2048];
    int len = snprintf(text, sizeof text, "{\"gbs\":16,\"microbatches\":%d,\"stages\":[",
                       pick(deg, 3));
    int per = m->layers / S;
    for (int s = 0; s < S; s++) {
      int tp = pick(deg, 3), cp = pick(cps, 2), dp = pick(deg, 3), ep = pick(deg, 3);
      int k = tp * cp * dp;
      if (at + k > gpus) k = 0;
      if (!k) break;
      int lo = s * per, hi = s == S - 1 ? m->layers : lo + per;
      len += snprintf(text + len, sizeof text - (size_t)len,
                      "%s{\"layers\":[%d,%d],\"tp\":%d,\"cp\":%d,\"dp\":%d,\"ep\":%d,\"gpus\":[",
                      s ? "," : "", lo, hi, tp, cp, dp, ep);
      for (int q = 0; q < k; q++)
        len += snprintf(text + len, sizeof text - (size_t)len, "%s%d", q ? "," : "", perm[at++]);
      len += snprintf(text + len, sizeof text - (size_t)len, "]}");
      cp_gt1 |= cp > 1, ep_gt1 |= ep > 1;
    }
    snprintf(text + len, sizeof text - (size_t)len, "]}");
    spec_cluster c;
    spec_plan p;
    pp_err err = {0};
    if (spec_cluster_load("dgx-h100", gpus, &c, &err)) continue;
    if (spec_plan_parse(text, &p, &err) == PP_OK && spec_plan_resolve(&p, m, &c, &err) == PP_OK) {
      check_plan(m, &c, &p, n);
      n->plans++, n->cp_gt1 += cp_gt1, n->ep_gt1 += ep_gt1;
    }
    spec_plan_clear(&p);
  }
}

/* The reproducer: EDP members used to be gpus[k*tp*cp*ep], k < dp*cp/ep: gpus[2] of a
 * 2-GPU stage. Now the EDP group is both GPUs, as the layout has it. */
static void regression_cp2(const spec_model *m) {
  spec_cluster c;
  spec_plan p;
  pp_err err = {0};
  const char *text = "{\"gbs\":2,\"microbatches\":1,\"stages\":[{\"layers\":[0,32],"
                     "\"gpus\":[0,1],\"cp\":2}]}";
  CHECK(spec_cluster_load("dgx-h100", 8, &c, &err) == PP_OK);
  CHECK(spec_plan_parse(text, &p, &err) == PP_OK);
  CHECK(spec_plan_resolve(&p, m, &c, &err) == PP_OK);
  cm_model *cm = NULL;
  cm_place pl[SPEC_NGRPS], both;
  const int gpus[2] = {0, 1};
  CHECK_EQ(cm_model_create(m, &c, NULL, &cm, &err), PP_OK);
  CHECK_EQ(cm_stage_places(cm, &p, 0, pl, &err), PP_OK);
  cm_place_list(cm, gpus, 2, &both);
  CHECK(same_place(&pl[SPEC_GRP_EDP], &both));
  cm_model_destroy(cm);
  counts n = {0};
  check_plan(m, &c, &p, &n);
  CHECK_EQ(n.groups, SPEC_NGRPS);
  spec_plan_clear(&p);
}

int main(void) {
  spec_model m;
  pp_err err = {0};
  if (spec_model_load("mixtral-8x7b", &m, &err)) {
    fprintf(stderr, "%s\n", err.msg);
    return 1;
  }
  regression_cp2(&m);
  counts u = {0}, nu = {0};
  uniform_plans(&m, &u);
  nonuniform_plans(&m, &nu);
  printf("uniform: %d plans (%d with cp>1, %d with ep>1), %d groups compared\n", u.plans,
         u.cp_gt1, u.ep_gt1, u.groups);
  printf("non-uniform: %d plans (%d with cp>1, %d with ep>1), %d groups compared\n", nu.plans,
         nu.cp_gt1, nu.ep_gt1, nu.groups);
  /* the random draws must reach the cases that matter */
  CHECK(u.plans >= 50 && u.cp_gt1 >= 10 && u.ep_gt1 >= 10);
  CHECK(nu.plans >= 50 && nu.cp_gt1 >= 10 && nu.ep_gt1 >= 10);
  return check_status();
}
