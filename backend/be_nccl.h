/* How the cuda device turns one rank's ops into NCCL calls, as host-side C without CUDA: which
 * sends and receives share an ncclGroup (one p2p batch of the program, be_op.batch_end), on which communicator each call runs, how big it is
 * (and be_gpu_index, the GPU a rank picks).
 * The cuda device (cuda/be_cuda_dev.c) issues exactly these calls; tests/test_replay.c replays
 * them for every rank of a plan under NCCL's matching rules. Depends on be.h only. */
#ifndef PODPLAN_BE_NCCL_H
#define PODPLAN_BE_NCCL_H

#include <stddef.h>

#include "podplan/be.h"

typedef enum {
  BE_NC_SEND,    /* ncclSend */
  BE_NC_RECV,    /* ncclRecv */
  BE_NC_COLL,    /* ncclAllReduce, ncclAllGather, ncclReduceScatter or ncclBroadcast */
  BE_NC_BARRIER, /* the job's barrier: an fp32 max all-reduce of one element on the world */
} be_nc_kind;

#define BE_NC_WORLD (-1) /* be_nc_call.comm: the world communicator (job ranks) */

typedef struct be_nc_call {
  be_nc_kind kind;
  int comm;     /* BE_NC_WORLD, or the spec_grp kind whose communicator (split) it runs on */
  int peer;     /* SEND, RECV: the peer's rank in comm */
  cm_coll coll; /* COLL: never all-to-all or send-recv (those are sends and receives) */
  size_t count; /* elements: NCCL's count argument */
  size_t off;   /* SEND: first element read from the input buffer; RECV: written in the output
                   (a batch's receives side by side) */
  int fp32;     /* 1: fp32 elements (a verified reduction), 0: the run's 16-bit type */
  int hs;       /* 1: the one-element handshake buffers instead of the input and output */
} be_nc_call;

typedef struct be_nc_step {
  int grouped;  /* 1: the calls go between ncclGroupStart and ncclGroupEnd */
  int first, n; /* be_nc.calls[first .. first + n) */
} be_nc_step;

/* A collective as issued: sizes in elements (nccl-tests convention, see cuda_coll). */
typedef struct be_nc_coll {
  int comm;            /* its communicator (a spec_grp kind) */
  int n, me;           /* group size, this rank's position */
  size_t chunk, total; /* elements: total = n * chunk */
  size_t elem;         /* bytes per element */
  int sums;            /* a reduction (all-reduce, reduce-scatter): fp32 while verifying */
} be_nc_coll;

/* One rank's planner. Every request below replaces steps/calls with what the device must
 * issue next, in order (nsteps may be 0). */
typedef struct be_nc {
  int rank, nranks;
  const be_group *groups; /* the job's communicators (be_dev_cfg.groups) */
  int ngroups;
  int *gpos;              /* this rank's position in each group, -1 when not a member */
  size_t elem;            /* bytes of the run's element (2) */
  size_t msg_cap;         /* bytes in each communication buffer */
  int verify;             /* 1: reductions in fp32 */
  unsigned char *peer;    /* per world rank: a pipeline peer, connected at open */
  int npeers;
  be_nc_call *pend;       /* the open p2p batch */
  int npend, cappend;
  size_t roff;            /* elements its receives take in the output buffer */
  be_nc_step *steps;
  int nsteps, capsteps;
  be_nc_call *calls;
  int ncalls, capcalls;
} be_nc;

/* peers: the ranks this one sends to or receives from (be_prog.peers); any other is an
 * error, except itself. */
int be_nc__init(be_nc *nc, int rank, int nranks, const be_group *groups, int ngroups,
                const int *peers, int npeers, size_t elem, size_t msg_cap, pp_err *err);
void be_nc__free(be_nc *nc);

/* At open, on every rank: one group that sends one element to every peer and receives one
 * from each, so that every pair's connections are made while all ranks are there. */
int be_nc__connect(be_nc *nc, pp_err *err);

/* A send or a receive joins the open p2p batch (*count: its elements; receive: *off, where
 * it lands in the output buffer); nothing to issue until `end`, the batch's last message:
 * then the whole batch, in order, is one group (be.h, be_op.batch_end). */
int be_nc__send(be_nc *nc, int peer, double bytes, int end, size_t *count, pp_err *err);
int be_nc__recv(be_nc *nc, int peer, double bytes, int end, size_t *count, size_t *off,
                pp_err *err);
/* Nothing to issue (at a fence): a batch left open is an error. */
int be_nc__flush(be_nc *nc, pp_err *err);
/* Collective c on group gi of `bytes` per rank (no batch open); *x gets its shape. */
int be_nc__coll(be_nc *nc, int gi, cm_coll c, double bytes, be_nc_coll *x, pp_err *err);
/* The job's barrier (no batch open). */
int be_nc__barrier(be_nc *nc, pp_err *err);

#endif
