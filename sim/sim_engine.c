/* Running a world in SimGrid: a child process per run (SimGrid loads one platform per process
 * and keeps global state), the platform written from the topology and the routes the
 * programs need, an actor per GPU executing its program, and the results sent back through a
 * pipe. Network model: CM02 without TCP gamma and cross-traffic (docs/models.md: SimGrid's
 * default LV08 factors model TCP, not NVLink or RDMA); link latencies are zero and latencies are
 * delays in the collectives, so that flows sharing a bottleneck share it equally. */
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <simgrid/actor.h>
#include <simgrid/comm.h>
#include <simgrid/engine.h>
#include <simgrid/host.h>
#include <simgrid/link.h>
#include <simgrid/mailbox.h>
#include <simgrid/plugins/load.h>
#include <simgrid/semaphore.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <xbt/config.h>
#include <xbt/log.h>

#include "sim_int.h"

static const char *const ev_names[SIM_NEVKINDS] = {"forward", "backward", "tp",  "cp",
                                                   "ep",      "p2p",      "dp", "optimizer"};
const char *sim_ev_name(sim_ev_kind k) { return (unsigned)k < SIM_NEVKINDS ? ev_names[k] : "?"; }

void sim_result_clear(sim_result *r) {
  if (!r) return;
  free(r->events);
  memset(r, 0, sizeof *r);
}

/* ---- the actors ------------------------------------------------------------------------------ */

enum { P2P_CACHE = 8 };
typedef struct p2p_cached {
  int ev, src, dst;
  sg_mailbox_t box;
} p2p_cached;

typedef struct gpu_actor {
  sim__world *w;
  int gpu;
  int a, b;                   /* ops to run */
  int helper;                 /* 1: runs a delegated range (overlapped communication) */
  int mb, chunk;              /* the events' microbatch and model chunk (OP_BEGIN) */
  long last_ev;               /* its last event (merged with the next when contiguous) */
  double pending;             /* delays not slept yet (flush()) */
  p2p_cached p2p[P2P_CACHE];  /* its last pipeline mailboxes (p2p_box()) */
  int p2p_next;
  int skip_a[SIM__SLOTS], skip_b[SIM__SLOTS]; /* ranges given to helpers, further on */
  struct helper_slot *pool;   /* main actor: its helpers, one per slot (NULL until one is used) */
} gpu_actor;

/* A helper actor of a GPU, kept for the whole run: each OP_ASYNC hands it a range (`work`),
 * each OP_JOIN waits for it to finish (`done`). Creating an actor per overlapped collective
 * (a stack, its guard page, a context) cost a third of a run's wall time. */
typedef struct helper_slot {
  sg_actor_t actor;
  sg_sem_t work, done;
  gpu_actor *ga; /* the helper's own state (helper = 1) */
  int busy;      /* a range handed over and not joined yet */
  int quit;      /* set by the main actor when it ends */
} helper_slot;

/* Adds t1 - t0 to the GPU's time of kind k (main actor only) and, when a trace is wanted, an
 * event, merged with the actor's previous one when it continues it. */
static void record(gpu_actor *ga, sim_ev_kind k, double t0, double t1) {
  sim__world *w = ga->w;
  if (!ga->helper) w->gpu_kind[ga->gpu][k] += t1 - t0;
  if (!w->want_events || t1 <= t0) return;
  if (ga->last_ev >= 0) {
    sim_event *e = &w->events[ga->last_ev];
    if (e->kind == k && e->microbatch == ga->mb && e->chunk == ga->chunk && e->end_s == t0) {
      e->end_s = t1;
      return;
    }
  }
  if (w->nevents == w->capevents) {
    size_t cap = w->capevents ? 2 * w->capevents : 4096;
    sim_event *e = realloc(w->events, cap * sizeof *e);
    if (!e) return;
    w->events = e;
    w->capevents = cap;
  }
  ga->last_ev = (long)w->nevents;
  w->events[w->nevents++] = (sim_event){ga->gpu, k, ga->mb, ga->chunk, t0, t1};
}

static void exec_range(gpu_actor *ga, int from, int to);
static void flush(gpu_actor *ga);

/* A pooled helper: runs each range it is handed, then says so. */
static void helper_main(int argc, char **argv) {
  (void)argc, (void)argv;
  helper_slot *hs = sg_actor_self_get_data();
  for (;;) {
    sg_sem_acquire(hs->work);
    if (hs->quit) break;
    exec_range(hs->ga, hs->ga->a, hs->ga->b);
    flush(hs->ga);
    sg_sem_release(hs->done);
  }
}

static void join_helper(gpu_actor *ga, int slot);

/* Hands ops [o->a, o->b) to the GPU's helper of o->slot, started on its first use. The
 * lowering joins a slot's range (OP_JOIN) before it hands the slot another; a range still out
 * would be waited for here first. */
static void start_helper(gpu_actor *ga, const sim__op *o) {
  if (!ga->pool) {
    ga->pool = calloc(SIM__SLOTS, sizeof *ga->pool);
    if (!ga->pool) abort(); /* the child reports a crash as a failed run */
  }
  helper_slot *hs = &ga->pool[o->slot];
  if (!hs->actor) {
    hs->ga = malloc(sizeof *hs->ga);
    if (!hs->ga) abort();
    hs->work = sg_sem_init(0);
    hs->done = sg_sem_init(0);
    char name[48];
    snprintf(name, sizeof name, "h%d.%d", o->slot, ga->gpu);
    hs->actor = sg_actor_init(name, sg_host_self());
    sg_actor_set_data(hs->actor, hs);
    sg_actor_ref(hs->actor);
    sg_actor_start_(hs->actor, helper_main, 0, NULL);
  }
  join_helper(ga, o->slot);
  *hs->ga = (gpu_actor){.w = ga->w, .gpu = ga->gpu, .a = o->a, .b = o->b, .helper = 1,
                        .mb = ga->mb, .chunk = ga->chunk, .last_ev = -1};
  hs->busy = 1;
  sg_sem_release(hs->work);
}

/* Waits for the range of helper `slot`, when one is out. */
static void join_helper(gpu_actor *ga, int slot) {
  helper_slot *hs = ga->pool ? &ga->pool[slot] : NULL;
  if (!hs || !hs->busy) return;
  sg_sem_acquire(hs->done);
  hs->busy = 0;
}

/* The main actor's end: its helpers stop (each is idle: every range was joined). */
static void end_helpers(gpu_actor *ga) {
  if (!ga->pool) return;
  for (int s = 0; s < SIM__SLOTS; s++) {
    helper_slot *hs = &ga->pool[s];
    if (!hs->actor) continue;
    join_helper(ga, s);
    hs->quit = 1;
    sg_sem_release(hs->work);
    sg_actor_join(hs->actor, -1);
    sg_actor_unref(hs->actor);
    sg_sem_destroy(hs->work);
    sg_sem_destroy(hs->done);
    free(hs->ga);
  }
  free(ga->pool);
  ga->pool = NULL;
}

/* Delays (compute, latencies) are not slept one by one: they add up in ga->pending and are
 * slept at once before the actor next deals with another actor (a message, a collective, a
 * helper, a semaphore) or ends. No one sees a sleeping actor, so the run's times do not change,
 * only how often SimGrid wakes the actor: at most once between two such ops. */
static double now(const gpu_actor *ga) { return simgrid_get_clock() + ga->pending; }

static void flush(gpu_actor *ga) {
  if (ga->pending > 0) sg_actor_sleep_for(ga->pending);
  ga->pending = 0;
}

/* The mailbox of a pipeline send or receive: from the actor's last few (a stage talks to two
 * neighbours, forward and backward; interleaving adds the wrap-around pair), else by name.
 * The ops are only read: the program was built before the fork and stays shared with the
 * parent (a write would copy its page). */
static sg_mailbox_t p2p_box(gpu_actor *ga, const sim__op *o, int src, int dst) {
  for (int k = 0; k < P2P_CACHE; k++) {
    const p2p_cached *c = &ga->p2p[k];
    if (c->box && c->ev == o->ev && c->src == src && c->dst == dst) return c->box;
  }
  char name[48];
  snprintf(name, sizeof name, "p%d.%d.%d", o->ev, src, dst);
  sg_mailbox_t box = sg_mailbox_by_name(name);
  ga->p2p[ga->p2p_next] = (p2p_cached){o->ev, src, dst, box};
  ga->p2p_next = (ga->p2p_next + 1) % P2P_CACHE;
  return box;
}

static void exec_range(gpu_actor *ga, int from, int to) {
  sim__world *w = ga->w;
  int gpu = ga->gpu;
  sim__prog *pg = &w->prog[gpu];
  int host = w->host_of ? w->host_of[gpu] : gpu;
  void *data;
  for (int i = from; i < to; i++) {
    for (int s = 0; s < SIM__SLOTS && !ga->helper; s++)
      if (i == ga->skip_a[s] && ga->skip_b[s] > i) {
        i = ga->skip_b[s];
        ga->skip_a[s] = ga->skip_b[s] = 0;
        s = -1; /* the next op may start another delegated range */
      }
    if (i >= to) break;
    sim__op *o = &pg->ops[i];
    double t0;
    switch (o->kind) {
    case SIM__OP_SLEEP:
      t0 = now(ga);
      ga->pending += o->t;
      record(ga, (sim_ev_kind)o->ev, t0, now(ga));
      break;
    case SIM__OP_COLL:
      flush(ga);
      t0 = simgrid_get_clock();
      sim__coll_exec(w, o->group, o->member, o->coll, o->algo, o->bytes);
      ga->pending += o->t > 0 ? o->t : 0; /* an aggregate's saved latencies (emit_agg) */
      record(ga, (sim_ev_kind)o->ev, t0, now(ga));
      break;
    case SIM__OP_BATCH:
      flush(ga);
      t0 = simgrid_get_clock();
      ga->pending += sim__batch_exec(w, o->group, o->member, o->bytes);
      ga->pending += o->t > 0 ? o->t : 0;
      record(ga, (sim_ev_kind)o->ev, t0, now(ga));
      break;
    case SIM__OP_SEND:
      flush(ga);
      sim__put_detached(w, host, o->peer, p2p_box(ga, o, host, o->peer), o->bytes);
      break;
    case SIM__OP_RECV: {
      flush(ga);
      t0 = simgrid_get_clock();
      sg_comm_t c = sg_mailbox_get_async(p2p_box(ga, o, o->peer, host), &data);
      sg_comm_wait(c);
      ga->pending += o->t > 0 ? o->t : 0; /* the transfer's latency */
      record(ga, SIM_EV_P2P, t0, now(ga));
      break;
    }
    case SIM__OP_ASYNC:
      flush(ga);
      start_helper(ga, o);
      if (o->a == i + 1) i = o->b - 1; /* the range follows: go on after it */
      else if (o->a > i) ga->skip_a[o->slot] = o->a, ga->skip_b[o->slot] = o->b;
      break;
    case SIM__OP_JOIN:
      flush(ga);
      t0 = simgrid_get_clock();
      join_helper(ga, o->slot);
      record(ga, (sim_ev_kind)o->ev, t0, simgrid_get_clock());
      break;
    case SIM__OP_CALL:
      for (int k = 0; k < o->count; k++) exec_range(ga, o->a, o->b);
      break;
    case SIM__OP_BEGIN: ga->mb = o->mb, ga->chunk = o->chunk; break;
    case SIM__OP_POST:
      flush(ga);
      sg_sem_release(w->sems[gpu * SIM__SEMS + o->slot]);
      break;
    case SIM__OP_WAIT:
      flush(ga);
      t0 = simgrid_get_clock();
      sg_sem_acquire(w->sems[gpu * SIM__SEMS + o->slot]);
      if (!ga->helper) record(ga, (sim_ev_kind)o->ev, t0, simgrid_get_clock()); /* idle: no event */
      break;
    }
  }
}

static void gpu_main(int argc, char **argv) {
  (void)argc, (void)argv;
  gpu_actor *ga = sg_actor_self_get_data();
  exec_range(ga, ga->a, ga->b);
  flush(ga);
  ga->w->gpu_end[ga->gpu] = simgrid_get_clock();
  end_helpers(ga);
  if (--ga->w->live == 0) sim__nvls_quit(ga->w);
  free(ga);
}

void sim__run_world(sim__world *w) {
  char name[48];
  w->sems = malloc((size_t)w->ngpu * SIM__SEMS * sizeof *w->sems);
  if (!w->sems) abort(); /* the child reports a crash as a failed run */
  for (int i = 0; i < w->ngpu * SIM__SEMS; i++) w->sems[i] = sg_sem_init(0);
  w->live = w->ngpu;
  for (int g = 0; g < w->ngpu; g++) {
    gpu_actor *ga = malloc(sizeof *ga);
    const sim__prog *pg = &w->prog[g];
    *ga = (gpu_actor){.w = w, .gpu = g, .a = pg->main_at, .b = pg->n, .mb = -1,
                      .last_ev = -1};
    sim__host_name(&w->topo, w->host_of ? w->host_of[g] : g, name, sizeof name);
    sg_actor_t a = sg_actor_init(name, sg_host_by_name(name));
    sg_actor_set_data(a, ga);
    sg_actor_start_(a, gpu_main, 0, NULL);
  }
  simgrid_run();
  sim__private_done(w);
  sim__nvls_done(w);
  sim__tree_done(w);
  for (int i = 0; i < w->ngpu * SIM__SEMS; i++) sg_sem_destroy(w->sems[i]);
  free(w->sems);
  w->sems = NULL;
}

/* ---- the child process ------------------------------------------------------------------------ */

typedef struct wire {
  int status;             /* 0 ok */
  char msg[256];
  double end_time;
  long messages;
  double util_mean[CM_NLEVELS], util_max[CM_NLEVELS];
  int levels_present;
  size_t nevents;
} wire;

static int write_all(int fd, const void *buf, size_t n) {
  const char *p = buf;
  while (n) {
    ssize_t k = write(fd, p, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return -1;
    p += k, n -= (size_t)k;
  }
  return 0;
}

static int read_all(int fd, void *buf, size_t n) {
  char *p = buf;
  while (n) {
    ssize_t k = read(fd, p, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return -1;
    p += k, n -= (size_t)k;
  }
  return 0;
}

/* The level a link kind belongs to, for utilisation. */
static cm_level level_of(sim__link_kind k) {
  static const cm_level map[SIM__NLINKKINDS] = {CM_LVL_NVLINK, CM_LVL_NVLINK_UP, CM_LVL_NET,
                                                CM_LVL_SPINE, CM_LVL_TORUS};
  return map[k];
}

/* The SimGrid links of fabric link l: a split-duplex link is two (UP, DOWN), a torus link one. */
static int sg_links_of(const sim__topo *t, int l, sg_link_t out[2]) {
  char name[48], dir[64];
  sim__link_name(t, l, name, sizeof name);
  if (sim__link_kind_of(t, l) == SIM__L_TOR) {
    out[0] = sg_link_by_name(name);
    return out[0] ? 1 : 0;
  }
  snprintf(dir, sizeof dir, "%s_UP", name);
  out[0] = sg_link_by_name(dir);
  snprintf(dir, sizeof dir, "%s_DOWN", name);
  out[1] = sg_link_by_name(dir);
  return out[0] && out[1] ? 2 : 0;
}

static void track_links(int argc, char **argv) {
  (void)argc, (void)argv;
  const sim__topo *t = sg_actor_self_get_data();
  for (int l = 0; l < t->nlinks; l++) {
    sg_link_t sl[2];
    for (int d = 0, nd = sg_links_of(t, l, sl); d < nd; d++) sg_link_load_track(sl[d]);
  }
}

/* Utilisation of each level: the bytes SimGrid's link-load plugin saw each link direction
 * carry, plus those of the private rings (sim__private_done), over (bandwidth * time); the
 * mean over the level's link directions and the largest. */
static void utilisation(sim__world *w, wire *h) {
  int cnt[CM_NLEVELS] = {0};
  for (int l = 0; l < w->topo.nlinks; l++) {
    sg_link_t sl[2];
    int nd = sg_links_of(&w->topo, l, sl);
    cm_level lv = level_of(sim__link_kind_of(&w->topo, l));
    double bw = sim__link_bw(&w->topo, l);
    h->levels_present |= 1 << lv;
    for (int d = 0; d < nd; d++) {
      double bytes = w->link_bytes[2 * l + d] += sg_link_get_cum_load(sl[d]); /* + private rings' */
      double u = bw > 0 && h->end_time > 0 ? bytes / (bw * h->end_time) : 0;
      h->util_mean[lv] += u;
      cnt[lv]++;
      if (u > h->util_max[lv]) h->util_max[lv] = u;
    }
  }
  for (int lv = 0; lv < CM_NLEVELS; lv++)
    if (cnt[lv]) h->util_mean[lv] /= cnt[lv];
}

static void child(sim__world *w, const char *platform, int fd) {
  wire h;
  memset(&h, 0, sizeof h);
  int argc = 1;
  char arg0[] = "podplan-sim", *argv[] = {arg0, NULL};
  xbt_log_control_set("root.thresh:error"); /* stderr is a file the parent reads on failure */
  simgrid_init(&argc, argv);
  sg_cfg_set_string("network/model", "CM02");
  sg_cfg_set_boolean("network/crosstraffic", "no");
  sg_cfg_set_double("network/TCP-gamma", 0);
  sg_cfg_set_int("contexts/stack-size", 256);
  sg_link_load_plugin_init(); /* before the platform: it hooks the links' creation */
  simgrid_load_platform(platform); /* throws (and aborts) on a platform SimGrid rejects */
  char loaded = 'L';
  if (write_all(fd, &loaded, 1)) _exit(3);
  w->link_bytes = calloc((size_t)2 * w->topo.nlinks + 1, sizeof *w->link_bytes);
  w->gpu_end = calloc((size_t)w->ngpu, sizeof *w->gpu_end);
  w->gpu_kind = calloc((size_t)w->ngpu, sizeof *w->gpu_kind);
  if (!w->link_bytes || !w->gpu_end || !w->gpu_kind) {
    h.status = 1;
    snprintf(h.msg, sizeof h.msg, "sim: out of memory");
  } else {
    /* the first actor tracks every link at time 0 (SimGrid 3.32 forgets the tracking of
     * links tracked before the run starts and seals the platform) */
    char h0[48];
    sim__host_name(&w->topo, 0, h0, sizeof h0);
    sg_actor_t tr = sg_actor_init("track", sg_host_by_name(h0));
    sg_actor_set_data(tr, &w->topo);
    sg_actor_start_(tr, track_links, 0, NULL);
    sim__run_world(w);
    h.end_time = simgrid_get_clock();
    h.messages = w->messages;
    utilisation(w, &h);
    h.nevents = w->nevents;
  }
  int bad = write_all(fd, &h, sizeof h) ||
            (h.status == 0 && (write_all(fd, w->gpu_end, (size_t)w->ngpu * sizeof(double)) ||
                               write_all(fd, w->gpu_kind, (size_t)w->ngpu * sizeof *w->gpu_kind) ||
                               (w->nevents && write_all(fd, w->events, w->nevents * sizeof(sim_event)))));
  close(fd);
  _exit(bad ? 3 : 0);
}

/* What the child's log says went wrong: the text of its first ERROR or CRITICAL message
 * (SimGrid's "[time] file:line: [category/ERROR] text"), else its last non-empty line; control
 * characters blanked so the reason stays on one line. */
static void log_reason(int fd, char *out, size_t cap) {
  char buf[8192];
  out[0] = 0;
  ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
  if (n <= 0) return;
  buf[n] = 0;
  const char *start = NULL, *marks[] = {"/ERROR] ", "/CRITICAL] "};
  for (int m = 0; m < 2 && !start; m++)
    if ((start = strstr(buf, marks[m]))) start += strlen(marks[m]);
  if (!start) {
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' ')) buf[--n] = 0;
    start = strrchr(buf, '\n');
    start = start ? start + 1 : buf;
  }
  size_t k = 0;
  for (; *start && *start != '\n' && k + 1 < cap; start++)
    out[k++] = (unsigned char)*start < 32 ? ' ' : *start;
  out[k] = 0;
}

/* Waits until fd has data or the deadline (monotonic seconds; 0: none) passes: 0 ready, 1 the
 * deadline passed. */
static int wait_readable(int fd, double deadline) {
  if (deadline <= 0) return 0;
  for (;;) {
    double left = deadline - sim__mono_s();
    if (left <= 0) return 1;
    struct pollfd p = {fd, POLLIN, 0};
    int k = poll(&p, 1, left > 1e6 ? 1000000000 : (int)(left * 1000) + 1);
    if (k > 0) return 0;
    if (k < 0 && errno != EINTR) return 0; /* the read that follows reports it */
  }
}

/* Writes the platform with the routes of this run to `path`; a file the caller named
 * (`named`) is written beside it and renamed when complete. */
static int write_platform(sim__world *w, const char *path, int named, pp_err *err) {
  sim__pairs pairs = {0};
  char *part = NULL;
  FILE *f = NULL;
  int rc = PP_OK;
  if (sim__collect_pairs(w, &pairs, err) || sim__mark_private(w, err)) {
    rc = err->code;
    goto done;
  }
  if (named) {
    size_t n = strlen(path) + 16;
    part = malloc(n);
    if (!part) {
      rc = pp_err_set(err, PP_NOMEM, "sim: out of memory");
      goto done;
    }
    snprintf(part, n, "%s.part", path);
  }
  f = fopen(part ? part : path, "w");
  if (!f) {
    rc = pp_err_set(err, PP_INPUT, "%s: cannot write the platform: %s", path, strerror(errno));
    goto done;
  }
  int bad = sim__platform_write(&w->topo, &pairs, f);
  bad = fclose(f) || bad;
  f = NULL;
  if (bad || (part && rename(part, path)))
    rc = pp_err_set(err, PP_IO, "%s: cannot write the platform: %s", path, strerror(errno));
done:
  sim__pairs_free(&pairs);
  if (part && rc) unlink(part);
  free(part);
  return rc;
}

/* What the child sent back, and how it ended. */
typedef struct child_out {
  wire h;
  char loaded;                    /* 'L' once SimGrid loaded the platform */
  int late, got, status;          /* past the deadline; every part read; wait4's status */
  double wall_s, peak_rss_mib;
  double *ends;                   /* [gpu] its end time */
  double (*kinds)[SIM_NEVKINDS];  /* [gpu] its time by kind */
  sim_event *ev;
} child_out;

static void child_out_free(child_out *c) { free(c->ends), free(c->kinds), free(c->ev); }

/* Forks the child on the platform at `path` (its SimGrid log to logfd), reads what it sends
 * until the deadline, and reaps it (killed when late). */
static int run_child(sim__world *w, const char *path, int logfd, double deadline, child_out *c,
                     pp_err *err) {
  memset(c, 0, sizeof *c);
  int fds[2];
  if (pipe(fds)) return pp_err_set(err, PP_IO, "sim: pipe: %s", strerror(errno));
  fflush(stdout);
  fflush(stderr);
  double t0 = sim__mono_s();
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]), close(fds[1]);
    return pp_err_set(err, PP_IO, "sim: fork: %s", strerror(errno));
  }
  if (pid == 0) {
    close(fds[0]);
    dup2(logfd, STDERR_FILENO);
    child(w, path, fds[1]);
  }
  close(fds[1]);
  c->ends = malloc((size_t)w->ngpu * sizeof *c->ends);
  c->kinds = malloc((size_t)w->ngpu * sizeof *c->kinds);
  c->late = wait_readable(fds[0], deadline);
  int got = !c->late && read_all(fds[0], &c->loaded, 1) == 0 && c->loaded == 'L';
  if (got) c->late = wait_readable(fds[0], deadline);
  got = got && !c->late && c->ends && c->kinds && read_all(fds[0], &c->h, sizeof c->h) == 0;
  if (got && c->h.status == 0)
    got = read_all(fds[0], c->ends, (size_t)w->ngpu * sizeof *c->ends) == 0 &&
          read_all(fds[0], c->kinds, (size_t)w->ngpu * sizeof *c->kinds) == 0;
  if (got && c->h.status == 0 && c->h.nevents) {
    c->ev = malloc(c->h.nevents * sizeof *c->ev);
    got = c->ev && read_all(fds[0], c->ev, c->h.nevents * sizeof *c->ev) == 0;
  }
  c->got = got;
  close(fds[0]);
  if (c->late) kill(pid, SIGKILL);
  struct rusage ru;
  memset(&ru, 0, sizeof ru);
  wait4(pid, &c->status, 0, &ru);
  c->wall_s = sim__mono_s() - t0;
  c->peak_rss_mib = ru.ru_maxrss / 1024.0;
  return PP_OK;
}

/* Why a child that did not send a whole result failed, as an error. */
static int child_error(const child_out *c, int logfd, const char *path, pp_err *err) {
  int st = c->status;
  if (c->late)
    return pp_err_set(err, PP_LIMIT, "sim: stopped at its time limit (%.3g s of the run)",
                      c->wall_s);
  if (c->got && c->h.status) return pp_err_set(err, PP_INTERNAL, "%s", c->h.msg);
  char why[400];
  log_reason(logfd, why, sizeof why);
  if (c->loaded != 'L')
    return pp_err_set(err, PP_INPUT, "%s: SimGrid rejected the platform%s%s", path,
                      *why ? ": " : "", *why ? why : "(no message)");
  if (WIFSIGNALED(st))
    return pp_err_set(err, PP_INTERNAL, "sim: SimGrid died (signal %d) on platform %s%s%s",
                      WTERMSIG(st), path, *why ? ": " : "", why);
  return pp_err_set(err, PP_INTERNAL, "sim: SimGrid failed (exit %d) on platform %s%s%s",
                    WIFEXITED(st) ? WEXITSTATUS(st) : -1, path, *why ? ": " : "", why);
}

/* The run's result from what the child sent: the slowest GPU's time, split by kind. Takes
 * the events and the end times. */
static void fill_result(sim__world *w, child_out *c, sim_result *res) {
  memset(res, 0, sizeof *res);
  res->sim_wall_s = c->wall_s;
  res->messages = c->h.messages;
  res->peak_rss_mib = c->peak_rss_mib;
  res->ranks = w->ngpu;
  memcpy(res->util_mean, c->h.util_mean, sizeof c->h.util_mean);
  memcpy(res->util_max, c->h.util_max, sizeof c->h.util_max);
  res->levels_present = c->h.levels_present;
  res->events = c->ev, c->ev = NULL;
  res->nevents = c->h.nevents;
  int slow = 0;
  for (int g = 0; g < w->ngpu; g++)
    if (c->ends[g] > c->ends[slow]) slow = g;
  res->iter_time_s = c->ends[slow];
  const double *k = c->kinds[slow];
  res->t.compute_s = k[SIM_EV_FORWARD] + k[SIM_EV_BACKWARD];
  res->t.tp_comm_s = k[SIM_EV_TP];
  res->t.cp_comm_s = k[SIM_EV_CP];
  res->t.ep_comm_s = k[SIM_EV_EP];
  res->t.dp_comm_s = k[SIM_EV_DP];
  res->t.optimizer_s = k[SIM_EV_OPTIMIZER];
  res->t.pp_p2p_s = 0;
  double rest = res->iter_time_s - res->t.compute_s - res->t.tp_comm_s - res->t.cp_comm_s -
                res->t.ep_comm_s - res->t.dp_comm_s - res->t.optimizer_s;
  res->t.pp_bubble_s = rest > 0 ? rest : 0; /* waiting on the pipeline, transfers included */
  if (w->gpu_end) memcpy(w->gpu_end, c->ends, (size_t)w->ngpu * sizeof *c->ends);
  else w->gpu_end = c->ends, c->ends = NULL;
}

int sim__in_child(sim__world *w, const char *platform_out, double deadline, sim_result *res,
                  pp_err *err) {
  char tmp[] = "/tmp/podplan-platform-XXXXXX", logpath[] = "/tmp/podplan-simlog-XXXXXX";
  const char *path = platform_out;
  if (!path) {
    int tfd = mkstemp(tmp);
    if (tfd < 0) return pp_err_set(err, PP_IO, "sim: cannot create a temporary platform file: %s",
                                   strerror(errno));
    close(tfd);
    path = tmp;
  }
  int rc = write_platform(w, path, platform_out != NULL, err), logfd = -1;
  /* SimGrid's own messages go to a file, so a failure is reported in one line */
  if (!rc && (logfd = mkstemp(logpath)) < 0)
    rc = pp_err_set(err, PP_IO, "sim: cannot create a temporary log file: %s", strerror(errno));
  if (logfd >= 0) unlink(logpath);
  child_out c;
  if (!rc && !(rc = run_child(w, path, logfd, deadline, &c, err))) {
    if (c.late || !c.got || !WIFEXITED(c.status) || WEXITSTATUS(c.status) != 0)
      rc = child_error(&c, logfd, path, err);
    else
      fill_result(w, &c, res);
    child_out_free(&c);
  }
  if (logfd >= 0) close(logfd);
  if (!platform_out) unlink(tmp);
  return rc;
}

/* ---- entry points --------------------------------------------------------------------------- */

/* 1 when some program sleeps, moves bytes or runs a collective with more than one member. */
static int has_work(const sim__world *w) {
  for (int g = 0; g < w->ngpu; g++)
    for (int i = 0; i < w->prog[g].n; i++) {
      const sim__op *o = &w->prog[g].ops[i];
      if ((o->kind == SIM__OP_SLEEP && o->t > 0) ||
          ((o->kind == SIM__OP_COLL || o->kind == SIM__OP_BATCH) && w->groups[o->group].n > 1 &&
           (o->bytes > 0 || o->t > 0)) ||
          (o->kind == SIM__OP_SEND && o->bytes > 0))
        return 1;
    }
  return 0;
}

static int world_init(sim__world *w, cm_model *cm, sim_fidelity fid, int ngpu, pp_err *err) {
  memset(w, 0, sizeof *w);
  w->cm = cm;
  sim__topo_init(&w->topo, cm_model_cluster(cm), cm);
  if (sim__topo_check(&w->topo, err)) return err->code;
  w->fidelity = fid;
  w->ngpu = ngpu;
  w->prog = calloc((size_t)ngpu, sizeof *w->prog);
  if (!w->prog) return pp_err_set(err, PP_NOMEM, "sim: out of memory");
  return PP_OK;
}

int sim_run(cm_model *cm, const spec_plan *plan, const sim_opts *o, sim_result *out,
            pp_err *err) {
  sim_opts dflt = {SIM_FAST, NULL, 0, 0, 0};
  if (!o) o = &dflt;
  memset(out, 0, sizeof *out);
  const spec_model *m = cm_model_spec(cm);
  sim__world w;
  int rc = world_init(&w, cm, o->fidelity, cm_model_cluster(cm)->gpus, err);
  if (!rc) {
    w.max_ops = o->max_ops > 0 ? o->max_ops : SIM_MAX_OPS;
    w.deadline = o->time_limit_s > 0 ? sim__mono_s() + o->time_limit_s : 0;
    w.want_events = o->events;
    w.per_layer = o->per_layer || o->fidelity == SIM_STEP;
    w.all_flows = o->all_flows;
    rc = sim__lower(&w, m, plan, err);
  }
  if (!rc && !has_work(&w))
    rc = pp_err_set(err, PP_INPUT, "sim: the plan lowers to no work on model %s (no compute, no transfer)",
                    m->name);
  if (!rc) rc = sim__in_child(&w, o->platform_out, w.deadline, out, err);
  sim__world_free(&w);
  return rc;
}

int sim_collectives(cm_model *cm, sim_coll_job *jobs, int njobs, sim_fidelity f, pp_err *err) {
  const spec_cluster *c = cm_model_cluster(cm);
  sim__world w;
  int rc = world_init(&w, cm, f, c->gpus, err);
  if (rc) {
    sim__world_free(&w);
    return rc;
  }
  /* every member of every job is its own actor: jobs sharing a GPU run at the same time */
  int actors = 0;
  for (int j = 0; j < njobs; j++) actors += jobs[j].n;
  free(w.prog);
  w.ngpu = actors;
  w.prog = calloc((size_t)actors, sizeof *w.prog);
  w.host_of = malloc((size_t)actors * sizeof *w.host_of);
  if (!w.prog || !w.host_of) rc = pp_err_set(err, PP_NOMEM, "sim: out of memory");
  int at = 0;
  for (int j = 0; j < njobs && !rc; j++) {
    if (jobs[j].n < 1 || !jobs[j].gpus || !(jobs[j].bytes >= 0) || !isfinite(jobs[j].bytes))
      rc = pp_err_set(err, PP_INPUT, "sim: job %d: needs n >= 1 GPUs and bytes >= 0 (n %d, "
                      "bytes %g)", j, jobs[j].n, jobs[j].bytes);
    for (int k = 0; k < jobs[j].n && !rc; k++)
      if (jobs[j].gpus[k] < 0 || jobs[j].gpus[k] >= c->gpus)
        rc = pp_err_set(err, PP_INPUT, "sim: job %d: gpu %d outside the %d GPUs", j,
                        jobs[j].gpus[k], c->gpus);
    int gi = rc ? -1 : sim__group_add(&w, jobs[j].gpus, jobs[j].n, err);
    if (gi < 0) {
      rc = rc ? rc : err->code;
      break;
    }
    if (jobs[j].algo == CM_ALGO_NVLSTREE && jobs[j].coll == CM_ALL_REDUCE)
      rc = sim__nvlstree_prepare(&w, gi, err);
    if (!rc && jobs[j].algo == CM_ALGO_NVLS && jobs[j].n > 1 && jobs[j].bytes > 0 &&
        !sim__nvls_ok(&w, gi, jobs[j].coll, jobs[j].bytes))
      rc = pp_err_set(err, PP_INPUT, "sim: job %d: NVLS cannot run %s there (it runs inside one "
                      "NVLink domain whose switches reduce)", j, cm_coll_name(jobs[j].coll));
    w.groups[gi].actor0 = at;
    for (int k = 0; k < jobs[j].n && !rc; k++, at++) {
      w.host_of[at] = jobs[j].gpus[k];
      rc = sim__op_push(&w.prog[at], &(sim__op){.kind = SIM__OP_COLL, .group = gi,
                                                .coll = jobs[j].coll, .algo = jobs[j].algo,
                                                .bytes = jobs[j].bytes, .member = k}, err);
    }
  }
  if (!rc && !has_work(&w))
    rc = pp_err_set(err, PP_INPUT, "sim: the %d collective job(s) move no bytes between GPUs",
                    njobs);
  sim_result r;
  if (!rc) rc = sim__in_child(&w, NULL, 0, &r, err);
  if (!rc) {
    for (int j = 0, a = 0; j < njobs; j++) {
      double t = 0;
      for (int k = 0; k < jobs[j].n; k++, a++)
        if (w.gpu_end[a] > t) t = w.gpu_end[a];
      jobs[j].time_s = t;
      jobs[j].messages = r.messages;
    }
    sim_result_clear(&r);
  }
  sim__world_free(&w);
  return rc;
}
