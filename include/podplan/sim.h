/* podplan simulator: a cluster's fabric (NVLink, NVLink Switch, NICs and rails, fat-tree leaves
 * and spine, torus) as a SimGrid platform built from the same topology the cost model reads,
 * and one training iteration of a plan on it with every group's traffic in flight at once, so
 * that collectives sharing links slow each other down (max-min fair sharing, SimGrid CM02
 * without TCP factors). SimGrid loads one platform per process, so every run happens in a
 * child process; the caller sees plain function calls. It works from the caller's cm_model
 * (model, cluster, parameters) and builds no cost model of its own. Depends on spec.h, cm.h
 * and SimGrid. */
#ifndef PODPLAN_SIM_H
#define PODPLAN_SIM_H

#include <stddef.h>

#include "podplan/cm.h"
#include "podplan/err.h"
#include "podplan/spec.h"

/* The simulator's revision: stored simulated results keep it in their keys (studies, search
 * runs), so that a store written by another simulator is not read back as this one's. Raise it
 * with every change that moves a simulated time (the simulator runs too long to fingerprint
 * as the cost model is: cm_fingerprint). */
#define SIM_REVISION 4 /* 2: trees along NCCL's tree, flows per pair of members; 3: PAT; 4: NVLSTree */

/* How collectives are simulated. */
typedef enum {
  SIM_FAST, /* the steady state: each rank's whole volume as one flow per channel, the latency
               term as a delay; link sharing between concurrent groups is kept */
  SIM_STEP  /* every message of every step (ring: 2(n-1) steps per channel) */
} sim_fidelity;

typedef struct sim_opts {
  sim_fidelity fidelity;
  const char *platform_out; /* write the generated SimGrid platform (XML) here; NULL: no */
  int events;               /* 1: record per-GPU activity for a trace */
  int per_layer;            /* 1: every collective of every layer as its own collective; 0
                               (SIM_FAST only): the ring-form collectives a group runs in one
                               forward or backward of a model chunk without overlap, with no
                               other collective of that group between, as one aggregated flow
                               (the same bytes and latencies; tests/test_sim_plan.c shows the
                               two agree) */
  int all_flows;            /* 1: every ring as SimGrid flows; 0: a ring whose link directions
                               no other flow crosses (a TP group inside an NVSwitch node, say)
                               runs without them, with the same times (sim_coll.c; the two
                               agree in tests/test_sim_plan.c) */
  double time_limit_s;      /* > 0: stop the simulation after this many seconds of wall time
                               (PP_LIMIT, nothing returned); 0: none */
  long long max_ops;        /* > 0: refuse (PP_LIMIT) a plan lowering to more operations than
                               this; 0: 50 million (about 4 GiB of programs) */
} sim_opts;

/* What one GPU did, for traces. */
typedef enum {
  SIM_EV_FORWARD,
  SIM_EV_BACKWARD,
  SIM_EV_TP,      /* exposed TP/SP collectives of a chunk */
  SIM_EV_CP,
  SIM_EV_EP,
  SIM_EV_P2P,     /* waiting on a pipeline send or receive */
  SIM_EV_DP,      /* data-parallel gradient reduction / parameter gather */
  SIM_EV_OPTIMIZER,
  SIM_NEVKINDS
} sim_ev_kind;
const char *sim_ev_name(sim_ev_kind k);

typedef struct sim_event {
  int gpu;
  sim_ev_kind kind;
  int microbatch;  /* -1 when not tied to one */
  int chunk;       /* model chunk (interleaved schedules), 0 otherwise */
  double start_s, end_s;
} sim_event;

typedef struct sim_result {
  double iter_time_s;          /* simulated time of one training iteration */
  cm_breakdown t;              /* the slowest GPU's time by kind (adds up to iter_time_s) */
  double sim_wall_s;           /* wall-clock seconds the simulation took (platform included) */
  double peak_rss_mib;         /* peak resident memory of the simulating process */
  long messages;               /* simulated network messages */
  int ranks;                   /* GPUs simulated */
  double util_mean[CM_NLEVELS]; /* mean utilisation of each level's links over the iteration */
  double util_max[CM_NLEVELS];  /* the busiest link of each level */
  int levels_present;           /* bit per level the fabric has */
  sim_event *events;            /* when asked for; free with sim_result_clear */
  size_t nevents;
} sim_result;

void sim_result_clear(sim_result *r);

/* Simulates one iteration of a resolved, valid plan (uniform or non-uniform) of cm's model on
 * cm's cluster. Compute times, collective latencies, bandwidth ramps and the fabric come from
 * the cost model cm (its parameters: the defaults or a calibration); cm is borrowed (its caches
 * fill) and also used by the child process the simulation runs in. */
int sim_run(cm_model *cm, const spec_plan *plan, const sim_opts *o, sim_result *out,
            pp_err *err);

/* Collectives alone: jobs run at the same time on one platform and each gets its completion
 * time (from 0). For tests, benchmarks and calibration. */
typedef struct sim_coll_job {
  cm_coll coll;
  cm_algo algo;
  double bytes;     /* per-rank buffer, nccl-tests convention */
  int n;
  const int *gpus;  /* n GPU ids */
  double time_s;    /* out */
  long messages;    /* out: messages the whole run simulated (all jobs together) */
} sim_coll_job;

/* On cm's cluster with cm's parameters (its model plays no part). */
int sim_collectives(cm_model *cm, sim_coll_job *jobs, int njobs, sim_fidelity f, pp_err *err);

/* Whether this program can simulate: PP_OK once the module podplan_sim.so is loaded, PP_NOTIMPL
 * in a build without SimGrid, else the loader's error. Only in podplan_sim_load (programs that
 * link podplan_sim itself always can). */
int sim_available(pp_err *err);

#endif
