/* The calibration jobs `podplan calibrate` runs (built with calibrate/, GSL), each ending in
 * one stored calibration: the fit of a cluster's stored measurements and backend runs; the
 * funnel's last step (a stored search's top plans run on the backend, then fitted); the fit of
 * published runs' iteration times with cross-validation. calibrate/ fits; store/ reads and
 * writes (a calibration in one transaction); the backend gives the settings it runs a plan
 * with (be_cm_params). Printing is the caller's. */
#include <errno.h>
#include <math.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "podplan/be.h"
#include "podplan/fs.h"
#include "podplan/study.h"

static const char *const kind_group[CAL_NKINDS] = {"collectives", "GEMMs", "ops", "iterations"};

void study_cal_job_free(study_cal_job *j) {
  store_meas_list_free(&j->rows);
  for (size_t i = 0; j->specs && i < j->nruns; i++) spec_plan_clear(&j->specs[i].p);
  store_backend_runs_free(j->runs, j->nruns);
  free(j->specs), free(j->obs), free(j->key), free(j->run_of), free(j->summary_json);
  for (int i = 0; j->launched && j->launched[i]; i++) free(j->launched[i]);
  free(j->launched);
  cal_result_free(&j->r);
  memset(j, 0, sizeof *j);
}

/* A left-out observation, counted by reason. */
static void skip(study_cal_job *j, const char *why) {
  for (int k = 0; k < j->nwhy; k++)
    if (strcmp(j->why[k], why) == 0) {
      j->why_n[k]++;
      return;
    }
  if (j->nwhy < STUDY_CAL_WHY) j->why[j->nwhy] = why, j->why_n[j->nwhy++] = 1;
}

/* Whether a run key is one of the job's (every one without --from-search). */
static int wanted(const study_cal_job *j, const char *key) {
  if (!j->launched) return 1;
  for (char *const *k = j->launched; *k; k++)
    if (key && strcmp(*k, key) == 0) return 1;
  return 0;
}

static int read_inputs(const study_cal_opts *o, const char *cluster_name, study_cal_job *j,
                       pp_err *err) {
  store *s = NULL;
  store_opts ro = {.readonly = 1};
  int iters_only = o->kind && strcmp(o->kind, "iter") == 0;
  int rc = store_open(o->db, &ro, &s, err);
  if (!rc && !iters_only) rc = store_get_measurements(s, cluster_name, o->kind, &j->rows, err);
  if (!rc && (!o->kind || iters_only))
    rc = store_get_backend_runs(s, cluster_name, &j->runs, &j->nruns, err);
  store_close(s);
  if (rc) return rc;
  for (size_t i = 0; i < j->rows.n; i++)
    if (j->rows.rows[i].ranks > j->max_ranks) j->max_ranks = j->rows.rows[i].ranks;
  size_t cap = j->rows.n + j->nruns + 1;
  j->obs = calloc(cap, sizeof *j->obs);
  j->key = calloc(cap, sizeof *j->key);
  j->run_of = calloc(cap, sizeof *j->run_of);
  j->specs = calloc(j->nruns + 1, sizeof *j->specs);
  if (!j->obs || !j->key || !j->run_of || !j->specs)
    return pp_err_set(err, PP_NOMEM, "calibrate: out of memory");
  return PP_OK;
}

/* A backend run as an iteration observation: its specs parsed, the backend's settings; NULL,
 * or why it is left out. */
static const char *run_obs(study_cal_job *j, size_t i, pp_err *err) {
  const spec_cluster *c = &j->cluster;
  const store_backend_run *r = &j->runs[i];
  study_cal_run *x = &j->specs[i];
  if ((strcmp(r->device, "cpu") == 0) != c->gpu.cpu)
    return c->gpu.cpu ? "a run on GPUs; the cluster's ranks are CPU processes"
                      : "a run on CPUs, not on the cluster's GPUs";
  if (spec_model_load(r->model_json, &x->m, err) ||
      spec_cluster_load(r->cluster_json, 0, &x->c, err) || spec_plan_parse(r->plan_json, &x->p, err))
    return "a run whose stored specs do not load";
  if (spec_plan_resolve(&x->p, &x->m, &x->c, err)) return "a run whose plan does not resolve";
  be_cm_params(&x->m, &x->prm);
  pp_err e = {0};
  if (spec_plan_format(&x->p, x->plan_text, sizeof x->plan_text, &e))
    snprintf(x->plan_text, sizeof x->plan_text, "-"); /* non-uniform: no string form */
  j->obs[j->n] = (cal_obs){.kind = CAL_ITER, .id = r->score_id, .time_s = r->iter_time_s,
                           .model = &x->m, .cluster = &x->c, .plan = &x->p, .base = &x->prm};
  j->key[j->n] = r->run_key;
  j->run_of[j->n++] = (int)i;
  return NULL;
}

/* The stored rows and runs as observations: a run's ops of one shape merged into one, a
 * backward attention's score product folded into it, the rest counted by reason. */
static void to_obs(study_cal_job *j) {
  for (size_t i = 0; i < j->rows.n; i++) {
    const store_measurement *r = &j->rows.rows[i];
    const char *why;
    int of_run = strncmp(r->run_key, "run:", 4) == 0;
    if ((of_run || j->launched) && !wanted(j, r->run_key)) continue; /* --from-search: its runs */
    if (!cal_obs_from_row(r, j->rows.ids[i], &j->cluster, &j->obs[j->n], &why)) {
      skip(j, why);
      continue;
    }
    j->key[j->n] = of_run ? r->run_key : NULL;
    j->run_of[j->n++] = -1;
  }
  size_t n0 = j->n, unpaired = 0;
  j->n = cal_obs_merge(j->obs, j->key, j->n);
  j->merged = n0 - j->n;
  j->n = cal_obs_fold_attn(j->obs, j->key, j->n, &unpaired);
  for (size_t i = 0; i < j->n; i++) {
    const cal_obs *ob = &j->obs[i];
    j->folded += ob->kind == CAL_OP && ob->lop == CM_LOP_ATTN && ob->backward;
  }
  for (size_t k = 0; k < unpaired; k++)
    skip(j, "a backward attention without its score product (flash attention off)");
  for (size_t i = 0; i < j->nruns; i++) {
    if (!wanted(j, j->runs[i].run_key)) continue;
    pp_err e = {0};
    const char *why = run_obs(j, i, &e);
    if (why) skip(j, why);
  }
}

/* The group of observation i: 1 + the index of the first observation of its run (its key). */
static int group_of(const study_cal_job *j, size_t i) {
  for (size_t k = 0; k < i; k++)
    if (j->key[k] && strcmp(j->key[k], j->key[i]) == 0) return (int)k + 1;
  return (int)i + 1;
}

/* --holdout plans: a third of the runs (seeded), every observation of them, out of the fit. */
static int hold_out_plans(unsigned seed, study_cal_job *j) {
  int nr = 0, idx[4096];
  for (size_t i = 0; i < j->n && nr < 4096; i++)
    if (j->run_of[i] >= 0) idx[nr++] = (int)i;
  int k = (nr + 1) / 3;
  if (nr < 3) return 0;
  unsigned st = seed * 2654435761u + 1u;
  for (int i = nr - 1; i > 0; i--) {
    st = st * 1103515245u + 12345u;
    int r = (int)((st >> 8) % (unsigned)(i + 1)), t = idx[i];
    idx[i] = idx[r], idx[r] = t;
  }
  for (int h = 0; h < k; h++) {
    const char *key = j->key[idx[h]];
    for (size_t i = 0; i < j->n; i++)
      if (j->key[i] && strcmp(j->key[i], key) == 0) j->obs[i].aside = 1;
  }
  return k;
}

/* o->fit ("a,b,c") as cal_opts' NULL-terminated names (pointing into buf). */
static int fit_names(const study_cal_opts *o, char *buf, size_t nbuf, const char **names,
                     int max, cal_opts *co, pp_err *err) {
  if (!o->fit) return PP_OK;
  int k = 0;
  if (strlen(o->fit) < nbuf) {
    strcpy(buf, o->fit);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t && k < max - 1;
         t = strtok_r(NULL, ",", &save))
      names[k++] = t;
  }
  names[k] = NULL;
  if (k < 1) return pp_err_set(err, PP_INPUT, "--fit: give parameter names separated by commas");
  co->names = names;
  return PP_OK;
}

static double runs_tau(const study_cal_job *j, int held_only, int after) {
  double meas[4096], pred[4096];
  int k = 0;
  for (size_t i = 0; i < j->n && k < 4096; i++)
    if (j->run_of[i] >= 0 && (!held_only || j->r.held[i]))
      meas[k] = j->obs[i].time_s, pred[k++] = after ? j->r.after[i] : j->r.before[i];
  return k >= 3 ? study_kendall_tau(pred, meas, k, NULL, NULL) : NAN;
}

/* Errors per kind of observation (fitted and held out), and the runs' Kendall tau. */
static void make_report(study_cal_job *j) {
  const char **grp = malloc((j->n + 1) * sizeof *grp);
  if (grp) {
    for (size_t i = 0; i < j->n; i++) grp[i] = kind_group[j->obs[i].kind];
    j->ng = cal_group_errors(j->obs, grp, j->n, j->r.before, j->r.after, NULL, j->g,
                             CAL_NKINDS + 1);
    free(grp);
  }
  for (size_t i = 0; i < j->n; i++)
    if (j->run_of[i] >= 0) j->nplans++, j->nheld_plans += j->r.held[i];
  j->tau_before = runs_tau(j, 0, 0), j->tau_after = runs_tau(j, 0, 1);
  j->held_tau_before = runs_tau(j, 1, 0), j->held_tau_after = runs_tau(j, 1, 1);
}

/* The runs' plans: measured, predicted before and after, held out or fitted. */
static json_t *plans_json(const study_cal_job *j) {
  json_t *arr = json_array();
  for (size_t i = 0; i < j->n; i++) {
    int k = j->run_of[i];
    if (k < 0) continue;
    json_array_append_new(arr, json_pack("{s:I, s:s, s:s, s:f, s:f, s:f, s:b}", "plan_id",
                                         (json_int_t)j->runs[k].plan_id, "plan",
                                         j->specs[k].plan_text, "model", j->specs[k].m.name,
                                         "measured_s", j->obs[i].time_s, "before_s",
                                         j->r.before[i], "after_s", j->r.after[i], "held",
                                         j->r.held[i]));
  }
  return arr;
}

static json_t *kinds_json(const study_cal_job *j) {
  json_t *o = json_object();
  for (int k = 0; k < j->ng; k++) {
    const cal_group_error *g = &j->g[k];
    if (strcmp(g->name, "all") == 0) continue;
    json_object_set_new(o, g->name, json_pack("{s:i, s:i, s:f, s:f, s:f, s:f, s:f}", "fitted",
                                              g->n, "held_out", g->aside, "mape_before",
                                              g->mape_before, "mape_after", g->mape_after,
                                              "holdout_mape_before", g->aside_mape_before,
                                              "holdout_mape_after", g->aside_mape_after,
                                              "bias_before", g->bias_before));
  }
  return o;
}

/* What a calibration was fitted to (its inputs_json). */
static char *inputs_json(const study_cal_opts *o, const study_cal_job *j) {
  json_t *ids = json_array(), *keys = json_array();
  for (size_t i = 0; i < j->n; i++) {
    json_array_append_new(ids, json_integer(j->obs[i].id));
    if (j->run_of[i] >= 0) json_array_append_new(keys, json_string(j->key[i]));
  }
  json_t *v = json_pack("{s:s, s:s?, s:o, s:o}", "selection",
                        o->search ? "from-search" : "cluster name", "kind", o->kind,
                        "measurement_ids", ids, "run_keys", keys);
  if (o->search) {
    json_object_set_new(v, "spread", json_boolean(o->spread));
    json_object_set_new(v, "search_run", json_integer(o->search));
    json_object_set_new(v, "top", json_integer(o->top));
    json_object_set_new(v, "launch", json_string(o->launch));
  }
  if (o->holdout_plans) json_object_set_new(v, "held_out_plans", json_integer(j->nheld_out));
  char *s = json_dumps(v, JSON_COMPACT);
  json_decref(v);
  return s;
}

/* o->plots: the calibration's plots (the folder made with its missing parents). */
static int plots(const study_cal_opts *o, long long id, const char *what, const cal_result *r,
                 const cal_obs *obs, pp_err *err) {
  if (!o->plots) return PP_OK;
  if (pp_mkdirs(o->plots, err)) return err->code;
  char tag[64], title[160];
  snprintf(tag, sizeof tag, "calibration-%lld", id);
  snprintf(title, sizeof title, "calibration %lld (%s)", id, what);
  return cal_plots(o->plots, tag, title, r, obs, err);
}

/* The fit of the job's observations and its calibration row (one transaction), then the
 * plots. */
static int fit_and_store(const study_cal_opts *o, study_cal_job *j, pp_err *err) {
  /* collectives and GEMMs do not depend on the model (a run's ops take the dtype of the first
   * run's), a run's iteration on its own */
  spec_model m;
  int k = -1;
  for (size_t i = 0; i < j->n && k < 0; i++) k = j->run_of[i];
  if (k >= 0) m = j->specs[k].m;
  else if (spec_model_load("gpt3-175b", &m, err)) return err->code;
  cm_params prior;
  cm_params_default(&m, &prior);
  char buf[1024];
  const char *names[64];
  cal_opts co = {.holdout = o->holdout, .seed = o->seed, .robust = o->robust,
                 .prior_noise = o->prior_noise};
  for (size_t i = 0; i < j->n; i++) /* a run's observations cross-validate together */
    j->obs[i].group = j->key[i] ? group_of(j, i) : 0;
  j->nheld_out = o->holdout_plans ? hold_out_plans(o->seed, j) : 0;
  if (o->holdout_plans && j->nheld_out == 0)
    return pp_err_set(err, PP_INPUT, "--holdout plans: %s has fewer than 3 runs of the cluster's "
                      "ranks to hold some out", o->db);
  int rc = fit_names(o, buf, sizeof buf, names, 64, &co, err);
  if (!rc) rc = cal_fit(&m, &j->cluster, &prior, j->obs, j->n, &co, &j->r, err);
  if (rc) return rc;
  make_report(j);
  char *pj = cal_params_json(&j->r), *rj = cal_residuals_json(&j->r, j->obs);
  char *sum = cal_summary_json(&j->r, j->obs);
  json_t *sj = sum ? json_loads(sum, 0, NULL) : NULL;
  if (sj) {
    json_object_set_new(sj, "by_kind", kinds_json(j));
    if (j->nplans) json_object_set_new(sj, "plans", plans_json(j));
    j->summary_json = json_dumps(sj, JSON_COMPACT);
  }
  json_decref(sj);
  free(sum);
  char *ij = inputs_json(o, j);
  store_calibration cal = {.method = o->robust ? "gsl-nlinear-lm+cauchy" : "gsl-nlinear-lm",
                           .params_json = pj, .inputs_json = ij, .residuals_json = rj,
                           .fit_error = j->r.fit_error, .holdout_json = j->summary_json};
  if (!pj || !rj || !j->summary_json || !ij)
    rc = pp_err_set(err, PP_NOMEM, "calibrate: out of memory");
  if (!rc) rc = store_save_calibration(o->db, &j->cluster, &cal, err);
  if (!rc) j->id = cal.id;
  if (!rc) rc = plots(o, cal.id, j->cluster.name, &j->r, j->obs, err);
  free(pj), free(rj), free(ij);
  return rc;
}

int study_cal_stored(const study_cal_opts *o, const char *cluster, int gpus, study_cal_job *j,
                     pp_err *err) {
  memset(j, 0, sizeof *j);
  int rc = spec_cluster_load(cluster, gpus, &j->cluster, err);
  if (!rc) rc = read_inputs(o, j->cluster.name, j, err);
  /* without gpus, the cluster is as large as the largest group measured */
  if (!rc && !gpus && j->max_ranks > j->cluster.gpus)
    rc = spec_cluster_load(cluster, j->max_ranks, &j->cluster, err);
  if (rc) return rc;
  to_obs(j);
  if (j->n == 0)
    return pp_err_set(err, PP_INPUT, "%s: no measurement of cluster %s that a fit can use "
                      "(%zu stored; import nccl-tests logs or run `bench` with --cluster)",
                      o->db, j->cluster.name, j->rows.n);
  return fit_and_store(o, j, err);
}

/* ---- from a search: the top plans run on the backend, then fitted -------------------------- */

extern char **environ;

/* The words of a run of one plan: launch words, then this program's `run` (argv[] points into
 * words and the buffers of b). */
typedef struct launch_words {
  char words[1024], id[32], iters[16], layers[16], shrink[16];
  char *argv[96];
} launch_words;

static int launch_argv(const study_cal_opts *o, int64_t plan_id, const char *model_json,
                       const char *cluster_json, const char *self, launch_words *b, pp_err *err) {
  if (strlen(o->launch) >= sizeof b->words)
    return pp_err_set(err, PP_USAGE, "--launch: longer than %zu characters", sizeof b->words - 1);
  strcpy(b->words, o->launch);
  int n = 0;
  for (char *save = NULL, *t = strtok_r(b->words, " \t", &save); t && n < 64;
       t = strtok_r(NULL, " \t", &save))
    b->argv[n++] = t;
  snprintf(b->id, sizeof b->id, "%lld", (long long)plan_id);
  snprintf(b->iters, sizeof b->iters, "%d", o->iters);
  const char *tail[] = {self, "run", "--plan-id", b->id, "--model", model_json, "--cluster",
                        cluster_json, "--db", o->db, "--device", o->device, "--iters", b->iters,
                        "--json", NULL};
  for (int k = 0; tail[k]; k++) b->argv[n++] = (char *)tail[k];
  if (o->layers) {
    snprintf(b->layers, sizeof b->layers, "%d", o->layers);
    b->argv[n++] = "--layers", b->argv[n++] = b->layers;
  }
  if (o->shrink > 1) {
    snprintf(b->shrink, sizeof b->shrink, "%d", o->shrink);
    b->argv[n++] = "--shrink", b->argv[n++] = b->shrink;
  }
  b->argv[n] = NULL;
  return PP_OK;
}

/* Runs argv with its standard output read into *out (malloc'd); *status its wait status. */
static int spawn_read(char *const *argv, char **out, int *status, pp_err *err) {
  int fd[2];
  if (pipe(fd)) return pp_err_set(err, PP_IO, "--launch: pipe: %s", strerror(errno));
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fd[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&fa, fd[0]);
  pid_t pid;
  int st = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  close(fd[1]);
  if (st) {
    close(fd[0]);
    return pp_err_set(err, PP_USAGE, "--launch: cannot start '%s': %s", argv[0], strerror(st));
  }
  size_t len = 0, cap = 4096;
  char *buf = malloc(cap);
  ssize_t got;
  while (buf && (got = read(fd[0], buf + len, cap - len - 1)) > 0)
    if ((len += (size_t)got) + 1 == cap) {
      char *bigger = realloc(buf, cap *= 2);
      if (!bigger) free(buf);
      buf = bigger;
    }
  close(fd[0]);
  while (waitpid(pid, status, 0) < 0 && errno == EINTR) {}
  if (!buf) return pp_err_set(err, PP_NOMEM, "calibrate: out of memory");
  buf[len] = 0;
  *out = buf;
  return PP_OK;
}

/* Runs one plan: launch words + this program's `run`, its JSON read from a pipe. The run's
 * key (malloc'd) and measured time on success. */
static int launch_plan(const study_cal_opts *o, int64_t plan_id, const char *model_json,
                       const char *cluster_json, const char *self, char **key, double *meas,
                       pp_err *err) {
  launch_words b;
  char *out = NULL;
  int status = 0;
  int rc = launch_argv(o, plan_id, model_json, cluster_json, self, &b, err);
  if (!rc) rc = spawn_read(b.argv, &out, &status, err);
  if (rc) return rc;
  if (!WIFEXITED(status) || WEXITSTATUS(status)) {
    rc = pp_err_set(err, PP_DEVICE, "--from-search: plan %lld: '%s ... run' %s %d (its error is "
                    "above)", (long long)plan_id, o->launch,
                    WIFEXITED(status) ? "exited with status" : "was killed by signal",
                    WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
  } else {
    /* mpirun passes on rank 0's JSON; the object is the last thing printed */
    const char *brace = strchr(out, '{');
    json_t *v = brace ? json_loads(brace, JSON_DISABLE_EOF_CHECK, NULL) : NULL;
    const char *k = json_string_value(json_object_get(v, "run_key"));
    *meas = json_number_value(json_object_get(v, "iter_time_s"));
    if (!k || !(*meas > 0))
      rc = pp_err_set(err, PP_DEVICE, "--from-search: plan %lld: the run printed no iteration "
                      "time and run key", (long long)plan_id);
    else if (!(*key = strdup(k)))
      rc = pp_err_set(err, PP_NOMEM, "calibrate: out of memory");
    json_decref(v);
  }
  free(out);
  return rc;
}

/* The plans of search run o->search to run: its top o->top, or o->top spread over its stored
 * ranking (first and last included); the search's model and cluster (JSON, malloc'd). */
static int plans_to_run(const study_cal_opts *o, int64_t *ids, int *n, char **mj, char **cj,
                        pp_err *err) {
  double *secs = malloc(STUDY_CAL_RANKED_MAX * sizeof *secs);
  if (!secs) return pp_err_set(err, PP_NOMEM, "calibrate: out of memory");
  store *s = NULL;
  store_opts ro = {.readonly = 1};
  int rc = store_open(o->db, &ro, &s, err);
  if (!rc) rc = store_get_search_top(s, o->search, o->spread ? STUDY_CAL_RANKED_MAX : o->top, ids,
                                     secs, n, mj, cj, err);
  store_close(s);
  free(secs);
  if (!rc && o->spread && *n > o->top) {
    for (int i = 0; i < o->top; i++)
      ids[i] = ids[o->top > 1 ? (int)((double)i * (*n - 1) / (o->top - 1) + 0.5) : 0];
    *n = o->top;
  }
  return rc;
}

/* Runs the chosen plans of search run o->search, their keys in j->launched (NULL-terminated);
 * j->cluster the search's, j->device the device they ran on. Progress on a terminal. */
static int launch_top(const study_cal_opts *o, study_cal_job *j, pp_err *err) {
  int64_t *ids = malloc(STUDY_CAL_RANKED_MAX * sizeof *ids);
  j->launched = calloc(STUDY_CAL_TOP_MAX + 1, sizeof *j->launched);
  if (!ids || !j->launched) {
    free(ids);
    return pp_err_set(err, PP_NOMEM, "calibrate: out of memory");
  }
  char *mj = NULL, *cj = NULL, self[4096];
  int n = 0;
  int rc = plans_to_run(o, ids, &n, &mj, &cj, err);
  if (!rc) rc = spec_cluster_load(cj, 0, &j->cluster, err);
  j->device = o->device ? o->device : j->cluster.gpu.cpu ? "cpu" : "cuda";
  if (!rc && (strcmp(j->device, "cpu") == 0) != j->cluster.gpu.cpu)
    rc = pp_err_set(err, PP_USAGE, "--device %s: search run %lld is on %s, whose ranks are %s "
                    "(search a cluster of this device's ranks, e.g. cpu-host for --device cpu)",
                    j->device, o->search, j->cluster.name,
                    j->cluster.gpu.cpu ? "CPU processes" : "GPUs");
  if (!rc && n == 0)
    rc = pp_err_set(err, PP_INPUT, "%s: search run %lld has no feasible plan to run", o->db,
                    o->search);
  if (n > STUDY_CAL_TOP_MAX) n = STUDY_CAL_TOP_MAX;
  ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
  if (!rc && sl <= 0) rc = pp_err_set(err, PP_IO, "/proc/self/exe: %s", strerror(errno));
  if (!rc) self[sl] = 0;
  int tty = isatty(STDERR_FILENO);
  if (!rc && n < o->top)
    fprintf(stderr, "podplan calibrate: search run %lld has %d feasible plans; running all of "
            "them\n", o->search, n);
  study_cal_opts run = *o;
  run.device = j->device;
  for (int i = 0; !rc && i < n; i++) {
    double meas = 0;
    if (tty) fprintf(stderr, "\rpodplan calibrate: running plan %d of %d (id %lld) ...", i + 1, n,
                     (long long)ids[i]);
    rc = launch_plan(&run, ids[i], mj, cj, self, &j->launched[i], &meas, err);
    if (tty && !rc) fprintf(stderr, " %.4f s", meas);
  }
  if (tty && n) fputc('\n', stderr);
  free(mj), free(cj), free(ids);
  return rc;
}

int study_cal_from_search(const study_cal_opts *o, study_cal_job *j, pp_err *err) {
  memset(j, 0, sizeof *j);
  if (o->top < 1 || o->top > STUDY_CAL_TOP_MAX)
    return pp_err_set(err, PP_USAGE, "--top: %d is not 1 .. %d", o->top, STUDY_CAL_TOP_MAX);
  int rc = launch_top(o, j, err);
  if (!rc) rc = read_inputs(o, j->cluster.name, j, err);
  if (rc) return rc;
  to_obs(j);
  return fit_and_store(o, j, err);
}

/* ---- published runs: iteration times, each on its own model, cluster and plan -------------- */

void study_cal_runs_free(study_cal_runs *f) {
  study_runs_free(f->runs, f->n);
  free(f->obs), free(f->group), free(f->cv);
  cal_result_free(&f->r);
  json_decref(f->by_source), json_decref(f->ranking), json_decref(f->ids);
  memset(f, 0, sizeof *f);
}

static int runs_fit(const study_cal_opts *o, study_cal_runs *f, pp_err *err) {
  int rc = study_runs_load(o->runs, &f->runs, &f->n, &f->skipped, err);
  if (rc) return rc;
  if (f->n < 2) return pp_err_set(err, PP_INPUT, "%s: %d usable runs: too few to fit", o->runs, f->n);
  f->obs = calloc((size_t)f->n, sizeof *f->obs);
  f->group = calloc((size_t)f->n, sizeof *f->group);
  f->cv = calloc((size_t)f->n, sizeof *f->cv);
  if (!f->obs || !f->group || !f->cv) return pp_err_set(err, PP_NOMEM, "calibrate: out of memory");
  for (int i = 0; i < f->n; i++) {
    study_run *x = &f->runs[i];
    f->obs[i] = (cal_obs){.kind = CAL_ITER, .id = x->row, .time_s = x->published_s,
                          .model = &x->m, .cluster = &x->c, .plan = &x->p, .base = &x->prm,
                          .aside = strcmp(x->set, "holdout") == 0};
    f->group[i] = x->source;
  }
  char buf[1024];
  const char *names[64];
  cal_opts co = {.seed = o->seed, .robust = o->robust, .prior_noise = o->prior_noise,
                 .cv_folds = o->folds};
  if ((rc = fit_names(o, buf, sizeof buf, names, 64, &co, err))) return rc;
  const study_run *x0 = &f->runs[0];
  if ((rc = cal_fit(&x0->m, &x0->c, &x0->prm, f->obs, (size_t)f->n, &co, &f->r, err))) return rc;
  co.prior_noise = f->r.prior_noise; /* the folds fit as the whole did */
  if ((rc = cal_cv(&x0->m, &x0->c, &x0->prm, f->obs, (size_t)f->n, &co, o->folds, f->cv, err)))
    return rc;
  f->ng = cal_group_errors(f->obs, f->group, (size_t)f->n, f->r.before, f->r.after, f->cv, f->g,
                           STUDY_CAL_SOURCES);
  return PP_OK;
}

static json_t *groups_json(const study_cal_runs *f) {
  json_t *a = json_array();
  for (int k = 0; k < f->ng; k++) {
    const cal_group_error *g = &f->g[k];
    json_array_append_new(
        a, json_pack("{s:s, s:i, s:i, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f}", "source",
                     g->name, "rows", g->n, "aside", g->aside, "mape_before", g->mape_before,
                     "mape_after", g->mape_after, "cv_mape_after", g->mape_cv, "bias_before",
                     g->bias_before, "bias_after", g->bias_after, "cv_bias_after", g->bias_cv,
                     "aside_mape_before", g->aside_mape_before, "aside_mape_after",
                     g->aside_mape_after, "aside_bias_after", g->aside_bias_after));
  }
  return a;
}

/* One calibration per cluster (by name) of the fitted runs, the same values in each. */
static int runs_store(const study_cal_opts *o, study_cal_runs *f, pp_err *err) {
  char *pj = cal_params_json(&f->r), *rj = cal_residuals_json(&f->r, f->obs);
  json_t *sum = json_pack("{s:s, s:i, s:O, s:f, s:b}", "runs", o->runs, "folds", o->folds,
                          "by_source", f->by_source, "prior_noise", f->r.prior_noise,
                          "worse_than_prior", f->r.worse);
  char *hj = sum ? json_dumps(sum, JSON_COMPACT) : NULL;
  json_decref(sum);
  int rc = pj && rj && hj ? PP_OK : pp_err_set(err, PP_NOMEM, "calibrate: out of memory");
  for (int i = 0; !rc && i < f->n; i++) {
    int seen = 0;
    for (int j = 0; j < i && !seen; j++)
      seen = !f->obs[j].aside && strcmp(f->runs[j].c.name, f->runs[i].c.name) == 0;
    if (seen || f->obs[i].aside) continue;
    json_t *inp = json_pack("{s:s, s:s, s:i}", "selection", "published runs", "runs", o->runs,
                            "rows_fitted", (int)f->r.nfit);
    char *ij = inp ? json_dumps(inp, JSON_COMPACT) : NULL;
    json_decref(inp);
    store_calibration cal = {.method = o->robust ? "gsl-nlinear-lm+cauchy runs" : "gsl-nlinear-lm runs",
                             .params_json = pj, .inputs_json = ij, .residuals_json = rj,
                             .fit_error = f->r.fit_error, .holdout_json = hj};
    rc = ij ? store_save_calibration(o->db, &f->runs[i].c, &cal, err)
            : pp_err_set(err, PP_NOMEM, "calibrate: out of memory");
    if (!rc) json_array_append_new(f->ids, json_integer(cal.id));
    free(ij);
  }
  free(pj), free(rj), free(hj);
  return rc;
}

/* Kendall's tau before, after and cross-validated (rows kept aside: after) of each set of runs
 * of one model with at least 3 rows, as a JSON array: of the iteration time, and of the
 * GPU-seconds per sequence (time x GPUs / global batch), which ranks plans of unlike GPU
 * counts and batches by what they cost (SC'21 Table 2's ZeRO-3 rows against its PTD-P rows). */
static json_t *ranking_json(const study_cal_runs *f) {
  json_t *arr = json_array();
  for (int i = 0; i < f->n; i++) {
    if (f->runs[i].rank_set != i) continue;
    double t[4][256], c[4][256]; /* published, before, after, cv */
    int k = 0;
    for (int j = i; j < f->n && k < 256; j++)
      if (f->runs[j].rank_set == i) {
        double w = (double)f->runs[j].c.gpus / f->runs[j].p.gbs;
        t[0][k] = f->obs[j].time_s, t[1][k] = f->r.before[j], t[2][k] = f->r.after[j];
        t[3][k] = f->obs[j].aside ? f->r.after[j] : f->cv[j];
        for (int q = 0; q < 4; q++) c[q][k] = t[q][k] * w;
        k++;
      }
    if (k < 3) continue;
    json_t *e = json_pack("{s:s, s:s, s:i, s:b}", "source", f->runs[i].source, "model",
                          f->runs[i].m.name, "rows", k, "aside", f->obs[i].aside);
    static const char *const key[3][2] = {{"tau_before", "tau_cost_before"},
                                          {"tau_after", "tau_cost_after"},
                                          {"tau_cv", "tau_cost_cv"}};
    for (int q = 1; e && q < 4; q++) {
      json_object_set_new(e, key[q - 1][0], json_real(study_kendall_tau(t[q], t[0], k, NULL, NULL)));
      json_object_set_new(e, key[q - 1][1], json_real(study_kendall_tau(c[q], c[0], k, NULL, NULL)));
    }
    json_array_append_new(arr, e);
  }
  return arr;
}

int study_cal_published(const study_cal_opts *o, study_cal_runs *f, pp_err *err) {
  memset(f, 0, sizeof *f);
  int rc = runs_fit(o, f, err);
  if (rc) return rc;
  f->by_source = groups_json(f);
  f->ranking = ranking_json(f);
  f->ids = json_array();
  if (!f->by_source || !f->ranking || !f->ids) return pp_err_set(err, PP_NOMEM, "calibrate: out of memory");
  if ((rc = runs_store(o, f, err))) return rc;
  return plots(o, json_integer_value(json_array_get(f->ids, 0)), "published runs", &f->r, f->obs, err);
}
