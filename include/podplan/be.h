/* podplan backend: runs a plan's iteration for real. A plan lowers to one program per rank
 * (be_lower, from the caller's cm_model); a device (a table of function pointers: cpu =
 * OpenBLAS + MPI, always built; cuda = cuBLAS + NCCL, built when the toolkit and NCCL are
 * found) executes the ops; the executor (be_exec) times every op and verifies collectives.
 * It also owns the job (be_job_*: MPI start, ranks, gathers on rank 0) and the
 * microbenchmarks (be_bench_*). Depends on err.h, spec.h and cm.h; never includes CUDA or MPI
 * headers (MPI handles travel as void *). */
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
  int layers;       /* run this many transformer layers (0: all); spread like the plan's split */
  int shrink;       /* divide hidden, ffn, heads, kv heads and vocab by this (1 or 0: full) */
  cm_model *run_cm; /* when layers or shrink reduce the model: the cost model of the model as
                       run (be_lower_model) on the same cluster, built by the caller with the
                       parameters it wants; NULL when the model runs whole */
} be_lower_opts;

/* The model a run executes under o (NULL: the model itself): m with o->layers layers and its
 * width divided by o->shrink, named "<name>.l<L>.w<W>" when reduced, and validated. PP_INPUT
 * when the model has fewer layers or a width the divisor does not divide. */
int be_lower_model(const spec_model *m, const be_lower_opts *o, spec_model *out, pp_err *err);

/* The cost model's settings for how the backend runs m's plans: its defaults with nothing
 * overlapped (one stream per rank: the DP reduction, the ZeRO parameter gather and the TP
 * collectives count in full). `podplan run`'s prediction and a calibration from runs start
 * here. */
void be_cm_params(const spec_model *m, cm_params *p);

/* Lowers a resolved, valid plan of cm's model on cm's cluster into one program per rank, in
 * the order the plan's schedule runs them, with the shapes the cost model prices. With o
 * reducing the model, the programs are those of the model as run, priced by o->run_cm (which
 * must be of that model on the same cluster); non-uniform stages keep their share of the
 * layers and the plan is checked against the reduced model. cm is borrowed (its caches fill). */
int be_lower(cm_model *cm, const spec_plan *p, const be_lower_opts *o, be_plan **out,
             pp_err *err);
void be_plan_free(be_plan *bp);
/* The stride of group grp's GPUs on cluster c when they sit as the cost model's
 * cm_place_group(n, stride) puts a group of that size from GPU 0: first GPU + k * stride, and
 * either the whole group is inside one node or the first GPU starts an NVLink domain (and a
 * node), so that the two placements differ by a shift of whole nodes and domains; 0
 * otherwise. */
int be_group_stride(const be_plan *bp, int grp, const spec_cluster *c);

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
  double *marks;    /* [it * (nops + 1) + i]: op i's start in timed iteration it (i = nops: the
                       end), seconds from the iteration's barrier; NULL: not kept */
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

/* ---- the job ------------------------------------------------------------------------------
 * The ranks mpirun or srun started (MPI below the CLI: be_job.c, library podplan_be_job). A
 * process no launcher started is a job of one rank, rank 0 of 1, whether MPI is started or
 * not; every function works in both cases. No state but MPI's own per process. */

/* This process's rank as the launcher tells it before MPI starts (OMPI_COMM_WORLD_RANK,
 * PMIX_RANK, PMI_RANK, SLURM_PROCID); 0 when not launched: errors every rank would find are
 * printed by rank 0 only. */
int be_job_launcher_rank(void);
/* Starts MPI, once per process, when a launcher started this process or when `always` (a
 * device needs MPI even in a job of one rank); otherwise the job is this process alone and MPI
 * stays off. PP_DEVICE "MPI_Init failed"; PP_INTERNAL after be_job_finalize. */
int be_job_init(int always, pp_err *err);
/* Ends MPI when it is on. */
void be_job_finalize(void);
/* 0 in builds without MPI (PODPLAN_MPI=OFF: the one-rank stand-in, backend/mpi1), else 1. */
int be_job_has_mpi(void);
/* This rank and the job's size (0 and 1 while MPI is off). */
int be_job_rank(void);
int be_job_size(void);
/* This rank's index among the job's ranks on its node (0 while MPI is off or when unknown):
 * the cuda device uses GPU be_gpu_index(local rank, visible GPUs). Collective. */
int be_job_local_rank(void);
/* Takes the whole job down after this rank's own failure, so that no peer waits forever
 * (MPI_Abort; exits when MPI is off). */
_Noreturn void be_job_abort(int status);
/* Opens device dv for this rank of the job (MPI on): fills cfg's rank, nranks, comm and
 * local_rank (the rest is the caller's) and calls dv->open. Collective. */
int be_job_open(const be_device *dv, be_dev_cfg *cfg, be_dev **out, pp_err *err);
/* The largest v of all ranks, on every rank. Collective. */
int be_job_max(double v, double *out, pp_err *err);

/* Collective: every rank sends n bytes from buf; rank 0 receives all of them concatenated in
 * rank order in *all (malloc'd; free() it), *all_n bytes in all, and, when lens is not NULL,
 * each rank's n in lens[0 .. be_job_size() - 1]. Other ranks get NULL and 0. Every rank
 * returns the same code: PP_NOMEM when rank 0 cannot hold it all, PP_INPUT past 2 GiB in all.
 * For sharding work over the job's ranks and collecting the results on rank 0. */
int be_job_gather_bytes(const void *buf, size_t n, void **all, size_t *all_n, size_t *lens,
                        pp_err *err);

/* Collective: rank 0's n bytes at buf reach every rank. The other ranks get a malloc'd copy
 * in *out (free() it) and its size in *out_n; rank 0 gets NULL and n. Every rank returns the
 * same code: PP_NOMEM when a rank cannot hold it, PP_INPUT past 2 GiB. For what rank 0 alone
 * knows (a search's checkpointed units) and every rank needs. */
int be_job_bcast_bytes(const void *buf, size_t n, void **out, size_t *out_n, pp_err *err);

/* Every rank's be_exec_result, on rank 0. */
typedef struct be_job_result {
  int nranks, iters;
  int *nops, *displ;    /* per rank: its ops, and where they start in op_s */
  double *op_s;         /* all ranks' per-op mean seconds, concatenated */
  double *start;        /* all ranks' op starts: rank r's nops[r] + 1 begin at displ[r] + r */
  double *iter_s;       /* [rank * iters + it]: each rank's time of each timed iteration */
  double *job_s;        /* per timed iteration: the slowest rank's time */
  double *marks;        /* every rank's be_exec_result.marks, rank r's at mdispl[r]; NULL when
                           a rank kept none */
  size_t *mdispl;
  int verified;         /* 1 when every rank's verifying iteration passed */
} be_job_result;
/* Collective: rank 0 gets every rank's result in *out; the other ranks get it empty. */
int be_job_gather(const be_exec_result *r, be_job_result *out, pp_err *err);
void be_job_result_clear(be_job_result *g);
/* The job's iteration, per timed iteration the slowest rank's time: mean, min and max over
 * the timed iterations, and the rank slowest over all of them. */
void be_job_iter_stats(const be_job_result *g, double *mean, double *lo, double *hi, int *slow);
/* A collective's own time, apart from waiting for its group's last member: per timed
 * iteration, the earliest member's end minus the last member's start (every iteration starts
 * with a barrier of the job, so the members' marks share an origin), the mean over the
 * iterations. own[displ[r] + i] gets it for collective op i of rank r (the k-th collective of
 * a group on each member is one instance), 0 for other ops or without marks. */
void be_job_coll_own(const be_plan *bp, const be_job_result *g, double *own);

/* ---- microbenchmarks (podplan bench; be_bench.c) ------------------------------------------ */

typedef struct be_bench_gemm_row {
  int m, n, k;    /* the shape (in) */
  double time_s;  /* one GEMM: the mean over the timed ones */
  double tflops;  /* 2 m n k / time_s / 1e12 */
} be_bench_gemm_row;
/* A device's default shapes, squares 256 .. 2048 (cpu) or 1024 .. 16384 (cuda): the count. */
int be_bench_gemm_shapes(const char *device, be_bench_gemm_row *rows, int cap);
/* The largest operand of the shapes, elements (be_dev_cfg.max_gemm_elems). */
double be_bench_gemm_elems(const be_bench_gemm_row *rows, int n);
/* Times every shape on an open device: 3 GEMMs warm up, `reps` are timed between two marks.
 * Stops at the first failure. */
int be_bench_gemm(const be_device *dv, be_dev *d, be_bench_gemm_row *rows, int n, int reps,
                  pp_err *err);

typedef struct be_bench_coll_row {
  double bytes;         /* per rank: whole float elements, a multiple of the ranks */
  double count;         /* elements */
  double time_s[2];     /* two timings, each the mean of `iters` runs on the slowest rank */
  double algbw_gbps[2]; /* bytes / time_s / 1e9 */
  double busbw_gbps[2]; /* algbw_gbps * cm_coll_busbw_factor(coll, ranks) */
} be_bench_coll_row;
typedef struct be_bench_coll_opts {
  cm_coll coll;
  double min_bytes, max_bytes, factor; /* sizes min, min * factor, ... up to max */
  int iters, warmup;                   /* timed and untimed runs per size */
  void (*row)(const be_bench_coll_row *r, void *arg); /* after each size, on every rank */
  void *arg;
} be_bench_coll_opts;
/* The sizes of the sweep (rows be_bench_coll fills). */
int be_bench_coll_sizes(const be_bench_coll_opts *o);
/* Sweeps the sizes over every rank of the job (collective) on a device opened with group 0 =
 * all ranks: per size one run that verifies the result, `warmup` untimed runs, two timings.
 * *nrows gets the sizes done; a failing size ends the sweep with its error. */
int be_bench_coll(const be_device *dv, be_dev *d, const be_bench_coll_opts *o,
                  be_bench_coll_row *rows, int *nrows, pp_err *err);

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
