/* libFuzzer harness: a capacity study point as the store holds it (its result_json, written
 * by study_capacity.c). Feeds the input, as a C string (text after a NUL is ignored, as in a
 * value SQLite returns), to study__point_parse.
 * Invariants: a rejection is PP_INPUT, one non-empty line naming the case ("study case 'k'");
 * an accepted point has the status the JSON names ("ok" or "no-plan"; a point below the
 * memory bound is never stored), simulated and complete 0 or 1, run_id >= 0, every figure
 * finite and equal to the JSON's number, and why, plan and brief NUL-terminated in their
 * buffers, each the JSON's string (cut to the buffer); the fields that are not stored are left
 * as they were. */
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
  study__cap_point p;
  memset(&p, 0, sizeof p);
  p.fabric = 3, p.gpus = 64, p.resumed = 1, p.iter_s = 7, p.meets = 1;
  pp_err err = {0};
  int rc = study__point_parse(text, "k", &p, &err);
  if (rc) {
    fz_check_err(rc, &err, names);
    FZ_CHECK(rc == PP_INPUT, "code %d", rc);
    free(text);
    return 0;
  }
  FZ_CHECK(p.fabric == 3 && p.gpus == 64 && p.resumed == 1 && p.iter_s == 7 && p.meets == 1,
           "a field that is not stored changed");
  json_t *o = json_loads(text, 0, NULL);
  FZ_CHECK(o != NULL, "accepted text that Jansson does not load");
  const char *status = json_string_value(json_object_get(o, "status"));
  FZ_CHECK(status && ((p.status == STUDY__CAP_OK && !strcmp(status, "ok")) ||
                      (p.status == STUDY__CAP_NOPLAN && !strcmp(status, "no-plan"))),
           "status %d from '%s'", (int)p.status, status ? status : "(none)");
  FZ_CHECK(p.simulated == 0 || p.simulated == 1, "simulated %d", p.simulated);
  FZ_CHECK(p.complete == 0 || p.complete == 1, "complete %d", p.complete);
  FZ_CHECK(p.run_id >= 0 && p.run_id == json_integer_value(json_object_get(o, "run_id")),
           "run_id %lld", p.run_id);
  const struct {
    const char *key;
    double v;
  } fig[] = {{"cm_s", p.cm_s},       {"sim_s", p.sim_s},     {"mfu", p.mfu},
             {"mem_gib", p.mem_gib}, {"bound_s", p.bound_s}, {"gap", p.gap},
             {"wall_s", p.wall_s}};
  for (size_t i = 0; i < sizeof fig / sizeof fig[0]; i++)
    FZ_CHECK(isfinite(fig[i].v) && fig[i].v == json_number_value(json_object_get(o, fig[i].key)),
             "%s = %g", fig[i].key, fig[i].v);
  FZ_CHECK(fz_same_cut(text_of(o, "why"), p.why, sizeof p.why), "why '%.400s'", p.why);
  FZ_CHECK(fz_same_cut(text_of(o, "plan"), p.plan, sizeof p.plan), "plan '%.1100s'", p.plan);
  FZ_CHECK(fz_same_cut(text_of(o, "brief"), p.brief, sizeof p.brief), "brief '%.100s'", p.brief);
  json_decref(o);
  free(text);
  return 0;
}
