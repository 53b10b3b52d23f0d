/* podplan traces: timelines out (Chrome/Perfetto trace JSON, a track per GPU, the same format
 * for the simulator and the backend so the two can be compared side by side); later
 * nccl-tests logs in and Megatron-LM arguments out. Depends on err.h only. */
#ifndef PODPLAN_TR_H
#define PODPLAN_TR_H

#include <stddef.h>

#include "podplan/err.h"

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

#endif
