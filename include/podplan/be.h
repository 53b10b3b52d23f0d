/* podplan backend: runs a plan's iteration for real. A plan lowers to one program per rank
 * (be_lower); a device (a table of function pointers: cpu = OpenBLAS + MPI, always built;
 * cuda = cuBLAS + NCCL, built when the toolkit and NCCL are found) executes the ops; the
 * executor (be_exec) times every op and verifies collectives. Depends on err.h, spec.h and
 * cm.h; never includes CUDA or MPI headers (MPI handles travel as void *). */
#ifndef PODPLAN_BE_H
#define PODPLAN_BE_H

#include <stddef.h>

#include "podplan/cm.h"
#include "podplan/err.h"
#include "podplan/spec.h"

/* ---- programs --------------------------------------------------------------------------- */

typedef enum {
  BE_OP_GEMM,    /* batch products C[m x n] = A[m x k] B[k x n], fp32 accumulate */
  BE_OP_ATTN,    /* attention core: batch = sequences x heads, m queries, n keys, k head dim */
  BE_OP_MEM,     /* memory-bound op moving `bytes` (read + written) */
  BE_OP_COLL,    /* collective on a group, `bytes` per rank (nccl-tests convention) */
  BE_OP_SEND,    /* send `bytes` to rank `peer`, in a p2p batch (be_op.batch_end) */
  BE_OP_RECV,    /* receive `bytes` from rank `peer`, in a p2p batch */
  BE_OP_BARRIER, /* every rank of the job */
  BE_NOPKINDS
} be_op_kind;
const char *be_op_kind_name(be_op_kind k);

/* What an op is part of (the trace's slices; same names as the simulator's). */
typedef enum {
  BE_EV_FORWARD,
  BE_EV_BACKWARD,
  BE_EV_TP,
  BE_EV_CP,
  BE_EV_EP,
  BE_EV_P2P,
  BE_EV_DP,
  BE_EV_OPTIMIZER,
  BE_NEVS
} be_ev;
const char *be_ev_name(be_ev e);

typedef struct be_op {
  be_op_kind kind;
  be_ev ev;
  const char *name; /* static text: "qkv", "fc1", "attn", "norm", "tp", "grads", ... */
  int mb, chunk;    /* microbatch and model chunk; -1 outside the schedule */
  int m, n, k, batch, causal; /* GEMM, ATTN */
  double bytes;     /* MEM, COLL, SEND, RECV */
  cm_coll coll;     /* COLL */
  int group;        /* COLL: index into be_plan.groups */
  int peer;         /* SEND, RECV: rank */
  int recompute;    /* 1: recomputation (its FLOPs are not model FLOPs) */
  int batch_end;    /* SEND, RECV: 1 on the last op of its p2p batch. A batch is the sends and
                       receives since the previous one's end, consecutive ops; they are posted
                       together (one NCCL group) and that last op returns when all of them are
                       done, so its time is the batch's (the ops before it take none) */
} be_op;

/* A communicator: ranks of the job (be_plan ranks), in rank order. Groups of one kind
 * partition the ranks that take part in that kind. */
typedef struct be_group {
  spec_grp kind;
  int n;
  int *ranks;
} be_group;

typedef struct be_prog {
  int rank;  /* job rank (slot of the plan's layout) */
  int gpu;   /* the cluster GPU it stands for */
  int stage; /* pipeline rank */
  be_op *ops;
  int nops, cap;
  int *peers; /* the ranks it sends to or receives from, ascending, itself excluded */
  int npeers;
} be_prog;

typedef struct be_plan {
  int nranks;
  be_prog *progs;          /* one per rank */
  int ngroups;
  be_group *groups;
  spec_model model;        /* the model as run (depth and width reduced when asked) */
  int layers_full;         /* the model's layers before reduction */
  int shrink;              /* width divisor (1: full width) */
  spec_dtype dtype;
  double model_flops;      /* per iteration, as run (6 N tokens + causal attention) */
  double max_gemm_elems;   /* largest A, B or C of a GEMM, Q, K, V or O of an attention */
  double max_attn_elems;   /* largest attention score block, elements */
  double max_msg_bytes;    /* largest collective or send buffer, or receives of a p2p batch
                              together (they land side by side) */
} be_plan;

typedef struct be_lower_opts {
  int layers; /* run this many transformer layers (0: all); spread like the plan's split */
  int shrink; /* divide hidden, ffn, heads, kv heads and vocab by this (1 or 0: full) */
} be_lower_opts;

/* Lowers a resolved, valid plan (uniform or non-uniform) on cluster c into one program per
 * rank, in the order the plan's schedule runs them, with the shapes the cost model prices. */
int be_lower(const spec_model *m, const spec_cluster *c, const spec_plan *p,
             const be_lower_opts *o, be_plan **out, pp_err *err);
void be_plan_free(be_plan *bp);

/* ---- devices ---------------------------------------------------------------------------- */

typedef struct be_dev be_dev; /* a device's state on one rank */

typedef struct be_dev_cfg {
  int rank, nranks;        /* in the job */
  void *comm;              /* MPI_Comm * of the job */
  const be_group *groups;  /* communicators to create: the device makes one for each group
                              this rank is in (collectively, kind by kind) */
  int ngroups;
  spec_dtype dtype;
  double max_gemm_elems, max_attn_elems, max_msg_bytes; /* buffers to allocate */
  double timeout_s;        /* a communication not done by then fails with PP_DEVICE */
  int local_rank;          /* cuda: this rank's index among the job's ranks on its node; it
                              uses GPU be_gpu_index(local_rank, visible GPUs) */
  const int *peers;        /* ranks this one sends to or receives from (be_prog.peers): the
                              cuda device connects them all at open; others are refused */
  int npeers;
} be_dev_cfg;

/* The GPU a rank uses among the `visible` ones of its node: local_rank mod visible (one GPU
 * per rank whether each rank sees all the node's GPUs or, under CUDA_VISIBLE_DEVICES or a
 * scheduler's binding, only its own); -1 when none is visible or local_rank < 0. */
int be_gpu_index(int local_rank, int visible);

typedef struct be_device {
  const char *name; /* "cpu", "cuda" */
  int (*open)(const be_dev_cfg *cfg, be_dev **out, pp_err *err);
  /* Frees everything; after a failure also aborts communicators so that no peer hangs. */
  void (*close)(be_dev *d, int failed);
  int (*gemm)(be_dev *d, int m, int n, int k, int batch, pp_err *err);
  int (*attn)(be_dev *d, int batch, int sq, int skv, int dh, int causal, pp_err *err);
  int (*mem)(be_dev *d, double bytes, pp_err *err);
  int (*coll)(be_dev *d, int group, cm_coll c, double bytes, pp_err *err);
  /* A message of the open p2p batch (be_op.batch_end); `end`: the batch's last, which posts
   * all of it together and returns when all of it is done (receives' data usable). */
  int (*send)(be_dev *d, int peer, double bytes, int end, pp_err *err);
  int (*recv)(be_dev *d, int peer, double bytes, int end, pp_err *err);
  int (*barrier)(be_dev *d, pp_err *err);
  /* Timing: mark(i) records point i after everything issued so far; fence() waits for all
   * issued work (a p2p batch left open is an error); times(n, t) then gives marks 0..n-1 in seconds since
   * mark 0. Marks are reused every iteration. */
  int (*mark)(be_dev *d, int i, pp_err *err);
  int (*fence)(be_dev *d, pp_err *err);
  int (*times)(be_dev *d, int n, double *t, pp_err *err);
  /* While on, collectives and receives fill their inputs with a rank-dependent pattern and
   * check what arrives: a mismatch fails with PP_DEVICE naming the op and the element. */
  void (*verify)(be_dev *d, int on);
  /* Peak of this device for the run's dtype (FLOP/s), 0 when unknown. */
  double (*peak_flops)(be_dev *d);
} be_device;

/* ---- the executor ------------------------------------------------------------------------ */

typedef struct be_exec_opts {
  int warmup;  /* untimed iterations */
  int iters;   /* timed iterations (>= 1) */
  int verify;  /* 1: one more untimed iteration first, with collectives and receives checked */
} be_exec_opts;

typedef struct be_exec_result {
  int nops, iters;
  double *op_s;     /* per op: mean seconds over the timed iterations */
  double *op_start; /* per op: start in the last timed iteration, seconds from its start;
                       op_start[nops]: the end of the last op */
  double *iter_s;   /* per timed iteration: this rank's time from the common start */
  int verified;     /* 1 when the verifying iteration passed */
} be_exec_result;

/* Runs program pg on an open device: every iteration starts with a barrier of the job, then
 * each op with a mark after it; per-op times come from the marks. */
int be_exec(const be_device *dv, be_dev *d, const be_prog *pg, const be_exec_opts *o,
            be_exec_result *r, pp_err *err);
void be_exec_result_clear(be_exec_result *r);

/* The devices of this build ("cpu"; "cuda" when built with CUDA); NULL when unknown. */
const be_device *be_device_find(const char *name);
/* Names of the devices of this build, ", "-separated (for messages). */
const char *be_device_names(void);

/* ---- CUDA probe ----------------------------------------------------------------------- */

/* What the CUDA part of this build links against and which GPUs it sees. */
typedef struct be_cuda_info {
  int runtime_version; /* CUDA runtime linked, e.g. 13000 for 13.0 */
  int driver_version;  /* CUDA driver present; 0 when none is installed */
  int cublas_version;  /* cuBLAS, e.g. 130100 for 13.1.0 */
  int nccl_version;    /* NCCL, e.g. 22809 for 2.28.9 */
  int devices;         /* visible GPUs (0 without a driver or a GPU) */
  char device0[256];   /* name of GPU 0, "" when none */
  double device0_gib;  /* memory of GPU 0, GiB */
} be_cuda_info;

/* Fills *out. Without CUDA in the build: PP_DEVICE "built without CUDA". No GPU (no driver,
 * or a driver that sees none) is not an error: devices is 0. Any other failure to count the
 * GPUs (a driver too old, a stub driver, one that fails) is PP_DEVICE: GPU tests fail on it
 * rather than skip. */
int be_cuda_probe(be_cuda_info *out, pp_err *err);

#endif
