/* The cuda device: GEMMs with cuBLAS (bf16 or fp16 operands, fp32 accumulate), attention as
 * two strided-batched GEMMs around our row-softmax kernel, memory-bound ops with our
 * vectorised kernel, collectives and pipeline messages with NCCL: a world communicator and,
 * per group kind, one ncclCommSplit of it. Everything runs in order on one stream; fence()
 * polls the stream and every communicator against the run's timeout, so a dead or hung peer
 * becomes an error instead of a hang, and close() then aborts the communicators.
 *
 * Choices the interface leaves open (be.h):
 * - fp8 runs compute in bf16 (cuBLAS fp8 GEMMs need scaled, transposed operands the lowering
 *   does not model); peak_flops() is then the bf16 peak, the speed the run can reach.
 * - Causal attention splits the queries into 4 blocks, block i attending to the first
 *   (i + 1) / 4 of the keys: (1 + 2 + 3 + 4) / 16 = 5/8 of the full square's FLOPs (the
 *   exact triangle is 1/2 + 1/(2 s)), in 4 x 3 kernels instead of 3.
 * - Operands that do not fit the buffers in one piece (the batch of a GEMM or attention) run
 *   in slices of the batch; a single item that does not fit is an error.
 * - While verifying, reductions (all-reduce, reduce-scatter) run in fp32 with the same bytes
 *   on the wire: bf16 sums of n rank-dependent integers stop being exact beyond 256, and a
 *   ring rounds every partial sum. Data movement keeps the run's type (values 1..251 are
 *   exact in it).
 * - Which NCCL calls an op becomes, and which share a group, is planned on the host by
 *   be_nccl.c (tests/test_replay.c replays that plan for every rank): each p2p batch of the
 *   program (be_op.batch_end; Megatron's batched isend/irecv) is one NCCL group, issued at
 *   its last message, its receives side by side in the output buffer. NCCL connects a pair
 *   of ranks the first time they exchange messages and both must then ask for the same
 *   connections (ncclTransportP2pSetup swaps both directions): a send grouped with a receive
 *   from another stage asks for one direction only. So every pipeline peer (be_dev_cfg.peers)
 *   is connected at open, in one group, while every rank is there: one element each way.
 * - Communicators are blocking (NCCL's default): ncclCommInitRank, ncclCommSplit and the
 *   connections at open block the host until the peers arrive and are not bounded by the
 *   timeout; every other wait is. */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <library_types.h>
#include <math.h>
#include <mpi.h>
#include <nccl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../be_int.h"
#include "../be_nccl.h"
#include "be_cuda_kernels.h"

#define CU_WORKSPACE_BYTES ((size_t)32 << 20) /* cuBLAS workspace (NVIDIA's advice for Hopper) */
#define CU_MIN_GEMM_ELEMS ((size_t)1 << 20)   /* smallest GEMM, attention buffers (elements) */
#define CU_MIN_MSG_BYTES ((size_t)4 << 20)    /* smallest communication buffers */
#define CU_ELEM 2                             /* bytes of a bf16/fp16 element */
#define CU_SENTINEL (-1.0f)                   /* outputs before a verified op: no pattern value */
#define CU_SPIN 2000                          /* polls before the waiting loop starts sleeping */

struct be_dev {
  int rank, nranks;
  double timeout_s;
  double peak;                 /* FLOP/s, 0 when the GPU is unknown */
  cudaDataType_t cu_type;      /* CUDA_R_16BF or CUDA_R_16F */
  ncclDataType_t nc_type;      /* ncclBfloat16 or ncclFloat16 */
  be_cuda_dt kt;               /* the same for our kernels */
  cudaStream_t stream;
  cublasHandle_t blas;
  void *ws;                    /* cuBLAS workspace */
  void *a, *b, *c;             /* GEMM operands; attention Q, K = V, output */
  size_t gemm_cap;             /* elements in each */
  void *s;                     /* attention scores */
  size_t attn_cap;             /* elements */
  void *in, *out;              /* communication buffers */
  size_t msg_cap;              /* bytes in each */
  void *hs;                    /* handshakes (2 x 2 bytes at 0) and the barrier (fp32 at 16) */
  long long *idx_d, *idx_h;    /* sampled elements while verifying (device, pinned host) */
  float *smp_d, *smp_h;        /* their values */
  int smp_cap;
  ncclComm_t world;
  ncclComm_t kind_comm[SPEC_NGRPS]; /* this rank's group of each kind (NULL when none) */
  const be_group *groups;
  int ngroups;
  be_nc nc;                    /* the NCCL calls to issue (be_nccl.c) */
  cudaEvent_t *ev;             /* one per mark index, created on first use */
  unsigned char *ev_rec;       /* recorded at least once */
  int nev;
  int verify;
  int failed;                  /* an error happened: close() aborts the communicators */
  char last_op[96];            /* the last op issued, for timeout messages */
};

/* ---- errors --------------------------------------------------------------------------- */

/* "cudaMalloc(&d->a, n)" -> "cudaMalloc" */
static const char *call_name(char *buf, size_t cap, const char *expr) {
  size_t i = 0;
  while (expr[i] && expr[i] != '(' && i + 1 < cap) buf[i] = expr[i], i++;
  buf[i] = 0;
  return buf;
}

static int cuda_fail(be_dev *d, pp_err *err, const char *expr, cudaError_t e) {
  char name[64];
  d->failed = 1;
  return pp_err_set(err, PP_DEVICE, "cuda: rank %d: %s: %s", d->rank,
                    call_name(name, sizeof name, expr), cudaGetErrorString(e));
}

static int blas_fail(be_dev *d, pp_err *err, const char *expr, cublasStatus_t s) {
  char name[64];
  d->failed = 1;
  return pp_err_set(err, PP_DEVICE, "cublas: rank %d: %s: %s", d->rank,
                    call_name(name, sizeof name, expr), cublasGetStatusString(s));
}

static int nccl_fail(be_dev *d, pp_err *err, const char *expr, ncclResult_t r) {
  char name[64];
  const char *last = ncclGetLastError(NULL);
  d->failed = 1;
  return pp_err_set(err, PP_DEVICE, "nccl: rank %d: %s: %s%s%s%s", d->rank,
                    call_name(name, sizeof name, expr), ncclGetErrorString(r),
                    last && *last ? " (" : "", last && *last ? last : "",
                    last && *last ? ")" : "");
}

static int mpi_fail(be_dev *d, pp_err *err, const char *what, int code) {
  char s[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, s, &len) != MPI_SUCCESS) snprintf(s, sizeof s, "error %d", code);
  d->failed = 1;
  return pp_err_set(err, PP_DEVICE, "cuda: rank %d: %s: %s", d->rank, what, s);
}

#define CU_TRY(x)                                                   \
  do {                                                              \
    cudaError_t e_ = (x);                                           \
    if (e_ != cudaSuccess) return cuda_fail(d, err, #x, e_);        \
  } while (0)
#define BLAS_TRY(x)                                                 \
  do {                                                              \
    cublasStatus_t s_ = (x);                                        \
    if (s_ != CUBLAS_STATUS_SUCCESS) return blas_fail(d, err, #x, s_); \
  } while (0)
#define NCCL_TRY(x)                                                 \
  do {                                                              \
    ncclResult_t r_ = (x);                                          \
    if (r_ != ncclSuccess) return nccl_fail(d, err, #x, r_);        \
  } while (0)

/* A group of NCCL calls: every call is made while the previous ones succeed, the group is
 * always closed, and the first failure is reported. */
typedef struct nccl_group {
  ncclResult_t r;
  const char *call;
} nccl_group;

static void group_call(nccl_group *g, ncclResult_t r, const char *call) {
  if (g->r == ncclSuccess && r != ncclSuccess) g->r = r, g->call = call;
}

static int group_end(be_dev *d, nccl_group *g, pp_err *err) {
  ncclResult_t r = ncclGroupEnd();
  if (g->r != ncclSuccess) return nccl_fail(d, err, g->call, g->r);
  if (r != ncclSuccess) return nccl_fail(d, err, "ncclGroupEnd", r);
  return PP_OK;
}

/* ---- waiting ---------------------------------------------------------------------------- */

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Waits for everything issued on the stream by polling it and every communicator's
 * asynchronous error, until the timeout (never a blocking synchronize: a hung peer would
 * hang this rank too). */
static int wait_stream(be_dev *d, pp_err *err) {
  double t0 = now();
  for (long spin = 0;; spin++) {
    cudaError_t q = cudaStreamQuery(d->stream);
    if (q == cudaSuccess) return PP_OK;
    if (q != cudaErrorNotReady) return cuda_fail(d, err, "cudaStreamQuery", q);
    for (int k = -1; k < SPEC_NGRPS; k++) {
      ncclComm_t c = k < 0 ? d->world : d->kind_comm[k];
      if (!c) continue;
      ncclResult_t ae = ncclSuccess;
      NCCL_TRY(ncclCommGetAsyncError(c, &ae));
      if (ae != ncclSuccess && ae != ncclInProgress) {
        d->failed = 1;
        return pp_err_set(err, PP_DEVICE, "nccl: rank %d: ncclCommGetAsyncError: %s (last op: %s)",
                          d->rank, ncclGetErrorString(ae), d->last_op);
      }
    }
    if (now() - t0 > d->timeout_s) {
      d->failed = 1;
      return pp_err_set(err, PP_DEVICE,
                        "cuda: rank %d: timed out after %g s waiting for the stream (last op: %s)",
                        d->rank, d->timeout_s, d->last_op);
    }
    if (spin > CU_SPIN) {
      struct timespec ts = {0, 20000}; /* 20 us */
      nanosleep(&ts, NULL);
    }
  }
}

/* ---- opening and closing ----------------------------------------------------------------- */

/* Dense bf16/fp16 peaks by device name, most specific first (shared/data/hardware.csv; the
 * PCIe and NVL parts: NVIDIA datasheets, sparse figures halved). */
static const struct {
  const char *name;
  double flops;
} peaks[] = {
    {"GB200", 2450e12}, {"B200", 2250e12},     {"H100 PCIe", 756e12}, {"H100 NVL", 835e12},
    {"H200 NVL", 835e12}, {"H100", 989.4e12}, {"H200", 989.4e12},    {"A100", 312e12},
};

static double peak_by_name(const char *name) {
  for (size_t i = 0; i < sizeof peaks / sizeof peaks[0]; i++)
    if (strstr(name, peaks[i].name)) return peaks[i].flops;
  return 0;
}

/* The groups must be consistent on every rank (they come from one plan), so every rank
 * reaches the same verdict here, before any collective call. */
static int check_groups(const be_dev_cfg *cfg, pp_err *err) {
  for (int g = 0; g < cfg->ngroups; g++) {
    const be_group *gr = &cfg->groups[g];
    if ((unsigned)gr->kind >= SPEC_NGRPS || gr->n < 1 || !gr->ranks)
      return pp_err_set(err, PP_INTERNAL, "cuda: group %d: bad kind or size", g);
    for (int i = 0; i < gr->n; i++) {
      if (gr->ranks[i] < 0 || gr->ranks[i] >= cfg->nranks)
        return pp_err_set(err, PP_INTERNAL, "cuda: group %d: rank %d out of range", g,
                          gr->ranks[i]);
      for (int h = 0; h <= g; h++) { /* a rank in two groups of one kind */
        const be_group *o = &cfg->groups[h];
        if (o->kind != gr->kind) continue;
        for (int j = 0; j < (h == g ? i : o->n); j++)
          if (o->ranks[j] == gr->ranks[i])
            return pp_err_set(err, PP_INTERNAL, "cuda: rank %d is twice in groups of kind %s",
                              gr->ranks[i], spec_grp_name(gr->kind));
      }
    }
  }
  return PP_OK;
}

static size_t at_least(double want, size_t min, size_t align) {
  size_t n = want > (double)min ? (size_t)ceil(want) : min;
  return (n + align - 1) / align * align;
}

/* This rank's GPU, stream, cuBLAS, buffers and host tables: no communication. */
static int local_open(be_dev *d, const be_dev_cfg *cfg, pp_err *err) {
  int mr = -1;
  int e = MPI_Comm_rank(*(MPI_Comm *)cfg->comm, &mr);
  if (e != MPI_SUCCESS) return mpi_fail(d, err, "MPI_Comm_rank", e);
  if (mr != cfg->rank)
    return pp_err_set(err, PP_INTERNAL, "cuda: job rank %d is MPI rank %d", cfg->rank, mr);
  int ndev = 0;
  CU_TRY(cudaGetDeviceCount(&ndev));
  int gpu = be_gpu_index(cfg->local_rank, ndev);
  if (gpu < 0)
    return pp_err_set(err, PP_DEVICE, "cuda: rank %d (local rank %d): no GPU visible", d->rank,
                      cfg->local_rank);
  CU_TRY(cudaSetDevice(gpu));
  struct cudaDeviceProp prop;
  CU_TRY(cudaGetDeviceProperties(&prop, gpu));
  d->peak = peak_by_name(prop.name);
  CU_TRY(cudaStreamCreateWithFlags(&d->stream, cudaStreamNonBlocking));
  BLAS_TRY(cublasCreate(&d->blas));
  BLAS_TRY(cublasSetStream(d->blas, d->stream));
  CU_TRY(cudaMalloc(&d->ws, CU_WORKSPACE_BYTES));
  BLAS_TRY(cublasSetWorkspace(d->blas, d->ws, CU_WORKSPACE_BYTES));

  d->gemm_cap = at_least(cfg->max_gemm_elems, CU_MIN_GEMM_ELEMS, 64);
  d->attn_cap = at_least(cfg->max_attn_elems, CU_MIN_GEMM_ELEMS, 64);
  d->msg_cap = at_least(cfg->max_msg_bytes, CU_MIN_MSG_BYTES, 256);
  CU_TRY(cudaMalloc(&d->a, d->gemm_cap * CU_ELEM));
  CU_TRY(cudaMalloc(&d->b, d->gemm_cap * CU_ELEM));
  CU_TRY(cudaMalloc(&d->c, d->gemm_cap * CU_ELEM));
  CU_TRY(cudaMalloc(&d->s, d->attn_cap * CU_ELEM));
  CU_TRY(cudaMalloc(&d->in, d->msg_cap));
  CU_TRY(cudaMalloc(&d->out, d->msg_cap));
  CU_TRY(cudaMalloc(&d->hs, 64));
  int maxn = 1;
  for (int g = 0; g < cfg->ngroups; g++) maxn = cfg->groups[g].n > maxn ? cfg->groups[g].n : maxn;
  d->smp_cap = 3 * maxn;
  CU_TRY(cudaMalloc((void **)&d->idx_d, (size_t)d->smp_cap * sizeof *d->idx_d));
  CU_TRY(cudaMalloc((void **)&d->smp_d, (size_t)d->smp_cap * sizeof *d->smp_d));
  CU_TRY(cudaMallocHost((void **)&d->idx_h, (size_t)d->smp_cap * sizeof *d->idx_h));
  CU_TRY(cudaMallocHost((void **)&d->smp_h, (size_t)d->smp_cap * sizeof *d->smp_h));

  /* operands: pseudo-random in [-1, 1), different per rank and buffer */
  unsigned long long seed = 0x5eed0000ull + 16ull * (unsigned long long)d->rank;
  void *bufs[] = {d->a, d->b, d->c, d->s, d->in, d->out};
  size_t elems[] = {d->gemm_cap, d->gemm_cap, d->gemm_cap, d->attn_cap,
                    d->msg_cap / CU_ELEM, d->msg_cap / CU_ELEM};
  for (int i = 0; i < 6; i++) CU_TRY(be_cuda__fill_random(bufs[i], d->kt, elems[i], seed + i, d->stream));
  CU_TRY(be_cuda__fill_value(d->hs, BE_CUDA_FP32, 16, 1.0f, d->stream));
  CU_TRY(cudaStreamSynchronize(d->stream)); /* nothing to wait for from peers yet */
  return be_nc__init(&d->nc, d->rank, d->nranks, cfg->groups, cfg->ngroups, cfg->peers,
                     cfg->npeers, CU_ELEM, d->msg_cap, err);
}

/* The world communicator, then one split per group kind present, kind by kind on every rank
 * (ncclCommSplit is collective over the world). */
static int nccl_open(be_dev *d, const be_dev_cfg *cfg, pp_err *err) {
  struct {
    ncclUniqueId id;
    int ok;
  } msg;
  memset(&msg, 0, sizeof msg);
  ncclResult_t r = ncclSuccess;
  if (d->rank == 0) {
    r = ncclGetUniqueId(&msg.id);
    msg.ok = r == ncclSuccess;
  }
  int e = MPI_Bcast(&msg, (int)sizeof msg, MPI_BYTE, 0, *(MPI_Comm *)cfg->comm);
  if (e != MPI_SUCCESS) return mpi_fail(d, err, "MPI_Bcast", e);
  if (r != ncclSuccess) return nccl_fail(d, err, "ncclGetUniqueId", r);
  if (!msg.ok)
    return pp_err_set(err, PP_DEVICE, "nccl: rank %d: rank 0 could not make an NCCL id",
                      d->rank);
  ncclConfig_t conf = NCCL_CONFIG_INITIALIZER;
  conf.blocking = 1; /* whatever NCCL_COMM_BLOCKING says: the calls below expect it */
  NCCL_TRY(ncclCommInitRankConfig(&d->world, d->nranks, msg.id, d->rank, &conf));
  for (int k = 0; k < SPEC_NGRPS; k++) {
    int present = 0, color = NCCL_SPLIT_NOCOLOR, key = 0;
    for (int g = 0; g < d->ngroups; g++) {
      if (d->groups[g].kind != (spec_grp)k) continue;
      present = 1;
      if (d->nc.gpos[g] >= 0) color = g, key = d->nc.gpos[g];
    }
    if (!present) continue;
    NCCL_TRY(ncclCommSplit(d->world, color, key, &d->kind_comm[k], NULL));
    if (color == NCCL_SPLIT_NOCOLOR) continue;
    int count = 0;
    NCCL_TRY(ncclCommCount(d->kind_comm[k], &count));
    if (count != d->groups[color].n)
      return pp_err_set(err, PP_INTERNAL, "cuda: rank %d: group %d has %d ranks, its "
                        "communicator %d", d->rank, color, d->groups[color].n, count);
  }
  return PP_OK;
}

static void cuda_close(be_dev *d, int failed);
static int issue(be_dev *d, pp_err *err);

/* Every pipeline peer, in one group on every rank, while all are in open (be_nc__connect). */
static int connect_peers(be_dev *d, pp_err *err) {
  if (be_nc__connect(&d->nc, err) || issue(d, err)) return err->code;
  return wait_stream(d, err);
}

static int cuda_open(const be_dev_cfg *cfg, be_dev **out, pp_err *err) {
  *out = NULL;
  if (cfg->nranks < 1 || cfg->rank < 0 || cfg->rank >= cfg->nranks || !cfg->comm ||
      (cfg->ngroups && !cfg->groups) || cfg->ngroups < 0)
    return pp_err_set(err, PP_INTERNAL, "cuda: bad device configuration (rank %d of %d)",
                      cfg->rank, cfg->nranks);
  if (check_groups(cfg, err)) return err->code;
  be_dev *d = calloc(1, sizeof *d);
  if (!d) return pp_err_set(err, PP_NOMEM, "cuda: out of memory");
  d->rank = cfg->rank, d->nranks = cfg->nranks;
  d->groups = cfg->groups, d->ngroups = cfg->ngroups;
  d->timeout_s = cfg->timeout_s > 0 ? cfg->timeout_s : 300;
  int fp16 = cfg->dtype == SPEC_DTYPE_FP16; /* fp8 runs in bf16 (see the top) */
  d->cu_type = fp16 ? CUDA_R_16F : CUDA_R_16BF;
  d->nc_type = fp16 ? ncclFloat16 : ncclBfloat16;
  d->kt = fp16 ? BE_CUDA_FP16 : BE_CUDA_BF16;
  snprintf(d->last_op, sizeof d->last_op, "open");

  int rc = local_open(d, cfg, err);
  /* every rank learns whether all got this far, so none waits in NCCL for one that failed */
  int ok = rc == PP_OK, all_ok = 0;
  int e = MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, *(MPI_Comm *)cfg->comm);
  if (e != MPI_SUCCESS) {
    if (!rc) rc = mpi_fail(d, err, "MPI_Allreduce", e);
  } else if (!rc && !all_ok) {
    rc = pp_err_set(err, PP_DEVICE, "cuda: rank %d: another rank could not open its GPU",
                    d->rank);
  }
  if (!rc) rc = nccl_open(d, cfg, err);
  if (!rc) rc = connect_peers(d, err);
  if (rc) {
    cuda_close(d, 1);
    return rc;
  }
  *out = d;
  return PP_OK;
}

static int flush_sends(be_dev *d, pp_err *err);

static void cuda_close(be_dev *d, int failed) {
  if (!d) return;
  int aborting = failed || d->failed;
  if (!aborting && d->stream) {
    pp_err e = {0};
    if (flush_sends(d, &e) || wait_stream(d, &e)) aborting = 1;
  }
  /* children before their parent; abort makes kernels waiting for a peer return */
  for (int k = SPEC_NGRPS - 1; k >= -1; k--) {
    ncclComm_t *c = k < 0 ? &d->world : &d->kind_comm[k];
    if (!*c) continue;
    if (aborting) (void)ncclCommAbort(*c);
    else if (ncclCommDestroy(*c) != ncclSuccess) (void)ncclCommAbort(*c);
    *c = NULL;
  }
  if (d->stream) (void)cudaStreamSynchronize(d->stream); /* nothing can wait for a peer now */
  for (int i = 0; i < d->nev; i++)
    if (d->ev[i]) (void)cudaEventDestroy(d->ev[i]);
  if (d->blas) (void)cublasDestroy(d->blas);
  void *dev[] = {d->ws, d->a, d->b, d->c, d->s, d->in, d->out, d->hs, d->idx_d, d->smp_d};
  for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++)
    if (dev[i]) (void)cudaFree(dev[i]);
  if (d->idx_h) (void)cudaFreeHost(d->idx_h);
  if (d->smp_h) (void)cudaFreeHost(d->smp_h);
  if (d->stream) (void)cudaStreamDestroy(d->stream);
  be_nc__free(&d->nc);
  free(d->ev), free(d->ev_rec);
  free(d);
}

/* ---- compute ------------------------------------------------------------------------------ */

static void *at(void *base, size_t elems) { return (char *)base + elems * CU_ELEM; }

/* C[m x n] = A[m x k] B[k x n] per batch item (column-major, no transposes). */
static int cuda_gemm(be_dev *d, int m, int n, int k, int batch, pp_err *err) {
  if (m < 1 || n < 1 || k < 1 || batch < 1)
    return pp_err_set(err, PP_INTERNAL, "cuda: gemm %d x %d x %d (batch %d)?", m, n, k, batch);
  double mk = (double)m * k, kn = (double)k * n, mn = (double)m * n;
  double per = fmax(mk, fmax(kn, mn));
  if (per > (double)d->gemm_cap)
    return pp_err_set(err, PP_INTERNAL, "cuda: gemm %d x %d x %d needs %.0f elements, the "
                      "buffers hold %zu", m, n, k, per, d->gemm_cap);
  int fit = (int)fmin((double)batch, floor((double)d->gemm_cap / per));
  snprintf(d->last_op, sizeof d->last_op, "gemm %dx%dx%d (batch %d)", m, n, k, batch);
  const float one = 1.0f, zero = 0.0f;
  for (int b0 = 0; b0 < batch; b0 += fit) {
    int nb = batch - b0 < fit ? batch - b0 : fit;
    if (nb == 1)
      BLAS_TRY(cublasGemmEx(d->blas, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, d->a, d->cu_type,
                            m, d->b, d->cu_type, k, &zero, d->c, d->cu_type, m,
                            CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    else
      BLAS_TRY(cublasGemmStridedBatchedEx(
          d->blas, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, d->a, d->cu_type, m,
          (long long)mk, d->b, d->cu_type, k, (long long)kn, &zero, d->c, d->cu_type, m,
          (long long)mn, nb, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }
  return PP_OK;
}

/* Per (sequence, head): S = Q K^T / sqrt(dh), row softmax, O = P V. Column-major, one item:
 * Q is dh x sq, K and V dh x skv (both in buffer b), S skv x sq (a query's scores contiguous),
 * O dh x sq. Causal: 4 query blocks, block i against the first (i + 1) / 4 of the keys. */
static int cuda_attn(be_dev *d, int batch, int sq, int skv, int dh, int causal, pp_err *err) {
  if (batch < 1 || sq < 1 || skv < 1 || dh < 1)
    return pp_err_set(err, PP_INTERNAL, "cuda: attention %d x %d x %d (batch %d)?", sq, skv,
                      dh, batch);
  double qe = (double)sq * dh, ke = (double)skv * dh, se = (double)sq * skv;
  double fit_d = fmin(floor((double)d->gemm_cap / fmax(qe, ke)), floor((double)d->attn_cap / se));
  if (fit_d < 1)
    return pp_err_set(err, PP_INTERNAL, "cuda: attention %d x %d x %d needs %.0f operand and "
                      "%.0f score elements, the buffers hold %zu and %zu", sq, skv, dh,
                      fmax(qe, ke), se, d->gemm_cap, d->attn_cap);
  int fit = (int)fmin((double)batch, fit_d);
  snprintf(d->last_op, sizeof d->last_op, "attention %dx%dx%d (batch %d%s)", sq, skv, dh, batch,
           causal ? ", causal" : "");
  const float scale = 1.0f / sqrtf((float)dh), one = 1.0f, zero = 0.0f;
  const int blocks = causal && sq >= 4 ? 4 : 1;
  for (int b0 = 0; b0 < batch; b0 += fit) {
    int nb = batch - b0 < fit ? batch - b0 : fit;
    for (int blk = 0; blk < blocks; blk++) {
      int q0 = (int)((long long)sq * blk / blocks), q1 = (int)((long long)sq * (blk + 1) / blocks);
      int keys = blocks == 1 ? skv : (int)((long long)skv * (blk + 1) / blocks);
      int rows = q1 - q0;
      if (rows < 1) continue;
      if (keys < 1) keys = 1;
      BLAS_TRY(cublasGemmStridedBatchedEx(
          d->blas, CUBLAS_OP_T, CUBLAS_OP_N, keys, rows, dh, &scale, d->b, d->cu_type, dh,
          (long long)ke, at(d->a, (size_t)q0 * dh), d->cu_type, dh, (long long)qe, &zero,
          at(d->s, (size_t)q0 * skv), d->cu_type, skv, (long long)se, nb, CUBLAS_COMPUTE_32F,
          CUBLAS_GEMM_DEFAULT));
      CU_TRY(be_cuda__softmax_rows(at(d->s, (size_t)q0 * skv), d->kt, nb, rows, keys, skv,
                                   (long long)se, d->stream));
      BLAS_TRY(cublasGemmStridedBatchedEx(
          d->blas, CUBLAS_OP_N, CUBLAS_OP_N, dh, rows, keys, &one, d->b, d->cu_type, dh,
          (long long)ke, at(d->s, (size_t)q0 * skv), d->cu_type, skv, (long long)se, &zero,
          at(d->c, (size_t)q0 * dh), d->cu_type, dh, (long long)qe, nb, CUBLAS_COMPUTE_32F,
          CUBLAS_GEMM_DEFAULT));
    }
  }
  return PP_OK;
}

/* Reads bytes/2 from buffer a and writes bytes/2 into buffer c, in passes of a buffer. */
static int cuda_mem(be_dev *d, double bytes, pp_err *err) {
  if (!(bytes >= 0) || bytes > 1e18)
    return pp_err_set(err, PP_INTERNAL, "cuda: memory op of %g bytes?", bytes);
  size_t left = (size_t)(bytes / (2 * CU_ELEM)), cap = d->gemm_cap / 8 * 8;
  snprintf(d->last_op, sizeof d->last_op, "memory op of %.0f bytes", bytes);
  while (left > 0) {
    size_t n = left < cap ? left : cap;
    CU_TRY(be_cuda__axpb(d->a, d->c, d->kt, n, d->stream));
    left -= n;
  }
  return PP_OK;
}

/* ---- verification --------------------------------------------------------------------------- */

/* The pattern's value in chunk j (as be_cuda__fill_pattern writes it). */
static double pattern(int c0, int c1, long long j) {
  const long long mod = BE_CUDA_PATTERN_MOD;
  return (double)(1 + ((c0 % mod) + (c1 % mod) * (j % mod) % mod) % mod);
}

/* Copies the first, middle and last element of each of nch chunks of chunk elements of buf
 * back, once the stream gets there, and compares chunk i's with want(ctx, i). */
static int check_sample(be_dev *d, const void *buf, be_cuda_dt t, size_t nch, size_t chunk,
                        double (*want)(const void *ctx, size_t i), const void *ctx,
                        const char *what, pp_err *err) {
  if (nch * 3 > (size_t)d->smp_cap)
    return pp_err_set(err, PP_INTERNAL, "cuda: %zu chunks to sample, room for %d", nch,
                      d->smp_cap / 3);
  int n = 0;
  for (size_t i = 0; i < nch; i++) {
    d->idx_h[n++] = (long long)(i * chunk);
    d->idx_h[n++] = (long long)(i * chunk + chunk / 2);
    d->idx_h[n++] = (long long)(i * chunk + chunk - 1);
  }
  CU_TRY(cudaMemcpyAsync(d->idx_d, d->idx_h, (size_t)n * sizeof *d->idx_h,
                         cudaMemcpyHostToDevice, d->stream));
  CU_TRY(be_cuda__gather(buf, t, d->idx_d, n, d->smp_d, d->stream));
  CU_TRY(cudaMemcpyAsync(d->smp_h, d->smp_d, (size_t)n * sizeof *d->smp_h,
                         cudaMemcpyDeviceToHost, d->stream));
  if (wait_stream(d, err)) return err->code;
  double w = 0;
  for (int s = 0; s < n; s++) {
    if (s % 3 == 0) w = want(ctx, (size_t)s / 3);
    if ((double)d->smp_h[s] != w) {
      d->failed = 1;
      return pp_err_set(err, PP_DEVICE, "cuda: rank %d: %s: element %lld is %g, expected %g",
                        d->rank, what, d->idx_h[s], (double)d->smp_h[s], w);
    }
  }
  return PP_OK;
}

/* ---- issuing the planned NCCL calls ---------------------------------------------------------- */

static void *at_b(void *base, size_t elems, size_t elem) { return (char *)base + elems * elem; }

static ncclComm_t comm_of(be_dev *d, int comm) {
  return comm == BE_NC_WORLD ? d->world : d->kind_comm[comm];
}

typedef ncclResult_t (*coll_fn)(const void *in, void *out, size_t count, ncclDataType_t t,
                                ncclComm_t comm, cudaStream_t s);
static ncclResult_t nc_ar(const void *in, void *out, size_t count, ncclDataType_t t,
                          ncclComm_t comm, cudaStream_t s) {
  return ncclAllReduce(in, out, count, t, ncclSum, comm, s);
}
static ncclResult_t nc_ag(const void *in, void *out, size_t count, ncclDataType_t t,
                          ncclComm_t comm, cudaStream_t s) {
  return ncclAllGather(in, out, count, t, comm, s);
}
static ncclResult_t nc_rs(const void *in, void *out, size_t count, ncclDataType_t t,
                          ncclComm_t comm, cudaStream_t s) {
  return ncclReduceScatter(in, out, count, t, ncclSum, comm, s);
}
static ncclResult_t nc_bc(const void *in, void *out, size_t count, ncclDataType_t t,
                          ncclComm_t comm, cudaStream_t s) {
  return ncclBroadcast(in, out, count, t, 0, comm, s);
}

/* The collectives be_nccl.c issues as one call (the others are sends and receives). */
static const struct {
  coll_fn fn;
  const char *call;
} nccl_colls[CM_NCOLLS] = {
    [CM_ALL_REDUCE] = {nc_ar, "ncclAllReduce"},
    [CM_ALL_GATHER] = {nc_ag, "ncclAllGather"},
    [CM_REDUCE_SCATTER] = {nc_rs, "ncclReduceScatter"},
    [CM_BROADCAST] = {nc_bc, "ncclBroadcast"},
};

static ncclResult_t call_send(be_dev *d, const be_nc_call *c, ncclDataType_t t, size_t el,
                              const char **name) {
  *name = "ncclSend";
  const void *buf = c->hs ? d->hs : at_b(d->in, c->off, el);
  return ncclSend(buf, c->count, t, c->peer, comm_of(d, c->comm), d->stream);
}
static ncclResult_t call_recv(be_dev *d, const be_nc_call *c, ncclDataType_t t, size_t el,
                              const char **name) {
  *name = "ncclRecv";
  void *buf = c->hs ? at_b(d->hs, 1, CU_ELEM) : at_b(d->out, c->off, el);
  return ncclRecv(buf, c->count, t, c->peer, comm_of(d, c->comm), d->stream);
}
static ncclResult_t call_coll(be_dev *d, const be_nc_call *c, ncclDataType_t t, size_t el,
                              const char **name) {
  (void)el;
  if ((unsigned)c->coll >= CM_NCOLLS || !nccl_colls[c->coll].fn) {
    *name = "collective";
    return ncclInvalidArgument;
  }
  *name = nccl_colls[c->coll].call;
  return nccl_colls[c->coll].fn(d->in, d->out, c->count, t, comm_of(d, c->comm), d->stream);
}
static ncclResult_t call_barrier(be_dev *d, const be_nc_call *c, ncclDataType_t t, size_t el,
                                 const char **name) {
  (void)t, (void)el;
  *name = "ncclAllReduce";
  float *one = at_b(d->hs, 16, 1);
  return ncclAllReduce(one, one, 1, ncclFloat32, ncclMax, comm_of(d, c->comm), d->stream);
}

static ncclResult_t (*const call_fns[])(be_dev *d, const be_nc_call *c, ncclDataType_t t,
                                        size_t el, const char **name) = {
    [BE_NC_SEND] = call_send, [BE_NC_RECV] = call_recv, [BE_NC_COLL] = call_coll,
    [BE_NC_BARRIER] = call_barrier};

/* What a step is, for timeout messages. */
static void describe(be_dev *d, const be_nc_step *st) {
  const be_nc_call *c = &d->nc.calls[st->first], *last = c + st->n - 1;
  char *s = d->last_op;
  size_t cap = sizeof d->last_op;
  if (c->kind == BE_NC_BARRIER)
    snprintf(s, cap, "barrier");
  else if (c->comm != BE_NC_WORLD)
    snprintf(s, cap, "%s on the %s communicator", cm_coll_name(c->coll),
             spec_grp_name((spec_grp)c->comm));
  else if (c->hs)
    snprintf(s, cap, "connecting %d pipeline peers", st->n / 2);
  else
    snprintf(s, cap, "p2p batch of %d messages (last: %s rank %d)", st->n,
             last->kind == BE_NC_RECV ? "recv from" : "send to", last->peer);
}

/* Issues steps [from, to) of those be_nccl.c planned last, in order: a grouped step between
 * ncclGroupStart and ncclGroupEnd (always closed; the first failure reported). */
static int issue_steps(be_dev *d, int from, int to, pp_err *err) {
  const be_nc *nc = &d->nc;
  for (int s = from; s < to; s++) {
    const be_nc_step *st = &nc->steps[s];
    if (st->n < 1) continue;
    describe(d, st);
    if (st->grouped) NCCL_TRY(ncclGroupStart());
    nccl_group g = {ncclSuccess, NULL};
    for (int i = st->first; i < st->first + st->n; i++) {
      const be_nc_call *c = &nc->calls[i];
      const char *name = "?";
      ncclResult_t r = call_fns[c->kind](d, c, c->fp32 ? ncclFloat32 : d->nc_type,
                                         c->fp32 ? 4 : CU_ELEM, &name);
      group_call(&g, r, name);
      if (r != ncclSuccess && !st->grouped) break;
    }
    if (st->grouped) {
      if (group_end(d, &g, err)) return err->code;
    } else if (g.r != ncclSuccess) {
      return nccl_fail(d, err, g.call, g.r);
    }
  }
  return PP_OK;
}

static int issue(be_dev *d, pp_err *err) { return issue_steps(d, 0, d->nc.nsteps, err); }

static int flush_sends(be_dev *d, pp_err *err) {
  if (be_nc__flush(&d->nc, err)) return err->code;
  return issue(d, err);
}

/* ---- collectives ---------------------------------------------------------------------------- */

/* What a collective reads and checks: its input holds in_n elements, chunks of in_chunk
 * filled with pattern(c0, c1, chunk index); its output nch chunks of out_chunk elements,
 * chunk i holding want(i). */
typedef struct coll_shape {
  size_t in_n, in_chunk;
  int c0, c1;
  size_t nch, out_chunk;
} coll_shape;

typedef struct coll_row {
  void (*shape)(const be_nc_coll *x, coll_shape *s);
  double (*want)(const void *x, size_t i);
} coll_row;

#define CU_STEP 7 /* pattern step between chunks */
#define CU_BCAST_BASE 17

static void shape_ar(const be_nc_coll *x, coll_shape *s) {
  *s = (coll_shape){x->total, x->total, x->me, 0, (size_t)x->n, x->chunk};
}
static double want_ar(const void *p, size_t i) {
  const be_nc_coll *x = p;
  (void)i;
  double s = 0;
  for (int r = 0; r < x->n; r++) s += pattern(r, 0, 0);
  return s;
}

static void shape_ag(const be_nc_coll *x, coll_shape *s) {
  *s = (coll_shape){x->chunk, x->chunk, x->me, 0, (size_t)x->n, x->chunk};
}
static double want_ag(const void *p, size_t i) {
  (void)p;
  return pattern((int)i, 0, 0);
}

static void shape_rs(const be_nc_coll *x, coll_shape *s) {
  *s = (coll_shape){x->total, x->chunk, x->me, CU_STEP, 1, x->chunk};
}
static double want_rs(const void *p, size_t i) {
  const be_nc_coll *x = p;
  (void)i;
  double s = 0;
  for (int r = 0; r < x->n; r++) s += pattern(r, CU_STEP, x->me);
  return s;
}

/* all-to-all: chunk j of the input goes to member j */
static void shape_a2a(const be_nc_coll *x, coll_shape *s) {
  *s = (coll_shape){x->total, x->chunk, x->me, CU_STEP, (size_t)x->n, x->chunk};
}
static double want_a2a(const void *p, size_t i) {
  const be_nc_coll *x = p;
  return pattern((int)i, CU_STEP, x->me);
}

static void shape_bc(const be_nc_coll *x, coll_shape *s) {
  *s = (coll_shape){x->total, x->chunk, CU_BCAST_BASE, CU_STEP, (size_t)x->n, x->chunk};
}
static double want_bc(const void *p, size_t i) {
  (void)p;
  return pattern(CU_BCAST_BASE, CU_STEP, (long long)i);
}

/* ring exchange: from the previous member */
static void shape_sr(const be_nc_coll *x, coll_shape *s) {
  *s = (coll_shape){x->total, x->total, x->me, 0, 1, x->total};
}
static double want_sr(const void *p, size_t i) {
  const be_nc_coll *x = p;
  (void)i;
  return pattern((x->me + x->n - 1) % x->n, 0, 0);
}

static const coll_row colls[CM_NCOLLS] = {
    [CM_ALL_REDUCE] = {shape_ar, want_ar},   [CM_ALL_GATHER] = {shape_ag, want_ag},
    [CM_REDUCE_SCATTER] = {shape_rs, want_rs}, [CM_ALL_TO_ALL] = {shape_a2a, want_a2a},
    [CM_BROADCAST] = {shape_bc, want_bc},    [CM_SEND_RECV] = {shape_sr, want_sr},
};

/* Sizes and calls: be_nc__coll (nccl-tests convention). */
static int cuda_coll(be_dev *d, int gi, cm_coll c, double bytes, pp_err *err) {
  be_nc_coll x;
  if (be_nc__coll(&d->nc, gi, c, bytes, &x, err)) return err->code;
  if (!d->kind_comm[x.comm])
    return pp_err_set(err, PP_INTERNAL, "cuda: rank %d has no %s communicator", d->rank,
                      spec_grp_name((spec_grp)x.comm));
  be_cuda_dt kt = x.elem == 4 ? BE_CUDA_FP32 : d->kt;
  coll_shape s;
  colls[c].shape(&x, &s);
  /* steps before the collective's own (none: be_nc__coll refuses an open batch) go first */
  int last = d->nc.nsteps - 1;
  if (issue_steps(d, 0, last, err)) return err->code;
  if (d->verify) {
    CU_TRY(be_cuda__fill_pattern(d->in, kt, s.in_n, s.in_chunk, s.c0, s.c1, d->stream));
    CU_TRY(be_cuda__fill_value(d->out, kt, s.nch * s.out_chunk, CU_SENTINEL, d->stream));
  }
  if (issue_steps(d, last, last + 1, err)) return err->code;
  if (!d->verify) return PP_OK;
  char what[64];
  snprintf(what, sizeof what, "%s on group %d", cm_coll_name(c), gi);
  return check_sample(d, d->out, kt, s.nch, s.out_chunk, colls[c].want, &x, what, err);
}

/* ---- pipeline messages ----------------------------------------------------------------------- */

static double want_msg(const void *p, size_t i) {
  (void)i;
  return pattern(*(const int *)p, 0, 0);
}

/* Issues what be_nccl.c planned (a batch at its end, else nothing); while verifying, checks
 * every receive of it. */
static int issue_batch(be_dev *d, pp_err *err) {
  if (issue(d, err)) return err->code;
  for (int i = 0; i < d->nc.ncalls && d->verify; i++) {
    const be_nc_call *c = &d->nc.calls[i];
    if (c->kind != BE_NC_RECV) continue;
    char what[48];
    snprintf(what, sizeof what, "recv from rank %d", c->peer);
    if (check_sample(d, at(d->out, c->off), d->kt, 1, c->count, want_msg, &c->peer, what, err))
      return err->code;
  }
  return PP_OK;
}

static int cuda_send(be_dev *d, int peer, double bytes, int end, pp_err *err) {
  size_t count = 0;
  if (be_nc__send(&d->nc, peer, bytes, end, &count, err)) return err->code;
  if (d->verify) CU_TRY(be_cuda__fill_pattern(d->in, d->kt, count, count, d->rank, 0, d->stream));
  return issue_batch(d, err);
}

static int cuda_recv(be_dev *d, int peer, double bytes, int end, pp_err *err) {
  size_t count = 0, off = 0;
  if (be_nc__recv(&d->nc, peer, bytes, end, &count, &off, err)) return err->code;
  if (d->verify) CU_TRY(be_cuda__fill_value(at(d->out, off), d->kt, count, CU_SENTINEL, d->stream));
  return issue_batch(d, err);
}

static int cuda_barrier(be_dev *d, pp_err *err) {
  if (be_nc__barrier(&d->nc, err) || issue(d, err)) return err->code;
  return wait_stream(d, err);
}

/* ---- timing ------------------------------------------------------------------------------------ */

static int cuda_mark(be_dev *d, int i, pp_err *err) {
  if (i < 0) return pp_err_set(err, PP_INTERNAL, "cuda: mark %d?", i);
  if (i >= d->nev) {
    int n = i + 1 > 2 * d->nev ? i + 1 : 2 * d->nev;
    if (n < 64) n = 64;
    cudaEvent_t *ev = realloc(d->ev, (size_t)n * sizeof *ev);
    if (!ev) return pp_err_set(err, PP_NOMEM, "cuda: out of memory");
    d->ev = ev;
    unsigned char *rec = realloc(d->ev_rec, (size_t)n);
    if (!rec) return pp_err_set(err, PP_NOMEM, "cuda: out of memory");
    d->ev_rec = rec;
    memset(d->ev + d->nev, 0, (size_t)(n - d->nev) * sizeof *ev);
    memset(d->ev_rec + d->nev, 0, (size_t)(n - d->nev));
    d->nev = n;
  }
  if (!d->ev[i]) CU_TRY(cudaEventCreate(&d->ev[i]));
  CU_TRY(cudaEventRecord(d->ev[i], d->stream));
  d->ev_rec[i] = 1;
  return PP_OK;
}

static int cuda_fence(be_dev *d, pp_err *err) {
  if (flush_sends(d, err)) return err->code;
  return wait_stream(d, err);
}

static int cuda_times(be_dev *d, int n, double *t, pp_err *err) {
  for (int i = 0; i < n; i++) {
    if (i >= d->nev || !d->ev_rec[i])
      return pp_err_set(err, PP_INTERNAL, "cuda: mark %d was never made", i);
    float ms = 0;
    CU_TRY(cudaEventElapsedTime(&ms, d->ev[0], d->ev[i]));
    t[i] = ms * 1e-3;
  }
  return PP_OK;
}

static void cuda_verify(be_dev *d, int on) { d->verify = on; }

static double cuda_peak(be_dev *d) { return d->peak; }

const be_device be_cuda_device = {"cuda",    cuda_open,  cuda_close, cuda_gemm,   cuda_attn,
                                  cuda_mem,  cuda_coll,  cuda_send,  cuda_recv,   cuda_barrier,
                                  cuda_mark, cuda_fence, cuda_times, cuda_verify, cuda_peak};
