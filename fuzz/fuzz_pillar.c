/* libFuzzer harness: a pillar study case as the store holds it (its result_json, written by
 * study_pillar.c). Feeds the input, as a C string (text after a NUL is ignored, as in a value
 * SQLite returns), to study__pres_parse.
 * Invariants: a rejection is PP_INPUT, one non-empty line naming the case ("study case 'k'");
 * an accepted result has found and complete 0 or 1, evaluations, run_id and sim_stopped >= 0
 * (sim_stopped 0 when absent), every figure finite and equal to the JSON's number, and why,
 * plan and traits NUL-terminated in their buffers, each the JSON's string (cut to the buffer). */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>

#include "fuzz_util.h"
#include "study_int.h"

static const char *const names[] = {"study case 'k'", NULL};

/* the string at key of o, or NULL */
static const char *text_of(json_t *o, const char *key) {
  return json_string_value(json_object_get(o, key));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = fz_cstr(data, size);
  study__pres r;
  memset(&r, 0xa5, sizeof r);
  pp_err err = {0};
  int rc = study__pres_parse(text, "k", &r, &err);
  if (rc) {
    fz_check_err(rc, &err, names);
    FZ_CHECK(rc == PP_INPUT, "code %d", rc);
    free(text);
    return 0;
  }
  FZ_CHECK(r.found == 0 || r.found == 1, "found %d", r.found);
  FZ_CHECK(r.complete == 0 || r.complete == 1, "complete %d", r.complete);
  FZ_CHECK(r.evaluations >= 0 && r.run_id >= 0 && r.sim_stopped >= 0,
           "evaluations %lld, run_id %lld, sim_stopped %d", r.evaluations, r.run_id,
           r.sim_stopped);
  json_t *o = json_loads(text, 0, NULL);
  FZ_CHECK(o != NULL, "accepted text that Jansson does not load");
  const struct {
    const char *key;
    double v;
  } fig[] = {{"cm_s", r.cm_s},       {"sim_s", r.sim_s},     {"sim_cm_s", r.sim_cm_s},
             {"mfu", r.mfu},         {"tflops", r.tflops},   {"mem_gib", r.mem_gib},
             {"wall_s", r.wall_s},   {"space", r.space},     {"bound_s", r.bound_s},
             {"gap", r.gap}};
  for (size_t i = 0; i < sizeof fig / sizeof fig[0]; i++)
    FZ_CHECK(isfinite(fig[i].v) && fig[i].v == json_number_value(json_object_get(o, fig[i].key)),
             "%s = %g", fig[i].key, fig[i].v);
  FZ_CHECK(r.evaluations == json_integer_value(json_object_get(o, "evaluations")) &&
               r.run_id == json_integer_value(json_object_get(o, "run_id")),
           "evaluations %lld, run_id %lld", r.evaluations, r.run_id);
  FZ_CHECK(fz_same_cut(text_of(o, "why"), r.why, sizeof r.why), "why '%.300s'", r.why);
  FZ_CHECK(fz_same_cut(text_of(o, "plan"), r.plan, sizeof r.plan), "plan '%.600s'", r.plan);
  FZ_CHECK(fz_same_cut(text_of(o, "traits"), r.traits, sizeof r.traits), "traits '%.600s'",
           r.traits);
  json_decref(o);
  free(text);
  return 0;
}
