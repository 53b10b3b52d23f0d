/* Plans: string and JSON round trips, canonical forms, hash stability, the validity rules
 * (each invalid plan names the rule it breaks) and Megatron's uneven layer split; who talks
 * to whom (layout): tp, cp and dp groups and pipeline neighbours in Megatron's rank order,
 * 1F1B, interleaved (every microbatch and chunk once each way, forward first) and GPipe step
 * orders, and a non-uniform plan whose 4-GPU stage hands over to an 8-GPU one as 8 messages
 * of 1/8, two per sender. */
#include <stdlib.h>

#include "check.h"
#include "podplan/spec.h"

static spec_model model(const char *name) {
  spec_model m;
  pp_err err = {0};
  int rc = spec_model_load(name, &m, &err);
  assert(rc == PP_OK);
  return m;
}

static spec_cluster cluster(const char *name, int gpus) {
  spec_cluster c;
  pp_err err = {0};
  int rc = spec_cluster_load(name, gpus, &c, &err);
  assert(rc == PP_OK);
  return c;
}

/* parse + resolve; returns the error code, message in err */
static int resolve(const char *text, const spec_model *m, const spec_cluster *c, spec_plan *p,
                   pp_err *err) {
  pp_err_clear(err);
  if (spec_plan_parse(text, p, err)) return err->code;
  return spec_plan_resolve(p, m, c, err);
}

static void round_trips(void) {
  spec_model m = model("gpt3-175b");
  spec_cluster c = cluster("dgx-h100", 1024);
  const char *plans[] = {
      "tp=8,pp=16,dp=8,cp=1,ep=1,mbs=1,gbs=1536,vpp=1,sp=1,recompute=selective,zero=1,schedule=1f1b",
      "tp=8,pp=16,gbs=1536",
      "gbs=1536, tp = 4 ,pp=8,cp=2,mbs=2,recompute=full,zero=1",
      "tp=8,pp=8,vpp=3,gbs=1536,sp=1",
      "tp=1,pp=1,mbs=1,gbs=1024,zero=3",
      "tp=2,pp=4,schedule=gpipe,mbs=4,gbs=2048",
  };
  for (size_t i = 0; i < sizeof plans / sizeof plans[0]; i++) {
    spec_plan p, q;
    pp_err err = {0};
    CHECK_EQ(resolve(plans[i], &m, &c, &p, &err), PP_OK);
    if (err.code) fprintf(stderr, "%s: %s\n", plans[i], err.msg);
    char s1[SPEC_PLAN_STR_MAX], s2[SPEC_PLAN_STR_MAX], h1[SPEC_HASH_LEN], h2[SPEC_HASH_LEN];
    CHECK_EQ(spec_plan_format(&p, s1, sizeof s1, &err), PP_OK);
    CHECK_EQ(resolve(s1, &m, &c, &q, &err), PP_OK);
    CHECK_EQ(spec_plan_format(&q, s2, sizeof s2, &err), PP_OK);
    CHECK_STREQ(s1, s2);
    spec_plan_hash(&p, h1);
    spec_plan_hash(&q, h2);
    CHECK_STREQ(h1, h2);
    /* JSON round trip: the canonical JSON parses back to the same plan */
    char *j1 = spec_plan_json(&p);
    spec_plan r;
    CHECK_EQ(resolve(j1, &m, &c, &r, &err), PP_OK);
    char *j2 = spec_plan_json(&r);
    CHECK_STREQ(j1, j2);
    free(j1);
    free(j2);
    spec_plan_clear(&p);
    spec_plan_clear(&q);
    spec_plan_clear(&r);
  }
}

/* A parsed plan whose dp is still to be derived (dp 0) has canonical JSON that parses back to
 * the same JSON: dp is left out, as in the string form (the JSON once held "dp":0, which the
 * parser rejects; found by fuzzing, fuzz/corpus/plan/seed-000). */
static void unresolved_json(void) {
  spec_plan p, q;
  pp_err err = {0};
  CHECK_EQ(spec_plan_parse("cp=16,gbs=64", &p, &err), PP_OK);
  CHECK_EQ(p.dp, 0);
  char *j1 = spec_plan_json(&p);
  CHECK(j1 && !strstr(j1, "\"dp\""));
  CHECK_EQ(spec_plan_parse(j1, &q, &err), PP_OK);
  if (err.code) fprintf(stderr, "%s: %s\n", j1, err.msg);
  char *j2 = spec_plan_json(&q);
  CHECK_STREQ(j1, j2);
  free(j1);
  free(j2);
  spec_plan_clear(&p);
  spec_plan_clear(&q);
}

static void hashes(void) {
  spec_model m = model("gpt3-175b");
  spec_cluster c = cluster("dgx-h100", 1024);
  spec_plan a, b, d;
  pp_err err = {0};
  char ha[SPEC_HASH_LEN], hb[SPEC_HASH_LEN], hd[SPEC_HASH_LEN];
  /* order of keys, defaults written out or left out, dp given or derived: same plan */
  CHECK_EQ(resolve("tp=8,pp=16,gbs=1536,sp=1,recompute=selective,zero=1", &m, &c, &a, &err), 0);
  CHECK_EQ(resolve("zero=1,recompute=selective,sp=1,gbs=1536,dp=8,pp=16,tp=8,cp=1,ep=1,mbs=1,"
                   "vpp=1,schedule=1f1b",
                   &m, &c, &b, &err),
           0);
  spec_plan_hash(&a, ha);
  spec_plan_hash(&b, hb);
  CHECK_STREQ(ha, hb);
  /* the hash is stable across versions and machines: this value is part of the store's
   * contract (plans are stored by it); change it only with a schema migration */
  CHECK_STREQ(ha, "74b985845263281b");
  char *j = spec_plan_json(&a);
  CHECK_STREQ(j, "{\"cp\":1,\"dp\":8,\"ep\":1,\"gbs\":1536,\"mbs\":1,\"pp\":16,\"recompute\":"
                 "\"selective\",\"schedule\":\"1f1b\",\"sp\":1,\"tp\":8,\"vpp\":1,\"zero\":1}");
  free(j);
  /* a different plan has a different hash */
  CHECK_EQ(resolve("tp=8,pp=16,gbs=1536,sp=1,recompute=full,zero=1", &m, &c, &d, &err), 0);
  spec_plan_hash(&d, hd);
  CHECK(strcmp(ha, hd) != 0);
  /* canonicalisation: sp means nothing at tp=1; 1f1b with vpp > 1 is interleaved */
  spec_plan e;
  CHECK_EQ(resolve("tp=1,pp=8,vpp=2,sp=1,gbs=2048", &m, &c, &e, &err), 0);
  CHECK_EQ(e.sp, 0);
  CHECK_EQ(e.schedule, SPEC_SCHED_INTERLEAVED);
  CHECK_EQ(e.dp, 128);
  CHECK_EQ(spec_plan_microbatches(&e), 16);
  spec_plan_clear(&a);
  spec_plan_clear(&b);
  spec_plan_clear(&d);
  spec_plan_clear(&e);
}

static void nonuniform(void) {
  spec_model m = model("gpt3-1.3b");
  spec_cluster c = cluster("dgx-h100", 16);
  const char *json =
      "{\"gbs\":64,\"microbatches\":16,\"schedule\":\"1f1b\",\"zero\":1,\"stages\":["
      "{\"layers\":[0,10],\"gpus\":[0,1,2,3,4,5,6,7],\"tp\":4,\"dp\":2,\"recompute\":\"full\"},"
      "{\"layers\":[10,24],\"gpus\":[8,9,10,11,12,13,14,15],\"tp\":8}]}";
  spec_plan p, q;
  pp_err err = {0};
  CHECK_EQ(resolve(json, &m, &c, &p, &err), PP_OK);
  if (err.code) fprintf(stderr, "%s\n", err.msg);
  CHECK_EQ(p.nstages, 2);
  CHECK_EQ(p.stages[1].ngpus, 8);
  CHECK_EQ(p.stages[0].recompute, SPEC_RECOMPUTE_FULL);
  char *j1 = spec_plan_json(&p);
  CHECK_EQ(resolve(j1, &m, &c, &q, &err), PP_OK);
  char *j2 = spec_plan_json(&q);
  CHECK_STREQ(j1, j2);
  char buf[64];
  CHECK_EQ(spec_plan_format(&p, buf, sizeof buf, &err), PP_INPUT);
  spec_plan copy;
  CHECK_EQ(spec_plan_copy(&copy, &p, &err), PP_OK);
  char *j3 = spec_plan_json(&copy);
  CHECK_STREQ(j1, j3);
  free(j1);
  free(j2);
  free(j3);
  spec_plan_clear(&p);
  spec_plan_clear(&q);
  spec_plan_clear(&copy);
}

typedef struct bad_plan {
  const char *model; /* preset, or "seq1000" / "ffn1000" for the models built below */
  int gpus;          /* dgx-h100 sized to this */
  const char *plan;
  const char *expect;
} bad_plan;

static const bad_plan bad[] = {
    {"gpt3-175b", 64, "", "plan: empty"},
    {"gpt3-175b", 64, "tp8", "'tp8': expected key=value"},
    {"gpt3-175b", 64, "tpp=2,gbs=8", "unknown key 'tpp' (did you mean 'tp'?)"},
    {"gpt3-175b", 64, "tp=2,tp=2,gbs=8", "duplicate key 'tp'"},
    {"gpt3-175b", 64, "tp=x,gbs=8", "tp: 'x' is not a non-negative integer"},
    {"gpt3-175b", 64, "tp=0,gbs=8", "tp: must be 1..1048576, got 0"},
    {"gpt3-175b", 64, "tp=-2,gbs=8", "tp: '-2' is not a non-negative integer"},
    {"gpt3-175b", 64, "tp=2,mbs=1x,gbs=8", "mbs: '1x' is not an integer"},
    {"gpt3-175b", 64, "tp=2", "gbs: missing"},
    {"gpt3-175b", 64, "tp=2,gbs=8,recompute=some", "recompute: 'some' is not one of none, selective, full"},
    {"gpt3-175b", 64, "tp=2,gbs=8,schedule=zb", "schedule: 'zb' is not one of gpipe, 1f1b, interleaved"},
    {"gpt3-175b", 64, "tp=2,gbs=8,sp=2", "sp: must be 0..1, got 2"},
    {"gpt3-175b", 64, "tp=2,gbs=8,zero=4", "zero: must be 0..3, got 4"},
    {"gpt3-175b", 64, "tp=8,pp=4,dp=4,gbs=64", "rule 'tp*pp*dp*cp = gpus': 8*4*4*1 = 128, cluster dgx-h100 has 64 GPUs"},
    {"gpt3-175b", 64, "tp=3,gbs=64", "rule 'tp*pp*dp*cp = gpus': tp*pp*cp = 3 does not divide the 64 GPUs"},
    {"gpt3-175b", 64, "tp=64,gbs=64", "rule 'tp divides heads': tp=64, heads=96"},
    {"llama3-70b", 64, "tp=16,gbs=64", "rule 'tp divides kv_heads': tp=16, kv_heads=8"},
    {"ffn1000", 64, "tp=16,gbs=64", "rule 'tp divides ffn_hidden': tp=16, ffn_hidden=1000"},
    {"gpt3-175b", 64, "tp=8,mbs=3,gbs=64", "rule 'dp*mbs divides gbs': dp*mbs = 8*3 = 24, gbs=64"},
    {"gpt3-175b", 64, "tp=8,ep=2,gbs=64", "rule 'ep needs an MoE model'"},
    {"mixtral-8x7b", 64, "ep=16,gbs=64", "rule 'ep divides experts': ep=16, experts=8"},
    {"mixtral-8x7b", 64, "tp=8,pp=2,ep=8,gbs=64", "rule 'ep divides dp': ep=8, dp=4"},
    {"gpt3-1.3b", 64, "pp=32,gbs=64", "rule 'pp*vpp <= layers': pp*vpp = 32*1 stages for 24 layers"},
    {"gpt3-1.3b", 64, "pp=8,vpp=4,gbs=64", "rule 'pp*vpp <= layers': pp*vpp = 8*4 stages for 24 layers"},
    {"gpt3-175b", 64, "pp=4,vpp=2,schedule=gpipe,gbs=64", "rule 'vpp > 1 needs interleaved 1f1b'"},
    {"gpt3-175b", 64, "pp=4,schedule=interleaved,gbs=64", "rule 'interleaved needs vpp > 1'"},
    {"gpt3-175b", 64, "vpp=2,gbs=64", "rule 'interleaved needs pp > 1'"},
    {"gpt3-175b", 64, "pp=4,vpp=2,gbs=48", "rule 'pp divides microbatches (interleaved)': 3 microbatches, pp=4"},
    {"seq1000", 64, "cp=16,gbs=64", "rule '2*cp divides seq_len'"},
    {"seq1000", 64, "tp=16,sp=1,gbs=64", "rule 'sp: tp divides seq_len/cp': tp=16, seq_len/cp=1000"},
    {"gpt3-175b", 64, "pp=2,zero=3,gbs=64", "rule 'zero >= 2 needs pp = 1'"},
    /* non-uniform */
    {"gpt3-1.3b", 16,
     "{\"gbs\":64,\"microbatches\":16,\"stages\":[{\"layers\":[0,10],\"gpus\":[0,1,2,3]},"
     "{\"layers\":[11,24],\"gpus\":[4,5,6,7]}]}",
     "stage 0: rule 'stage gpus = tp*dp*cp': 4 GPUs for tp=1, dp=1, cp=1"},
    {"gpt3-1.3b", 16,
     "{\"gbs\":64,\"microbatches\":16,\"stages\":[{\"layers\":[0,10],\"gpus\":[0,1],\"dp\":2},"
     "{\"layers\":[11,24],\"gpus\":[4,5],\"dp\":2}]}",
     "stage 1: rule 'stages cover the layers in order': layers [11, 24), expected to begin at 10"},
    {"gpt3-1.3b", 16,
     "{\"gbs\":64,\"microbatches\":16,\"stages\":[{\"layers\":[0,20],\"gpus\":[0,1],\"dp\":2}]}",
     "rule 'stages cover the layers in order': they end at 20 of 24 layers"},
    {"gpt3-1.3b", 16,
     "{\"gbs\":64,\"microbatches\":16,\"stages\":[{\"layers\":[0,24],\"gpus\":[15,16],\"dp\":2}]}",
     "stage 0: rule 'gpu ids < gpus': gpu 16, cluster dgx-h100 has 16 GPUs"},
    {"gpt3-1.3b", 16,
     "{\"gbs\":64,\"microbatches\":16,\"stages\":[{\"layers\":[0,24],\"gpus\":[0,1,2,3,4,5,6,7],\"dp\":8}]}",
     "stage 0: rule 'stage dp divides the microbatch': dp=8, 4 sequences per microbatch"},
    {"gpt3-1.3b", 16,
     "{\"gbs\":64,\"microbatches\":48,\"stages\":[{\"layers\":[0,24],\"gpus\":[0]}]}",
     "rule 'microbatches divides gbs': gbs=64, microbatches=48"},
    {"gpt3-1.3b", 16,
     "{\"gbs\":64,\"microbatches\":16,\"schedule\":\"interleaved\",\"stages\":[{\"layers\":[0,24],\"gpus\":[0]}]}",
     "rule 'interleaved needs a uniform plan'"},
    {"gpt3-1.3b", 16, "{\"gbs\":64,\"microbatches\":16,\"tp\":2,\"stages\":[{\"layers\":[0,24],\"gpus\":[0]}]}",
     "tp: does not apply to this kind"},
    {"gpt3-1.3b", 16, "{\"gbs\":64,\"microbatches\":16,\"stages\":[{\"layers\":[0],\"gpus\":[0]}]}",
     "stages[0].layers: must be [begin, end]"},
};

static void invalid(void) {
  CHECK(sizeof bad / sizeof bad[0] >= 20);
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    spec_model m;
    if (strcmp(bad[i].model, "seq1000") == 0 || strcmp(bad[i].model, "ffn1000") == 0) {
      m = model("gpt3-1.3b");
      if (bad[i].model[0] == 's') m.seq_len = 1000;
      else m.ffn_hidden = 1000;
      pp_err e = {0};
      CHECK_EQ(spec_model_validate(&m, &e), PP_OK);
    } else {
      m = model(bad[i].model);
    }
    spec_cluster c = cluster("dgx-h100", bad[i].gpus);
    spec_plan p;
    pp_err err = {0};
    int rc = resolve(bad[i].plan, &m, &c, &p, &err);
    if (rc != PP_PLAN || !strstr(err.msg, bad[i].expect))
      fprintf(stderr, "bad[%zu] %s: rc %d, '%s'\n", i, bad[i].plan, rc, err.msg);
    CHECK_EQ(rc, PP_PLAN);
    CHECK_CONTAINS(err.msg, bad[i].expect);
    CHECK_EQ(pp_exit_status(rc), 2);
    spec_plan_clear(&p);
  }
}

static void layer_split(void) {
  spec_model m = model("llama3-405b");
  spec_plan p = {.tp = 8, .pp = 8, .dp = 8, .cp = 2, .vpp = 1, .mbs = 1, .gbs = 64};
  int v[64];
  spec_plan_stage_layers(&p, &m, v);
  int want[] = {15, 16, 16, 16, 16, 16, 16, 15};
  for (int i = 0; i < 8; i++) CHECK_EQ(v[i], want[i]);
  /* every split covers the layers, differs by at most one, and the ends are never larger
   * than a middle stage */
  for (int layers = 1; layers <= 130; layers++)
    for (int pp = 1; pp <= 16; pp++)
      for (int vpp = 1; vpp <= 4; vpp++) {
        if (pp * vpp > layers) continue;
        m.layers = layers;
        p.pp = pp;
        p.vpp = vpp;
        spec_plan_stage_layers(&p, &m, v);
        int S = pp * vpp, sum = 0, lo = 1 << 30, hi = 0;
        for (int j = 0; j < S; j++) {
          sum += v[j];
          lo = v[j] < lo ? v[j] : lo;
          hi = v[j] > hi ? v[j] : hi;
        }
        CHECK_EQ(sum, layers);
        CHECK(hi - lo <= 1);
        if (S > 2) CHECK(v[0] <= v[1] && v[S - 1] <= v[1]);
      }
}

/* Who talks to whom: groups and neighbours in Megatron's rank order, schedules in its order. */
static void layout(void) {
  spec_model m = model("gpt3-1.3b");
  spec_cluster c = cluster("dgx-h100", 16);
  spec_plan p;
  spec_layout l;
  pp_err err = {0};
  CHECK_EQ(resolve("tp=2,cp=2,pp=2,mbs=1,gbs=16", &m, &c, &p, &err), PP_OK); /* dp=2 */
  CHECK_EQ(spec_layout_build(&p, &m, 16, &l, &err), PP_OK);
  CHECK_EQ(l.nslots, 16);
  CHECK_EQ(l.nstages, 2);
  const spec_slot *s = &l.slots[13]; /* stage 1, local 5: t=1, c=0, d=1 */
  CHECK_EQ(s->stage, 1);
  const spec_group *tp = &l.groups[s->group[SPEC_GRP_TP]], *dp = &l.groups[s->group[SPEC_GRP_DP]];
  const spec_group *cp = &l.groups[s->group[SPEC_GRP_CP]];
  CHECK(tp->n == 2 && tp->gpus[0] == 12 && tp->gpus[1] == 13);
  CHECK(cp->n == 2 && cp->gpus[0] == 13 && cp->gpus[1] == 15);
  CHECK(dp->n == 4 && dp->gpus[0] == 9 && dp->gpus[3] == 15); /* dp * cp ranks, stride tp */
  CHECK(s->nprev == 1 && s->prev[0] == 5 && s->nnext == 0);
  CHECK(l.slots[5].nnext == 1 && l.slots[5].next[0] == 13 && l.slots[5].nprev == 0);
  CHECK_EQ(l.layers[0] + l.layers[1], 24);
  spec_layout_free(&l);
  spec_plan_clear(&p);

  /* 1F1B on 4 stages, 8 microbatches: rank 0 warms up with 3 forwards and ends with 3
   * backwards; the last rank alternates from the start */
  spec_step st[64];
  CHECK_EQ(spec_schedule_steps(SPEC_SCHED_1F1B, 4, 0, 8, 1, st), 16);
  CHECK(st[0].fwd && st[1].fwd && st[2].fwd && st[3].fwd && !st[4].fwd && st[4].mb == 0);
  CHECK(!st[15].fwd && st[15].mb == 7 && !st[13].fwd && !st[14].fwd && st[12].fwd == 0);
  CHECK_EQ(spec_schedule_steps(SPEC_SCHED_1F1B, 4, 3, 8, 1, st), 16);
  CHECK(st[0].fwd && !st[1].fwd && st[1].mb == 0 && st[2].fwd && st[2].mb == 1);
  /* interleaved, 2 chunks: every (mb, chunk) once forward and once backward; backwards of a
   * microbatch run chunk 1 before chunk 0 */
  int n = spec_schedule_steps(SPEC_SCHED_INTERLEAVED, 4, 1, 8, 2, st), seen[2][8][2] = {{{0}}};
  CHECK_EQ(n, 32);
  int order_ok = 1;
  for (int i = 0; i < n; i++) {
    seen[st[i].fwd][st[i].mb][st[i].chunk]++;
    if (!st[i].fwd && st[i].chunk == 0 && !seen[0][st[i].mb][1]) order_ok = 0;
    if (!st[i].fwd && !seen[1][st[i].mb][st[i].chunk]) order_ok = 0; /* forward first */
  }
  CHECK(order_ok);
  for (int f = 0; f < 2; f++)
    for (int b = 0; b < 8; b++)
      for (int k = 0; k < 2; k++) CHECK_EQ(seen[f][b][k], 1);
  /* GPipe: all forwards, then all backwards */
  CHECK_EQ(spec_schedule_steps(SPEC_SCHED_GPIPE, 4, 2, 3, 1, st), 6);
  CHECK(st[2].fwd && !st[3].fwd);

  /* non-uniform: 4 GPUs hand over to 8 as 8 messages of 1/8, two per sender */
  const char *nu = "{\"gbs\":64,\"microbatches\":32,\"stages\":["
                   "{\"layers\":[0,10],\"gpus\":[0,1,2,3],\"tp\":4},"
                   "{\"layers\":[10,24],\"gpus\":[8,9,10,11,12,13,14,15],\"tp\":8}]}";
  CHECK_EQ(resolve(nu, &m, &c, &p, &err), PP_OK);
  CHECK_EQ(spec_layout_build(&p, &m, 16, &l, &err), PP_OK);
  CHECK_EQ(l.nslots, 12);
  CHECK_EQ(l.slot_of_gpu[4], -1);
  s = &l.slots[l.slot_of_gpu[1]];
  CHECK(s->nnext == 2 && s->next[0] == 9 && s->next[1] == 13 && s->next_split == 8);
  s = &l.slots[l.slot_of_gpu[13]];
  CHECK(s->nprev == 1 && s->prev[0] == 1 && s->prev_split == 8);
  CHECK_EQ(l.layers[0], 10);
  CHECK_EQ(l.groups[s->group[SPEC_GRP_TP]].n, 8);
  spec_layout_free(&l);
  spec_plan_clear(&p);
}

int main(void) {
  layout();
  round_trips();
  unresolved_json();
  hashes();
  nonuniform();
  invalid();
  layer_split();
  return check_status();
}
