/* libFuzzer harness: plans through resolve, layout and one cost-model evaluation on an MoE
 * model. Input: 1 header byte, then the plan text. The header sizes the cluster: dgx-h100 with
 * 1 + (byte % 64) GPUs, sized by spec_cluster_load as `--gpus N` is (sizes its fabric rejects
 * are skipped). The text is inline JSON when it starts with '{', else the string form (text
 * without '=' is skipped: spec_plan_parse would take it for a file name). The model is the
 * Mixtral-like preset mixtral-8x7b.
 * Invariants: every rejection (parse, resolve, evaluation) is one non-empty line naming the
 * plan or the cost model; a parsed plan's canonical JSON parses back to the same text, and so
 * does a uniform plan's string form; a resolved plan validates, and its JSON and string form
 * resolve again to the same JSON; its layout builds and places every GPU of the plan exactly
 * once, each group's members on GPUs of the plan in the group's stage, every GPU in exactly
 * one group of each kind with the sizes the degrees give, and the layers split over the stages;
 * the groups the cost model prices (cm_stage_places) sit where the layout's do;
 * the evaluation's figures are finite and non-negative, its breakdown parts too (the pipeline
 * bubble once came out at -1.4e-14 s with pp=1: corpus/plan/regress-bubble-rounding), and its
 * breakdown adds up to the iteration time. */
#include <stdint.h>
#include <stdlib.h>

#include "fuzz_util.h"
#include "podplan/cm.h"
#include "podplan/spec.h"

static const char *const parse_names[] = {"plan", "<inline>", NULL};
static const char *const rule_names[] = {"plan", NULL};
static const char *const eval_names[] = {"plan", "cost model", NULL};

/* JSON of `text` parsed (and resolved when m is set); malloc'd; aborts on failure. */
static char *reparse(const char *text, const spec_model *m, const spec_cluster *c,
                     const char *what) {
  spec_plan q;
  pp_err err = {0};
  int rc = spec_plan_parse(text, &q, &err);
  FZ_CHECK(rc == PP_OK, "%s rejected: %s\n  %s", what, err.msg, text);
  if (m) {
    rc = spec_plan_resolve(&q, m, c, &err);
    FZ_CHECK(rc == PP_OK, "%s does not resolve again: %s\n  %s", what, err.msg, text);
  }
  char *j = spec_plan_json(&q);
  spec_plan_clear(&q);
  return j;
}

/* Canonical JSON and (uniform) string form of p parse back to p's canonical JSON. */
static void check_round_trips(const spec_plan *p, const spec_model *m, const spec_cluster *c) {
  char *j1 = spec_plan_json(p);
  FZ_CHECK(j1 != NULL, "no canonical JSON");
  char *j2 = reparse(j1, m, c, "canonical JSON");
  FZ_SAME_TEXT(j1, j2, "plan canonical JSON after a round trip");
  free(j2);
  if (!p->nstages) {
    char s[SPEC_PLAN_STR_MAX];
    pp_err err = {0};
    FZ_CHECK(spec_plan_format(p, s, sizeof s, &err) == PP_OK, "no string form: %s", err.msg);
    j2 = reparse(s, m, c, "string form");
    FZ_SAME_TEXT(j1, j2, "plan JSON after a round trip through the string form");
    free(j2);
  }
  free(j1);
}

static void check_layout(const spec_plan *p, const spec_model *m, const spec_layout *l,
                         int gpus) {
  int uniform = p->nstages == 0, P = uniform ? p->pp : p->nstages, vpp = uniform ? p->vpp : 1;
  long long want = 0;
  for (int i = 0; i < p->nstages; i++) want += p->stages[i].ngpus;
  if (uniform) want = (long long)p->tp * p->pp * p->dp * p->cp;
  FZ_CHECK(l->nslots == want && l->nslots <= gpus && l->ngpus == gpus && l->nstages == P &&
               l->vpp == vpp,
           "%d slots (want %lld) on %d of %d GPUs, %d stages x %d", l->nslots, want, l->ngpus,
           gpus, l->nstages, l->vpp);
  FZ_CHECK(l->microbatches == spec_plan_microbatches(p), "microbatches %d", l->microbatches);
  long long layers = 0;
  for (int j = 0; j < P * vpp; j++) {
    FZ_CHECK(l->layers[j] >= 1, "virtual stage %d has %d layers", j, l->layers[j]);
    layers += l->layers[j];
  }
  FZ_CHECK(layers == m->layers, "stages hold %lld of %d layers", layers, m->layers);

  /* every slot's GPU exactly once; slot_of_gpu is the inverse */
  int *count = calloc((size_t)gpus * (SPEC_NGRPS + 1), sizeof *count);
  FZ_CHECK(count != NULL, "out of memory");
  for (int i = 0; i < l->nslots; i++) {
    const spec_slot *s = &l->slots[i];
    FZ_CHECK(s->gpu >= 0 && s->gpu < gpus, "slot %d on gpu %d", i, s->gpu);
    FZ_CHECK(++count[s->gpu] == 1, "gpu %d in two slots", s->gpu);
    FZ_CHECK(l->slot_of_gpu[s->gpu] == i, "slot_of_gpu[%d] = %d, not %d", s->gpu,
             l->slot_of_gpu[s->gpu], i);
    FZ_CHECK(s->stage >= 0 && s->stage < P, "slot %d in stage %d", i, s->stage);
    if (uniform)
      FZ_CHECK(s->gpu == i, "uniform slot %d on gpu %d", i, s->gpu);
    else
      FZ_CHECK(s->local >= 0 && s->local < p->stages[s->stage].ngpus &&
                   p->stages[s->stage].gpus[s->local] == s->gpu,
               "slot %d: gpu %d is not member %d of stage %d", i, s->gpu, s->local, s->stage);
    for (int k = 0; k < SPEC_NGRPS; k++) {
      int gi = s->group[k];
      FZ_CHECK(gi >= 0 && gi < l->ngroups && l->groups[gi].kind == (spec_grp)k,
               "slot %d: %s group %d", i, spec_grp_name(k), gi);
    }
    const int *peers[2] = {s->prev, s->next};
    int npeers[2] = {s->nprev, s->nnext};
    for (int d = 0; d < 2; d++)
      for (int q = 0; q < npeers[d]; q++)
        FZ_CHECK(peers[d][q] >= 0 && peers[d][q] < gpus && l->slot_of_gpu[peers[d][q]] >= 0,
                 "slot %d: pipeline peer gpu %d is not in the plan", i, peers[d][q]);
  }
  for (int g = 0; g < gpus; g++)
    FZ_CHECK((l->slot_of_gpu[g] >= 0) == (count[g] == 1), "slot_of_gpu[%d] = %d", g,
             l->slot_of_gpu[g]);

  /* groups: members are the plan's GPUs of the group's stage; each GPU in one group per kind */
  for (int gi = 0; gi < l->ngroups; gi++) {
    const spec_group *G = &l->groups[gi];
    FZ_CHECK((unsigned)G->kind < SPEC_NGRPS && G->n >= 1, "group %d: kind %d, %d members", gi,
             (int)G->kind, G->n);
    const spec_stage *st = uniform ? NULL : &p->stages[G->stage];
    int tp = uniform ? p->tp : st->tp, cp = uniform ? p->cp : st->cp;
    int dp = uniform ? p->dp : st->dp, ep = uniform ? p->ep : st->ep;
    const int size[SPEC_NGRPS] = {tp, cp, dp * cp, ep, dp * cp / ep};
    FZ_CHECK(G->n == size[G->kind], "%s group %d has %d members, not %d",
             spec_grp_name(G->kind), gi, G->n, size[G->kind]);
    for (int q = 0; q < G->n; q++) {
      int g = G->gpus[q];
      FZ_CHECK(g >= 0 && g < gpus && l->slot_of_gpu[g] >= 0, "%s group %d: gpu %d not in the plan",
               spec_grp_name(G->kind), gi, g);
      const spec_slot *s = &l->slots[l->slot_of_gpu[g]];
      FZ_CHECK(s->stage == G->stage, "%s group %d (stage %d) holds gpu %d of stage %d",
               spec_grp_name(G->kind), gi, G->stage, g, s->stage);
      FZ_CHECK(++count[(size_t)gpus * (1 + G->kind) + g] == 1, "gpu %d in two %s groups", g,
               spec_grp_name(G->kind));
      FZ_CHECK(s->group[G->kind] == gi, "gpu %d: %s group %d, listed in %d", g,
               spec_grp_name(G->kind), s->group[G->kind], gi);
    }
  }
  for (int k = 0; k < SPEC_NGRPS; k++)
    for (int i = 0; i < l->nslots; i++)
      FZ_CHECK(count[(size_t)gpus * (1 + k) + l->slots[i].gpu] == 1, "gpu %d in no %s group",
               l->slots[i].gpu, spec_grp_name(k));
  free(count);
}

/* b differs from a in where it places a group: size, levels, span, members per node and
 * domain, bandwidth and latency at each level crossed */
static int place_differs(const cm_place *a, const cm_place *b) {
  int d = a->ranks != b->ranks || a->levels != b->levels || a->nodes != b->nodes ||
          a->domains != b->domains || a->per_node != b->per_node ||
          a->per_domain != b->per_domain;
  for (int v = 0; v < CM_NLEVELS; v++)
    if (a->levels >> v & 1) d |= a->bw_gbps[v] != b->bw_gbps[v] || a->lat_us[v] != b->lat_us[v];
  return d;
}

/* The groups the cost model prices (cm_stage_places: the placements of the coefficients
 * cm_eval evaluates each stage with) sit where the layout's groups do: a non-uniform stage's
 * where the layout's group holding its first GPU is; a uniform plan's where the layout's copy
 * of each kind spanning the most domains, then nodes, is. */
static void check_priced_groups(cm_model *cm, const spec_plan *p, const spec_layout *l) {
  pp_err err = {0};
  for (int s = 0; s < l->nstages; s++) {
    cm_place pl[SPEC_NGRPS];
    FZ_CHECK(cm_stage_places(cm, p, s, pl, &err) == PP_OK, "stage %d: %s", s, err.msg);
    for (int k = 0; k < SPEC_NGRPS; k++) {
      cm_place want = {0}, b;
      int found = 0;
      for (int i = 0; i < l->ngroups; i++) {
        const spec_group *G = &l->groups[i];
        if (G->kind != (spec_grp)k) continue;
        if (p->nstages && !(G->stage == s && l->slot_of_gpu[p->stages[s].gpus[0]] >= 0 &&
                            l->slots[l->slot_of_gpu[p->stages[s].gpus[0]]].group[k] == i))
          continue;
        cm_place_list(cm, G->gpus, G->n, &b);
        if (!found || b.domains > want.domains ||
            (b.domains == want.domains && b.nodes > want.nodes))
          want = b, found = 1;
      }
      FZ_CHECK(found, "stage %d: no layout group of kind %s", s, spec_grp_name(k));
      FZ_CHECK(!place_differs(&pl[k], &want),
               "stage %d: %s group priced over %d ranks, %d nodes, %d domains; the layout's "
               "over %d ranks, %d nodes, %d domains",
               s, spec_grp_name(k), pl[k].ranks, pl[k].nodes, pl[k].domains, want.ranks,
               want.nodes, want.domains);
    }
  }
}

static void check_result(const cm_result *r, int nstages) {
  const double figs[] = {r->tokens_per_s, r->model_tflops_per_gpu, r->mfu, r->hfu,
                         r->sc21_tflops_per_gpu, r->model_flops, r->hw_flops, r->sc21_flops,
                         r->mem.weights_gib, r->mem.grads_gib, r->mem.optimizer_gib,
                         r->mem.activations_gib, r->mem.other_gib, r->mem.overhead_gib,
                         r->mem.total_gib, r->mem_gib_per_gpu, r->mem_excess_gib};
  for (size_t i = 0; i < sizeof figs / sizeof figs[0]; i++)
    FZ_CHECK(fz_nonneg(figs[i]), "result figure %zu = %g", i, figs[i]);
  const double parts[] = {r->t.compute_s, r->t.tp_comm_s, r->t.cp_comm_s, r->t.ep_comm_s,
                          r->t.pp_bubble_s, r->t.pp_p2p_s, r->t.dp_comm_s, r->t.optimizer_s};
  FZ_CHECK(isfinite(r->iter_time_s) && r->iter_time_s > 0, "iteration time %g", r->iter_time_s);
  double sum = 0;
  for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
    FZ_CHECK(isfinite(parts[i]) && parts[i] >= 0, "breakdown part %zu = %g", i, parts[i]);
    sum += parts[i];
  }
  FZ_CHECK(fabs(sum - r->iter_time_s) <= 1e-9 * r->iter_time_s, "breakdown %.17g != iteration %.17g",
           sum, r->iter_time_s);
  FZ_CHECK(r->feasible == (r->mem_excess_gib == 0), "feasible %d with excess %g GiB", r->feasible,
           r->mem_excess_gib);
  FZ_CHECK(r->microbatches >= 1, "%d microbatches", r->microbatches);
  FZ_CHECK(r->bottleneck_stage >= 0 && r->bottleneck_stage < nstages, "bottleneck stage %d of %d",
           r->bottleneck_stage, nstages);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  int gpus = 1 + data[0] % 64;
  char *text = fz_cstr(data + 1, size - 1);
  spec_model m;
  spec_cluster c;
  spec_plan p = {0};
  spec_layout l = {0};
  cm_model *cm = NULL;
  pp_err err = {0};
  FZ_CHECK(spec_model_load("mixtral-8x7b", &m, &err) == PP_OK, "preset: %s", err.msg);
  if (spec_cluster_load("dgx-h100", gpus, &c, &err)) goto done; /* a size the fabric rejects */
  if (text[0] != '{' && !strchr(text, '=')) goto done;          /* would be a file name */

  int rc = spec_plan_parse(text, &p, &err);
  if (rc) {
    fz_check_err(rc, &err, parse_names);
    goto done;
  }
  check_round_trips(&p, NULL, NULL);

  rc = spec_plan_resolve(&p, &m, &c, &err);
  if (rc) {
    fz_check_err(rc, &err, rule_names);
    goto done;
  }
  rc = spec_plan_validate(&p, &m, &c, &err);
  FZ_CHECK(rc == PP_OK, "resolved plan fails validation: %s", err.msg);
  check_round_trips(&p, &m, &c);

  rc = spec_layout_build(&p, &m, c.gpus, &l, &err);
  FZ_CHECK(rc == PP_OK, "valid plan has no layout: %s", err.msg);
  check_layout(&p, &m, &l, c.gpus);

  rc = cm_model_create(&m, &c, NULL, &cm, &err);
  FZ_CHECK(rc == PP_OK, "cost model: %s", err.msg);
  check_priced_groups(cm, &p, &l);
  cm_result r;
  rc = cm_eval(cm, &p, &r, &err);
  if (rc)
    fz_check_err(rc, &err, eval_names);
  else
    check_result(&r, l.nstages);

done:
  cm_model_destroy(cm);
  spec_layout_free(&l);
  spec_plan_clear(&p);
  free(text);
  return 0;
}
