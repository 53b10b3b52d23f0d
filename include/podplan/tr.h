/* podplan traces: timelines out (Chrome/Perfetto trace JSON, a track per GPU, the same format
 * for the simulator and the backend so the two can be compared side by side); nccl-tests logs
 * in (rows for the store's measurements); Megatron-LM arguments out. Depends on err.h and
 * spec.h. */
#ifndef PODPLAN_TR_H
#define PODPLAN_TR_H

#include <stddef.h>
#include <stdint.h>

#include "podplan/err.h"
#include "podplan/spec.h"

/* One slice of a track. */
typedef struct tr_slice {
  int track;           /* GPU (rank) */
  const char *name;    /* e.g. "forward" (static text) */
  const char *cat;     /* category: compute, comm, pipeline, tail */
  double start_s, end_s;
  int microbatch;      /* shown as an argument when >= 0 */
  int chunk;           /* model chunk (interleaved schedules) */
} tr_slice;

/* Writes slices as Chrome trace JSON ("X" events, microseconds; one thread per track, named
 * "<track_label> <n>") to a temporary file renamed over `path` at the end: a failure leaves no
 * partial file. PP_INPUT when the path cannot be written. */
int tr_chrome_write(const char *path, const char *process_name, const char *track_label,
                    const tr_slice *s, size_t n, int ntracks, pp_err *err);

/* ---- nccl-tests logs in ----------------------------------------------------------------------
 * tr_nccl_parse reads the text nccl-tests prints (2.19 columns `size count type redop root`,
 * then `time algbw busbw #wrong` out-of-place and in-place; pre-2.13 logs without `root` and
 * with an `error` column; -c 0 (`#wrong` N/A), -I per-iteration columns, -C `cputime`, a
 * trailing timestamp; `NCCL INFO` lines, also spliced into the middle of a row; OpenMPI
 * `[1,0]<stdout>:`, srun `0: ` and MPICH `[0] ` prefixes; CRLF). Figures keep nccl-tests'
 * units: time in microseconds, bandwidths in GB/s (1e9 B/s), busbw = algbw * factor(ranks).
 *
 * Damaged logs: a log that ends early (no `# Avg bus bandwidth` after its last row) keeps its
 * complete rows, drops a row cut off at the end (an unterminated last line is such a row) and
 * says so in `warning`; a row garbled in the middle of a table (wrong column count, a word
 * where a number must be) rejects the whole log with PP_INPUT "FILE:LINE: ...": a log is read
 * whole or not at all. No rows, an empty or binary file, a directory: PP_INPUT naming the file. */

#define TR_NCCL_WORD_MAX 16 /* type and redop names, including the NUL */

/* One placement of a result row (out-of-place or in-place). -1 wherever the log says N/A or
 * the column is absent. */
typedef struct tr_nccl_result {
  double time_us;    /* mean time of one operation, microseconds */
  double algbw_gbps; /* size / time, GB/s */
  double busbw_gbps; /* algbw * the collective's bus factor, GB/s */
  double wrong;      /* #wrong elements (2.13+) or the max error (`error`, before 2.13) */
  double imin_us, imax_us, ip99_us, icv_pct; /* -I: per-iteration min, max, p99, CV (%) */
} tr_nccl_result;

/* One result row: a message size with its out-of-place and in-place figures. */
typedef struct tr_nccl_row {
  uint64_t size_bytes;          /* `size`: bytes per rank as nccl-tests counts them */
  uint64_t count;               /* `count`: elements */
  char type[TR_NCCL_WORD_MAX];  /* `type`: float, half, bfloat16, ...; "" when absent */
  char redop[TR_NCCL_WORD_MAX]; /* `redop`: sum, max, none, ...; "" when absent */
  long root;                    /* `root`; -1 for none or when absent (pre-2.13) */
  tr_nccl_result out;           /* out-of-place */
  tr_nccl_result in;            /* in-place; all -1 when the log has one placement only */
  int has_in;                   /* 1 when the log has in-place columns */
  long line;                    /* line of the file the row starts on (1-based) */
} tr_nccl_row;

/* A parsed log. Release with tr_nccl_log_free. */
typedef struct tr_nccl_log {
  char collective[TR_NCCL_WORD_MAX]; /* all_reduce, all_gather, reduce_scatter, alltoall,
                                        broadcast, reduce or sendrecv */
  const char *collective_from; /* "header line" (`# Collective test starting:`), "binary name"
                                  (an `all_reduce_perf` anywhere) or "busbw/algbw" (static) */
  int ranks;                   /* ranks in the communicator; 0 when the log cannot tell */
  const char *ranks_from;      /* "device lines", "busbw/algbw" or "unknown" (static text) */
  int device_lines;            /* `#  Rank N ... device` lines read */
  int old_columns;             /* 1: pre-2.13 columns (no root, `error` for `#wrong`) */
  int per_iter;                /* 1: -I per-iteration columns */
  char version[32];            /* from `# nccl-tests version X`; "" when absent */
  tr_nccl_row *rows;           /* nrows rows in file order */
  size_t nrows;
  double avg_busbw_gbps;       /* `# Avg bus bandwidth`; -1 when absent */
  double max_busbw_gbps;       /* over every row and both placements */
  double max_algbw_gbps;
  int truncated;               /* 1: no `# Avg bus bandwidth` after the last row */
  long lines;                  /* lines in the file */
  uint64_t hash;               /* FNV-1a (64 bit) of the file's bytes */
  char warning[PP_ERR_MSG_MAX]; /* one line ("FILE: truncated after line N ...", ranks that
                                   disagree) or "" */
} tr_nccl_log;

/* Reads an nccl-tests log from a file. On failure *out is left empty (nothing to free). */
int tr_nccl_parse(const char *path, tr_nccl_log *out, pp_err *err);
/* The same on `len` bytes of text (no NUL needed); `origin` names it in messages. */
int tr_nccl_parse_text(const char *text, size_t len, const char *origin, tr_nccl_log *out,
                       pp_err *err);
/* Frees the rows; NULL does nothing; the log is left empty. */
void tr_nccl_log_free(tr_nccl_log *log);
/* The normalised collective of an nccl-tests name ("all_reduce_perf", "allreduce",
 * "all_reduce"); NULL when it is none of the seven. */
const char *tr_nccl_collective(const char *name);

/* ---- Megatron-LM arguments out -------------------------------------------------------------
 * A resolved uniform plan of model m as Megatron-LM's command-line arguments, one line
 * (malloc'd into *out): --tensor-model-parallel-size, --pipeline-model-parallel-size, the layer
 * split (--num-layers-per-virtual-pipeline-stage when vpp > 1 and the layers divide evenly;
 * --pipeline-model-parallel-layout when they do not), --context-parallel-size,
 * --expert-model-parallel-size (MoE models), --sequence-parallel, --micro-batch-size,
 * --global-batch-size, recomputation (--recompute-granularity selective; full adds
 * --recompute-method uniform --recompute-num-layers 1) and optimizer sharding (ZeRO >= 1:
 * --use-distributed-optimizer; 2 and 3: Megatron-FSDP with --data-parallel-sharding-strategy
 * optim_grads or optim_grads_params). The data-parallel size is what the GPU count leaves.
 * PP_INPUT, saying why, for a plan Megatron-LM cannot run: non-uniform, or GPipe. */
int tr_megatron_args(const spec_plan *p, const spec_model *m, char **out, pp_err *err);

#endif
