/* Stored study cases read back: a pillar method's result and a capacity point, from the
 * result_json that study_pillar.c (pres_json) and study_capacity.c (point_json) write. Apart
 * from the studies so that the fuzz harnesses (fuzz/) link them with Jansson alone. */
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "study_int.h"

/* The keys a reader unpacks, with their types (b boolean, s string, F number, I integer), in
 * the order of its format: which one Jansson's message ("Expected real or integer, got
 * string") is about. */
typedef struct stored_key {
  const char *name;
  char type;
} stored_key;

static const stored_key pres_keys[] = {
    {"found", 'b'},   {"why", 's'},         {"cm_s", 'F'},     {"sim_s", 'F'},
    {"sim_cm_s", 'F'}, {"mfu", 'F'},        {"tflops", 'F'},   {"mem_gib", 'F'},
    {"wall_s", 'F'},  {"space", 'F'},       {"evaluations", 'I'}, {"bound_s", 'F'},
    {"gap", 'F'},     {"complete", 'b'},    {"run_id", 'I'},   {"plan", 's'},
    {"traits", 's'},  {NULL, 0}};

static const stored_key point_keys[] = {
    {"status", 's'},  {"why", 's'},    {"plan", 's'},     {"brief", 's'},   {"cm_s", 'F'},
    {"sim_s", 'F'},   {"simulated", 'b'}, {"mfu", 'F'},   {"mem_gib", 'F'}, {"bound_s", 'F'},
    {"gap", 'F'},     {"complete", 'b'}, {"run_id", 'I'}, {"wall_s", 'F'},  {NULL, 0}};

/* The unpack error of o as one line naming the case and, when a key has another type, the
 * key ("study case 'K': result_json: cm_s: Expected real or integer, got string"). */
static int unpack_fail(json_t *o, const stored_key *keys, const char *key,
                       const json_error_t *je, pp_err *err) {
  const char *bad = NULL;
  for (int i = 0; o && keys[i].name && !bad; i++) {
    json_t *v = json_object_get(o, keys[i].name);
    int ok = keys[i].type == 'b'   ? json_is_boolean(v)
             : keys[i].type == 's' ? json_is_string(v)
             : keys[i].type == 'F' ? json_is_number(v)
                                   : json_is_integer(v);
    if (v && !ok) bad = keys[i].name; /* a missing key: Jansson's message names it */
  }
  pp_err_set(err, PP_INPUT, "study case '%s': result_json: %s%s%s", key, bad ? bad : "",
             bad ? ": " : "", je->text);
  json_decref(o);
  return err->code;
}

int study__pres_parse(const char *text, const char *key, study__pres *r, pp_err *err) {
  json_error_t je;
  json_t *o = json_loads(text, 0, &je);
  int found = 0, complete = 0;
  json_int_t ev = 0, run = 0;
  const char *why = "", *plan = "", *traits = "";
  if (!o || json_unpack_ex(o, &je, 0,
                           "{s:b, s:s, s:F, s:F, s:F, s:F, s:F, s:F, s:F, s:F, s:I, s:F, s:F, s:b,"
                           " s:I, s:s, s:s}",
                           "found", &found, "why", &why, "cm_s", &r->cm_s, "sim_s", &r->sim_s,
                           "sim_cm_s", &r->sim_cm_s, "mfu", &r->mfu, "tflops", &r->tflops,
                           "mem_gib", &r->mem_gib,
                           "wall_s", &r->wall_s, "space", &r->space, "evaluations", &ev,
                           "bound_s", &r->bound_s, "gap", &r->gap, "complete", &complete,
                           "run_id", &run, "plan", &plan, "traits", &traits))
    return unpack_fail(o, pres_keys, key, &je, err);
  json_t *stopped = json_object_get(o, "sim_stopped"); /* written when > 0 */
  json_int_t ns = stopped ? json_integer_value(stopped) : 0;
  const char *bad = NULL;
  if (ev < 0)
    bad = "evaluations";
  else if (run < 0)
    bad = "run_id";
  else if (stopped && (!json_is_integer(stopped) || ns < 0 || ns > INT_MAX))
    bad = "sim_stopped";
  if (bad) {
    json_decref(o);
    return pp_err_set(err, PP_INPUT, "study case '%s': result_json: %s: not a count", key, bad);
  }
  r->found = found, r->complete = complete, r->evaluations = ev, r->run_id = run;
  r->sim_stopped = (int)ns;
  snprintf(r->why, sizeof r->why, "%s", why);
  snprintf(r->plan, sizeof r->plan, "%s", plan);
  snprintf(r->traits, sizeof r->traits, "%s", traits);
  json_decref(o);
  return PP_OK;
}

int study__point_parse(const char *text, const char *key, study__cap_point *p, pp_err *err) {
  json_error_t je;
  json_t *o = json_loads(text, 0, &je);
  const char *status = "", *why = "", *plan = "", *brief = "";
  int sim = 0, complete = 0;
  json_int_t run = 0;
  if (!o || json_unpack_ex(o, &je, 0,
                           "{s:s, s:s, s:s, s:s, s:F, s:F, s:b, s:F, s:F, s:F, s:F, s:b, s:I, s:F}",
                           "status", &status, "why", &why, "plan", &plan, "brief", &brief, "cm_s",
                           &p->cm_s, "sim_s", &p->sim_s, "simulated", &sim, "mfu", &p->mfu,
                           "mem_gib", &p->mem_gib, "bound_s", &p->bound_s, "gap", &p->gap,
                           "complete", &complete, "run_id", &run, "wall_s", &p->wall_s))
    return unpack_fail(o, point_keys, key, &je, err);
  /* a point below the memory bound ("cannot-fit") is never stored */
  int ok = !strcmp(status, "ok"), noplan = !strcmp(status, "no-plan");
  if ((!ok && !noplan) || run < 0) {
    if (ok || noplan)
      pp_err_set(err, PP_INPUT, "study case '%s': result_json: run_id: not a count", key);
    else
      pp_err_set(err, PP_INPUT, "study case '%s': result_json: status: '%.40s' is neither ok "
                 "nor no-plan", key, status);
    json_decref(o); /* status points into it */
    return err->code;
  }
  p->status = ok ? STUDY__CAP_OK : STUDY__CAP_NOPLAN;
  p->simulated = sim, p->complete = complete, p->run_id = run;
  snprintf(p->why, sizeof p->why, "%s", why);
  snprintf(p->plan, sizeof p->plan, "%s", plan);
  snprintf(p->brief, sizeof p->brief, "%s", brief);
  json_decref(o);
  return PP_OK;
}
