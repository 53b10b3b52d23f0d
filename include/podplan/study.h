/* podplan studies (study/, library podplan_study): the validation of the cost model against
 * published training runs, and later the pillar and capacity studies and their reports. Owns
 * the study code and the built-in copies of the published data (benchmarks/data keeps the
 * files). Depends on spec.h, cm.h and store.h. */
#ifndef PODPLAN_STUDY_H
#define PODPLAN_STUDY_H

#include <stdio.h>

#include "podplan/cm.h"
#include "podplan/err.h"
#include "podplan/spec.h"

typedef struct study_validate_opts {
  const char *data;    /* a published-runs CSV; NULL: the copy built into podplan */
  const char *busbw;   /* a published nccl-tests bandwidth CSV; NULL: the built-in copy */
  const char *out_dir; /* where validate.csv goes; NULL: nowhere */
  const char *db;      /* store the published and predicted scores here; NULL: nowhere */
  FILE *out;           /* the table and the MAPE summary; NULL: stdout */
  /* a calibration (podplan calibrate): the rows on a cluster named calib_cluster take its
   * values (calib_params, a cm_params_apply list) before their own settings, and their
   * costmodel scores record calib_id; NULL: none */
  const char *calib_cluster, *calib_params;
  long long calib_id;
} study_validate_opts;

/* Kendall's rank correlation of one set of published runs of one model with several plans:
 * the rows of one source whose models have the same shape (layers, hidden, heads, FFN, sequence,
 * vocabulary, experts), predicted against published iteration time. */
#define STUDY_RANK_GROUPS 16
typedef struct study_rank_group {
  char name[64];        /* "<source> <model name of its first row>" */
  int rows;
  int concordant, discordant; /* pairs ordered alike / oppositely (ties in either: neither) */
  double tau;           /* Kendall's tau-b */
} study_rank_group;

typedef struct study_validate_summary {
  int rows, used, skipped;     /* rows read, predicted, not usable */
  int target_rows;             /* rows of the accuracy target (SC'21 Table 1, Korthikanti, MT-NLG) */
  double target_mape;          /* mean |error| of iteration time over the target rows, percent */
  double target_max;           /* largest |error| among the target rows, percent */
  int holdout_rows;
  double holdout_mape;         /* the rows kept aside to check the model, percent */
  double holdout_max;
  int infeasible;              /* published configurations the model says do not fit */
  int target_infeasible;       /* ... among the target rows */
  int mem_rows;                /* rows whose memory was evaluated: every predicted row and the
                                  skipped ones that state the plan, batch, recompute and cluster */
  int mem_incomplete;          /* skipped rows without what memory needs */
  int mem_infeasible;          /* ... of mem_rows, predicted not to fit */
  double min_headroom_gib;     /* smallest GPU memory minus predicted peak among mem_rows */
  int min_headroom_row;        /* the row it belongs to */
  int coll_points;             /* bus bandwidths compared (messages >= 64 MiB, all collectives) */
  double coll_max_err;         /* largest |error| among the 8-GPU, one-node points, percent */
  int coll_multi_points;       /* ... of them across nodes or in a larger NVLink domain */
  int coll_multi_within;       /* ... of those within 15% */
  double coll_multi_max_err;   /* largest |error| among them, percent */
  int coll_flagged;            /* points of systems their authors report as underperforming
                                  (printed, not counted above) */
  int calibrated;              /* predicted rows that took the calibration's values */
  int rank_groups;             /* sets of runs of one model with at least 3 rows */
  study_rank_group rank[STUDY_RANK_GROUPS];
} study_validate_summary;

/* Kendall's tau-b of x against y over n pairs: (C - D) / sqrt((P - Tx)(P - Ty)), P = n(n-1)/2
 * pairs, C and D the concordant and discordant pairs, Tx and Ty the pairs tied in x and in y.
 * 0 when every pair ties in x or in y (or n < 2). concordant and discordant may be NULL. */
double study_kendall_tau(const double *x, const double *y, int n, int *concordant,
                         int *discordant);

/* Predicts every usable row, prints the per-row table and the MAPE per source, per set and
 * overall, Kendall's tau per set of runs of one model (study_rank_group), the memory check over
 * every row complete enough to evaluate (the skipped rows included) with the tightest headroom,
 * then the predicted against the published bus bandwidths (all-reduce, all-gather,
 * reduce-scatter; one node, several nodes, NVLink domains); writes out_dir/validate.csv and
 * out_dir/validate_rank.csv (one line per set: source, model, rows, concordant, discordant,
 * tau) and stores the scores (source published and costmodel) in one
 * transaction. */
int study_validate(const study_validate_opts *o, study_validate_summary *sum, pp_err *err);

/* The usable rows of a published-runs CSV as the cost model sees them (for calibrate --runs):
 * the model, the cluster, the resolved plan, the parameters (defaults, then the row's
 * settings) and the published iteration time. */
typedef struct study_run {
  int row;
  char set[16];      /* "target" or "holdout" (kept aside to check the model) */
  char source[48];   /* the short name of its source */
  spec_model m;
  spec_cluster c;
  spec_plan p;
  cm_params prm;
  double published_s;
  int rank_set;      /* the index of the first run of its set of runs of one model (one source,
                        one GPU type, the same model shape), as study validate ranks them */
} study_run;
/* Reads path (NULL: the built-in copy); *skipped gets the rows not usable. */
int study_runs_load(const char *path, study_run **out, int *n, int *skipped, pp_err *err);
void study_runs_free(study_run *r, int n);

/* ---- plots (study_plot.c) ----------------------------------------------------------------
 * gnuplot draws every plot of a study or a report: body is a gnuplot script without terminal
 * or output (it reads its data files by the paths it names); study_plot writes dir/name.gp
 * that runs it twice and makes dir/name.png and dir/name.svg (width x height pixels). PP_IO
 * naming the script when gnuplot cannot run or fails. */
int study_plot(const char *dir, const char *name, int width, int height, const char *body,
               pp_err *err);
/* Copies in to out (n bytes) with the characters that would end a gnuplot single-quoted
 * string (' and \) replaced by spaces: for titles and labels taken from names. */
void study_plot_quote(const char *in, char *out, size_t n);

#endif
