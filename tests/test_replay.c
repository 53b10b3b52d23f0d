/* The cuda device's NCCL calls, replayed for every rank of lowered plans without a GPU: a
 * recording device runs each rank's program through the real executor (be_exec: the
 * verifying iteration, then a timed one) and asks be_nccl.c, the planner the cuda device
 * issues from, what every op becomes (each p2p batch of the lowering one group); a simulator
 * then plays all ranks' calls under NCCL's semantics and requires every rank of every plan
 * to finish:
 * - a rank's steps (a group, or one call) run one after another, as on its one stream, and
 *   the host waits behind them as it does while verifying;
 * - a send or receive completes once its match is posted: the same (communicator, sender,
 *   receiver) in order, same count; a group completes when each of its calls has;
 * - a collective completes once every member of its communicator has posted it; members
 *   must post the same collectives (kind, count, type) in the same order.
 * Everything is blocking here, which NCCL is not everywhere (a group returns before its
 * kernels finish); a replay that finishes under these rules finishes under NCCL's, which
 * only lets some ranks run further ahead. Covers gpipe, 1f1b and interleaved, pp 1..8,
 * vpp 2..4 (interleaved with pp and 2 pp microbatches), with and without TP, CP, EP and DP
 * groups, and non-uniform plans. Controls: a hand-made deadlock shows the simulator catches
 * one, different kinds at the same place (a barrier against a collective) are caught, the
 * planner refuses to issue anything while a batch is open, and receives of one batch beyond
 * the buffers are refused. */
#include <stdlib.h>
#include <string.h>

#include "../backend/be_nccl.h"
#include "check.h"
#include "podplan/be.h"

/* ---- the recording device ------------------------------------------------------------------ */

struct be_dev {
  be_nc nc;
  int iter, op, nops; /* iteration (0 = the first, verifying), op running (-1: barrier) */
  be_nc_step *steps;  /* everything the device issued, in order */
  int nsteps, capsteps;
  be_nc_call *calls;
  int ncalls, capcalls;
  int *step_iter, *step_op; /* where each step comes from */
};

static int record(be_dev *d, pp_err *err) {
  const be_nc *nc = &d->nc;
  for (int s = 0; s < nc->nsteps; s++) {
    if (nc->steps[s].n < 1) continue;
    if (d->nsteps == d->capsteps) {
      int cap = d->capsteps ? 2 * d->capsteps : 64;
      be_nc_step *st = realloc(d->steps, (size_t)cap * sizeof *st);
      int *si = realloc(d->step_iter, (size_t)cap * sizeof *si);
      if (si) d->step_iter = si;
      int *so = realloc(d->step_op, (size_t)cap * sizeof *so);
      if (so) d->step_op = so;
      if (st) d->steps = st;
      if (!st || !si || !so) return pp_err_set(err, PP_NOMEM, "replay: out of memory");
      d->capsteps = cap;
    }
    while (d->ncalls + nc->steps[s].n > d->capcalls) {
      int cap = d->capcalls ? 2 * d->capcalls : 256;
      be_nc_call *c = realloc(d->calls, (size_t)cap * sizeof *c);
      if (!c) return pp_err_set(err, PP_NOMEM, "replay: out of memory");
      d->calls = c, d->capcalls = cap;
    }
    be_nc_step st = nc->steps[s];
    memcpy(d->calls + d->ncalls, nc->calls + st.first, (size_t)st.n * sizeof *d->calls);
    st.first = d->ncalls;
    d->ncalls += st.n;
    d->step_iter[d->nsteps] = d->iter, d->step_op[d->nsteps] = d->op;
    d->steps[d->nsteps++] = st;
  }
  return PP_OK;
}

static int rec_gemm(be_dev *d, int m, int n, int k, int batch, pp_err *err) {
  (void)d, (void)m, (void)n, (void)k, (void)batch, (void)err;
  return PP_OK;
}
static int rec_attn(be_dev *d, int batch, int sq, int skv, int dh, int causal, pp_err *err) {
  (void)d, (void)batch, (void)sq, (void)skv, (void)dh, (void)causal, (void)err;
  return PP_OK;
}
static int rec_mem(be_dev *d, double bytes, pp_err *err) {
  (void)d, (void)bytes, (void)err;
  return PP_OK;
}
static int rec_coll(be_dev *d, int group, cm_coll c, double bytes, pp_err *err) {
  be_nc_coll x;
  if (be_nc__coll(&d->nc, group, c, bytes, &x, err)) return err->code;
  return record(d, err);
}
static int rec_send(be_dev *d, int peer, double bytes, int end, pp_err *err) {
  size_t count;
  if (be_nc__send(&d->nc, peer, bytes, end, &count, err)) return err->code;
  return record(d, err);
}
static int rec_recv(be_dev *d, int peer, double bytes, int end, pp_err *err) {
  size_t count, off;
  if (be_nc__recv(&d->nc, peer, bytes, end, &count, &off, err)) return err->code;
  return record(d, err);
}
static int rec_barrier(be_dev *d, pp_err *err) {
  d->op = -1, d->iter++; /* the executor's barrier starts an iteration */
  if (be_nc__barrier(&d->nc, err)) return err->code;
  return record(d, err);
}
static int rec_mark(be_dev *d, int i, pp_err *err) {
  (void)err;
  d->op = i;
  return PP_OK;
}
static int rec_fence(be_dev *d, pp_err *err) {
  if (be_nc__flush(&d->nc, err)) return err->code;
  return record(d, err);
}
static int rec_times(be_dev *d, int n, double *t, pp_err *err) {
  (void)d, (void)err;
  for (int i = 0; i < n; i++) t[i] = i * 1e-6;
  return PP_OK;
}
static void rec_verify(be_dev *d, int on) { d->nc.verify = on; }
static double rec_peak(be_dev *d) {
  (void)d;
  return 0;
}

static const be_device rec_device = {"replay", NULL,      NULL,        rec_gemm,   rec_attn,
                                     rec_mem,  rec_coll,  rec_send,    rec_recv,   rec_barrier,
                                     rec_mark, rec_fence, rec_times,   rec_verify, rec_peak};

static void rec_free(be_dev *d) {
  if (!d) return;
  be_nc__free(&d->nc);
  free(d->steps), free(d->calls), free(d->step_iter), free(d->step_op);
}

/* ---- the simulator ------------------------------------------------------------------------- */

typedef struct sim {
  int n;                  /* ranks */
  const be_group *groups;
  int ngroups;
  be_dev *r;              /* per rank: what it issued */
  int **chan, **seq;      /* per rank and call: channel, position on it */
  int *inst_of;           /* per rank x (SPEC_NGRPS + 1): its communicator instance, -1 none */
  int nkeys, ninst;
  int *sent, *recvd;      /* per p2p channel: calls posted so far */
  int *cposted;           /* per rank x instance: collectives posted so far */
  char msg[512];
} sim;

/* Communicators: instance 0 is the world, 1 + g group g. P2P channels: (instance, sender,
 * receiver). */
static int world_peer(const sim *s, int r, const be_nc_call *c) {
  if (c->comm == BE_NC_WORLD) return c->peer;
  int inst = s->inst_of[r * (SPEC_NGRPS + 1) + c->comm + 1];
  return inst < 1 ? -1 : s->groups[inst - 1].ranks[c->peer];
}
static int inst_of(const sim *s, int r, const be_nc_call *c) {
  return s->inst_of[r * (SPEC_NGRPS + 1) + c->comm + 1];
}
static int p2p_key(const sim *s, int inst, int from, int to) {
  return (inst * s->n + from) * s->n + to;
}
static int is_p2p(const be_nc_call *c) { return c->kind == BE_NC_SEND || c->kind == BE_NC_RECV; }

static void describe(const sim *s, int r, int st, char *buf, size_t cap) {
  const be_dev *d = &s->r[r];
  int it = d->step_iter[st], op = d->step_op[st];
  const be_nc_step *x = &d->steps[st];
  if (it < 0)
    snprintf(buf, cap, "rank %d, open, step %d (%d calls)", r, st, x->n);
  else
    snprintf(buf, cap, "rank %d, iteration %d%s, %s %d, step %d (%d call%s%s)", r, it,
             it == 0 ? " (verifying)" : "", op < 0 ? "barrier" : "op", op < 0 ? 0 : op, st,
             x->n, x->n == 1 ? "" : "s", x->grouped ? ", grouped" : "");
}

/* Channels and positions of every call; checks that matches agree on size and collectives
 * on kind, in order. 0 and a message when not. */
static int sim_prepare(sim *s) {
  int n = s->n;
  s->ninst = 1 + s->ngroups;
  s->nkeys = s->ninst * n * n;
  s->inst_of = malloc((size_t)n * (SPEC_NGRPS + 1) * sizeof *s->inst_of);
  s->sent = calloc((size_t)s->nkeys, sizeof *s->sent);
  s->recvd = calloc((size_t)s->nkeys, sizeof *s->recvd);
  s->cposted = calloc((size_t)n * s->ninst, sizeof *s->cposted);
  s->chan = calloc((size_t)n, sizeof *s->chan);
  s->seq = calloc((size_t)n, sizeof *s->seq);
  assert(s->inst_of && s->sent && s->recvd && s->cposted && s->chan && s->seq);
  for (int r = 0; r < n; r++) {
    s->inst_of[r * (SPEC_NGRPS + 1)] = 0;
    for (int k = 0; k < SPEC_NGRPS; k++) {
      int *io = &s->inst_of[r * (SPEC_NGRPS + 1) + k + 1];
      *io = -1;
      for (int g = 0; g < s->ngroups; g++)
        for (int i = 0; i < s->groups[g].n; i++)
          if (s->groups[g].kind == (spec_grp)k && s->groups[g].ranks[i] == r) *io = 1 + g;
    }
  }
  /* positions: the k-th call of a rank on a channel */
  int *cnt = calloc((size_t)s->nkeys * 2 + (size_t)n * s->ninst, sizeof *cnt);
  assert(cnt);
  int ok = 1;
  for (int r = 0; r < n && ok; r++) {
    be_dev *d = &s->r[r];
    s->chan[r] = malloc((size_t)(d->ncalls ? d->ncalls : 1) * sizeof(int));
    s->seq[r] = malloc((size_t)(d->ncalls ? d->ncalls : 1) * sizeof(int));
    assert(s->chan[r] && s->seq[r]);
    for (int i = 0; i < d->ncalls && ok; i++) {
      const be_nc_call *c = &d->calls[i];
      int inst = inst_of(s, r, c);
      if (inst < 0) {
        snprintf(s->msg, sizeof s->msg, "rank %d: call %d on a %s communicator it lacks", r, i,
                 spec_grp_name((spec_grp)c->comm));
        ok = 0;
        break;
      }
      if (is_p2p(c)) {
        int p = world_peer(s, r, c);
        if (p < 0 || p >= n) {
          snprintf(s->msg, sizeof s->msg, "rank %d: call %d to peer %d?", r, i, c->peer);
          ok = 0;
          break;
        }
        int key = c->kind == BE_NC_SEND ? p2p_key(s, inst, r, p) : p2p_key(s, inst, p, r);
        s->chan[r][i] = key;
        s->seq[r][i] = cnt[2 * key + (c->kind == BE_NC_RECV)]++;
      } else {
        s->chan[r][i] = inst;
        s->seq[r][i] = cnt[2 * s->nkeys + r * s->ninst + inst]++;
      }
    }
  }
  /* every send has its receive (same count) and the reverse */
  for (int key = 0; key < s->nkeys && ok; key++)
    if (cnt[2 * key] != cnt[2 * key + 1]) {
      int inst = key / (n * n), from = key / n % n, to = key % n;
      snprintf(s->msg, sizeof s->msg, "communicator %d: rank %d sends %d messages to rank %d, "
               "which receives %d", inst, from, cnt[2 * key], to, cnt[2 * key + 1]);
      ok = 0;
    }
  for (int r = 0; r < n && ok; r++) {
    const be_dev *d = &s->r[r];
    for (int i = 0; i < d->ncalls && ok; i++) {
      const be_nc_call *c = &d->calls[i];
      if (c->kind != BE_NC_RECV) continue;
      int from = world_peer(s, r, c), key = s->chan[r][i];
      const be_dev *q = &s->r[from];
      for (int j = 0; j < q->ncalls; j++)
        if (q->calls[j].kind == BE_NC_SEND && s->chan[from][j] == key &&
            s->seq[from][j] == s->seq[r][i]) {
          if (q->calls[j].count != c->count || q->calls[j].fp32 != c->fp32) {
            snprintf(s->msg, sizeof s->msg, "rank %d receives %zu elements from rank %d, which "
                     "sends %zu", r, c->count, from, q->calls[j].count);
            ok = 0;
          }
          break;
        }
    }
  }
  /* collectives: every member's sequence on an instance is rank 0's of it */
  for (int inst = 0; inst < s->ninst && ok; inst++) {
    int nm = inst ? s->groups[inst - 1].n : n;
    int r0 = inst ? s->groups[inst - 1].ranks[0] : 0;
    for (int m = 1; m < nm && ok; m++) {
      int r = inst ? s->groups[inst - 1].ranks[m] : m;
      const be_dev *a = &s->r[r0], *b = &s->r[r];
      int i = 0, j = 0;
      for (;;) {
        while (i < a->ncalls && (is_p2p(&a->calls[i]) || s->chan[r0][i] != inst)) i++;
        while (j < b->ncalls && (is_p2p(&b->calls[j]) || s->chan[r][j] != inst)) j++;
        if (i == a->ncalls || j == b->ncalls) {
          if (i != a->ncalls || j != b->ncalls) {
            snprintf(s->msg, sizeof s->msg, "communicator %d: ranks %d and %d post different "
                     "numbers of collectives", inst, r0, r);
            ok = 0;
          }
          break;
        }
        const be_nc_call *x = &a->calls[i], *y = &b->calls[j];
        if (x->kind != y->kind || x->coll != y->coll || x->count != y->count ||
            x->fp32 != y->fp32) {
          snprintf(s->msg, sizeof s->msg, "communicator %d: collective %d differs between "
                   "ranks %d and %d", inst, s->seq[r0][i], r0, r);
          ok = 0;
          break;
        }
        i++, j++;
      }
    }
  }
  free(cnt);
  return ok;
}

static void post(sim *s, int r, int st) {
  const be_dev *d = &s->r[r];
  const be_nc_step *x = &d->steps[st];
  for (int i = x->first; i < x->first + x->n; i++) {
    const be_nc_call *c = &d->calls[i];
    if (c->kind == BE_NC_SEND) s->sent[s->chan[r][i]]++;
    else if (c->kind == BE_NC_RECV) s->recvd[s->chan[r][i]]++;
    else s->cposted[r * s->ninst + s->chan[r][i]]++;
  }
}

/* -1 when call i of rank r has its match posted, else a rank it waits for. */
static int waits_for(const sim *s, int r, int i) {
  const be_nc_call *c = &s->r[r].calls[i];
  int key = s->chan[r][i], q = s->seq[r][i];
  if (c->kind == BE_NC_SEND) return s->recvd[key] > q ? -1 : key % s->n;
  if (c->kind == BE_NC_RECV) return s->sent[key] > q ? -1 : key / s->n % s->n;
  int nm = key ? s->groups[key - 1].n : s->n;
  for (int m = 0; m < nm; m++) {
    int o = key ? s->groups[key - 1].ranks[m] : m;
    if (s->cposted[o * s->ninst + key] <= q) return o;
  }
  return -1;
}

static int step_done(const sim *s, int r, int st) {
  const be_nc_step *x = &s->r[r].steps[st];
  for (int i = x->first; i < x->first + x->n; i++)
    if (waits_for(s, r, i) >= 0) return 0;
  return 1;
}

/* Plays every rank's steps; 1 when all finish, else 0 and the stuck ranks in s->msg. */
static int sim_run(sim *s) {
  int *cur = calloc((size_t)s->n, sizeof *cur);
  assert(cur);
  for (int r = 0; r < s->n; r++)
    if (s->r[r].nsteps) post(s, r, 0);
  for (int progress = 1; progress;) {
    progress = 0;
    for (int r = 0; r < s->n; r++)
      while (cur[r] < s->r[r].nsteps && step_done(s, r, cur[r])) {
        if (++cur[r] < s->r[r].nsteps) post(s, r, cur[r]);
        progress = 1;
      }
  }
  int ok = 1;
  size_t len = 0;
  s->msg[0] = 0;
  for (int r = 0; r < s->n; r++) {
    if (cur[r] == s->r[r].nsteps) continue;
    if (ok) len += (size_t)snprintf(s->msg, sizeof s->msg, "deadlock:");
    ok = 0;
    const be_nc_step *x = &s->r[r].steps[cur[r]];
    int on = -1;
    for (int i = x->first; i < x->first + x->n && on < 0; i++) on = waits_for(s, r, i);
    char where[160];
    describe(s, r, cur[r], where, sizeof where);
    if (len < sizeof s->msg)
      len += (size_t)snprintf(s->msg + len, sizeof s->msg - len, " [%s waits for rank %d]",
                              where, on);
  }
  free(cur);
  return ok;
}

static void sim_free(sim *s) {
  for (int r = 0; r < s->n; r++) {
    if (s->chan) free(s->chan[r]);
    if (s->seq) free(s->seq[r]);
  }
  free(s->chan), free(s->seq), free(s->inst_of), free(s->sent), free(s->recvd), free(s->cposted);
}

/* ---- plans ----------------------------------------------------------------------------------- */

static int lower(const char *model, int gpus, const char *plan, be_plan **bp, pp_err *err) {
  spec_model m;
  spec_cluster c;
  spec_plan p;
  memset(&p, 0, sizeof p);
  be_lower_opts o = {0, 1, NULL};
  /* 3, 5, 6, 7, 12 ... GPUs: nodes of one GPU (the placement does not change who talks to
   * whom) */
  int odd = gpus % 8 && 8 % gpus;
  int rc = spec_model_load(model, &m, err) ||
           spec_cluster_load("dgx-h100", odd ? 8 : gpus, &c, err);
  if (!rc && odd) c.gpus = gpus, c.gpus_per_node = 1, c.nvlink.domain_gpus = 1;
  if (!rc) rc = spec_plan_parse(plan, &p, err) || spec_plan_resolve(&p, &m, &c, err);
  cm_model *cm = NULL;
  if (!rc) rc = cm_model_create(&m, &c, NULL, &cm, err) || be_lower(cm, &p, &o, bp, err);
  cm_model_destroy(cm);
  spec_plan_clear(&p);
  return rc ? err->code : PP_OK;
}

/* Records every rank as the cuda device would run it (open, the verifying iteration, one
 * timed iteration, close) and plays them. 1 when every rank finishes. */
static int replay(const be_plan *bp, const char *what) {
  int n = bp->nranks, ok = 1;
  be_dev *devs = calloc((size_t)n, sizeof *devs);
  assert(devs);
  size_t msg_cap = (size_t)bp->max_msg_bytes + 256;
  if (msg_cap < ((size_t)4 << 20)) msg_cap = (size_t)4 << 20;
  for (int r = 0; r < n && ok; r++) {
    be_dev *d = &devs[r];
    pp_err err = {0};
    be_exec_opts eo = {0, 1, 1};
    be_exec_result res = {0};
    d->iter = -1, d->op = -1, d->nops = bp->progs[r].nops;
    const be_prog *pg = &bp->progs[r];
    int rc = be_nc__init(&d->nc, r, n, bp->groups, bp->ngroups, pg->peers, pg->npeers, 2,
                         msg_cap, &err);
    if (!rc) rc = be_nc__connect(&d->nc, &err) || record(d, &err); /* open */
    if (!rc) rc = be_exec(&rec_device, d, &bp->progs[r], &eo, &res, &err);
    if (!rc) rc = be_nc__flush(&d->nc, &err) || record(d, &err); /* close */
    if (rc) {
      fprintf(stderr, "%s: rank %d: %s\n", what, r, err.msg);
      ok = 0;
    }
    be_exec_result_clear(&res);
  }
  sim s = {n, bp->groups, bp->ngroups, devs, NULL, NULL, NULL, 0, 0, NULL, NULL, NULL, {0}};
  if (ok && !sim_prepare(&s)) {
    fprintf(stderr, "%s: %s\n", what, s.msg);
    ok = 0;
  }
  if (ok && !sim_run(&s)) {
    fprintf(stderr, "%s: %s\n", what, s.msg);
    ok = 0;
  }
  sim_free(&s);
  for (int r = 0; r < n; r++) rec_free(&devs[r]);
  free(devs);
  return ok;
}

static int nplans, nfinished;

/* Lowers a plan, replays it and requires every rank to finish. */
static void check_plan(const char *model, int gpus, const char *plan) {
  be_plan *bp = NULL;
  pp_err err = {0};
  char what[600];
  snprintf(what, sizeof what, "%s on %d GPUs: %s", model, gpus, plan);
  int rc = lower(model, gpus, plan, &bp, &err);
  if (rc) fprintf(stderr, "%s: %s\n", what, err.msg);
  CHECK_EQ(rc, PP_OK);
  if (rc) return;
  nplans++;
  int ok = replay(bp, what);
  nfinished += ok;
  CHECK(ok);
  be_plan_free(bp);
}

/* All schedules, pp 1..8, vpp 2..4 (interleaved), with and without TP and DP groups, few
 * and many microbatches. */
static void uniform(void) {
  const struct {
    int tp, dp;
  } deg[] = {{1, 1}, {2, 1}, {1, 2}, {2, 2}};
  for (int pp = 1; pp <= 8; pp++)
    for (size_t g = 0; g < sizeof deg / sizeof deg[0]; g++)
      for (int sched = 0; sched < 3; sched++)
        for (int v = 1; v <= 4; v++) {
          if ((sched == 2) != (v > 1) || (sched == 2 && pp < 2)) continue;
          /* interleaved needs pp | microbatches: pp and 2 pp; the others also fewer than pp */
          int mbs_list[3] = {pp, 2 * pp, pp > 2 ? pp - 1 : 0};
          for (int k = 0; k < (sched == 2 ? 2 : 3); k++) {
            int mb = mbs_list[k];
            if (mb < 1) continue;
            int gpus = deg[g].tp * pp * deg[g].dp;
            char plan[160];
            snprintf(plan, sizeof plan, "tp=%d,pp=%d,dp=%d,vpp=%d,mbs=1,gbs=%d,schedule=%s",
                     deg[g].tp, pp, deg[g].dp, v, mb * deg[g].dp,
                     sched == 0 ? "gpipe" : sched == 1 ? "1f1b" : "interleaved");
            check_plan("gpt3-2.6b", gpus, plan);
          }
        }
}

/* CP (ring exchange), EP (all-to-all), ZeRO, sequence parallelism, and non-uniform stages
 * whose neighbours differ in size. */
static void others(void) {
  check_plan("llama3-8b", 8, "tp=2,cp=2,pp=2,mbs=1,gbs=4,sp=1");
  check_plan("llama3-8b", 4, "cp=2,pp=2,mbs=1,gbs=4");
  check_plan("llama3-8b", 8, "cp=2,pp=4,vpp=2,mbs=1,gbs=4,schedule=interleaved");
  check_plan("mixtral-8x7b", 4, "ep=2,dp=2,pp=2,mbs=1,gbs=8");
  check_plan("mixtral-8x7b", 16, "tp=2,ep=2,dp=2,pp=4,vpp=2,mbs=1,gbs=8,schedule=interleaved");
  check_plan("gpt3-1.3b", 8, "pp=4,dp=2,mbs=1,gbs=8,zero=1");
  check_plan("gpt3-1.3b", 8,
             "{\"gbs\":16,\"microbatches\":8,\"stages\":[{\"layers\":[0,10],\"gpus\":[0,1],\"tp\":2},"
             "{\"layers\":[10,24],\"gpus\":[4,5,6,7],\"tp\":2,\"dp\":2}]}");
  check_plan("gpt3-1.3b", 8,
             "{\"gbs\":16,\"microbatches\":4,\"stages\":[{\"layers\":[0,6],\"gpus\":[0,1],\"dp\":2},"
             "{\"layers\":[6,12],\"gpus\":[2]},{\"layers\":[12,24],\"gpus\":[3,4,5,6],\"dp\":4}]}");
  check_plan("gpt3-1.3b", 8,
             "{\"gbs\":16,\"microbatches\":8,\"schedule\":\"gpipe\",\"stages\":["
             "{\"layers\":[0,8],\"gpus\":[0,1,2,3],\"tp\":2,\"dp\":2},{\"layers\":[8,16],"
             "\"gpus\":[4]},{\"layers\":[16,24],\"gpus\":[5,6],\"dp\":2}]}");
}

/* The simulator itself: two ranks that each send before receiving, in separate groups,
 * deadlock; in one group they finish; collectives posted in different orders are caught. */
static void negative(void) {
  be_dev d[2];
  memset(d, 0, sizeof d);
  be_nc_step steps[2][2];
  be_nc_call calls[2][2];
  int it[2] = {0, 0}, op[2] = {0, 1};
  for (int grouped = 0; grouped < 2; grouped++) {
    for (int r = 0; r < 2; r++) {
      calls[r][0] = (be_nc_call){.kind = BE_NC_SEND, .comm = BE_NC_WORLD, .peer = 1 - r, .count = 1};
      calls[r][1] = (be_nc_call){.kind = BE_NC_RECV, .comm = BE_NC_WORLD, .peer = 1 - r, .count = 1};
      steps[r][0] = (be_nc_step){grouped, 0, grouped ? 2 : 1};
      steps[r][1] = (be_nc_step){0, 1, 1};
      d[r].steps = steps[r], d[r].nsteps = grouped ? 1 : 2;
      d[r].calls = calls[r], d[r].ncalls = 2;
      d[r].step_iter = it, d[r].step_op = op;
    }
    sim s = {2, NULL, 0, d, NULL, NULL, NULL, 0, 0, NULL, NULL, NULL, {0}};
    CHECK(sim_prepare(&s));
    CHECK_EQ(sim_run(&s), grouped);
    if (!grouped) CHECK_CONTAINS(s.msg, "deadlock");
    sim_free(&s);
  }
  /* barrier vs a collective on the world: different kinds in the same place */
  for (int r = 0; r < 2; r++) {
    calls[r][0] = (be_nc_call){.kind = r ? BE_NC_BARRIER : BE_NC_COLL, .comm = BE_NC_WORLD,
                               .count = 1};
    steps[r][0] = (be_nc_step){0, 0, 1};
    d[r].nsteps = 1, d[r].ncalls = 1;
  }
  sim s = {2, NULL, 0, d, NULL, NULL, NULL, 0, 0, NULL, NULL, NULL, {0}};
  CHECK(!sim_prepare(&s));
  CHECK_CONTAINS(s.msg, "differs");
  sim_free(&s);

  /* a batch left open: no collective, barrier or fence; closed, it is one group */
  be_nc nc;
  int peer = 1;
  pp_err err = {0};
  size_t count, off;
  CHECK_EQ(be_nc__init(&nc, 0, 2, NULL, 0, &peer, 1, 2, 1 << 20, &err), PP_OK);
  CHECK_EQ(be_nc__send(&nc, 1, 64, 0, &count, &err), PP_OK);
  CHECK_EQ(nc.nsteps, 0);
  CHECK_EQ(be_nc__flush(&nc, &err), PP_INTERNAL);
  CHECK_CONTAINS(err.msg, "open");
  CHECK_EQ(be_nc__barrier(&nc, &err), PP_INTERNAL);
  CHECK_EQ(be_nc__recv(&nc, 1, 64, 0, &count, &off, &err), PP_OK);
  CHECK_EQ(off, 0);
  CHECK_EQ(be_nc__recv(&nc, 1, 100, 1, &count, &off, &err), PP_OK);
  CHECK_EQ(off, 32); /* after the first receive's 32 elements */
  CHECK_EQ(nc.nsteps, 1);
  CHECK_EQ(nc.steps[0].grouped, 1);
  CHECK_EQ(nc.steps[0].n, 3);
  CHECK_EQ(be_nc__flush(&nc, &err), PP_OK);
  /* receives of one batch beyond the buffers */
  CHECK_EQ(be_nc__recv(&nc, 1, 1 << 20, 0, &count, &off, &err), PP_OK);
  CHECK_EQ(be_nc__recv(&nc, 1, 2, 1, &count, &off, &err), PP_INTERNAL);
  CHECK_CONTAINS(err.msg, "batch");
  be_nc__free(&nc);
}

int main(void) {
  negative();
  uniform();
  others();
  printf("%d plans replayed, %d finished\n", nplans, nfinished);
  return check_status();
}
