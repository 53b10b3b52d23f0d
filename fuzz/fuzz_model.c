/* libFuzzer harness: model specs. Feeds the input, as JSON text, to spec_model_parse.
 * Invariants: a rejection is one non-empty line naming the input ("model.json: ...");
 * an accepted model validates, has a finite positive parameter count (active <= total), and
 * its canonical JSON parses back to the same canonical JSON. */
#include <stdint.h>
#include <stdlib.h>

#include "fuzz_util.h"
#include "podplan/spec.h"

static const char *const origin_names[] = {"model.json", NULL};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  spec_model m;
  pp_err err = {0};
  int rc = spec_model_parse((const char *)data, size, "model.json", &m, &err);
  if (rc) {
    fz_check_err(rc, &err, origin_names);
    return 0;
  }
  rc = spec_model_validate(&m, &err);
  FZ_CHECK(rc == PP_OK, "accepted model fails validation: %s", err.msg);
  double n = spec_model_params(&m), a = spec_model_active_params(&m);
  FZ_CHECK(isfinite(n) && n > 0 && isfinite(a) && a > 0 && a <= n, "params %g, active %g", n, a);

  char *j1 = spec_model_json(&m);
  FZ_CHECK(j1 != NULL, "no canonical JSON");
  spec_model m2;
  rc = spec_model_parse(j1, strlen(j1), "canonical", &m2, &err);
  FZ_CHECK(rc == PP_OK, "canonical JSON rejected: %s\n  %s", err.msg, j1);
  char *j2 = spec_model_json(&m2);
  FZ_SAME_TEXT(j1, j2, "model canonical JSON after a round trip");
  free(j1);
  free(j2);
  return 0;
}
