/* Helpers shared by the simulator's tests (test_sim.c, test_sim_coll.c): a cluster preset
 * sized to `gpus`, and the cost model collectives are priced with. Both abort on failure, which
 * fails the test. */
#ifndef PODPLAN_TESTS_SIMTEST_H
#define PODPLAN_TESTS_SIMTEST_H

#include <stdio.h>
#include <stdlib.h>

#include "podplan/cm.h"
#include "podplan/spec.h"

static inline spec_cluster cluster(const char *name, int gpus) {
  spec_cluster c;
  pp_err err = {0};
  if (spec_cluster_load(name, gpus, &c, &err)) {
    fprintf(stderr, "%s\n", err.msg);
    abort();
  }
  return c;
}

/* The cost model collectives run with: any model (collectives need none) on c with p. */
static inline cm_model *coll_model(const spec_cluster *c, const cm_params *p) {
  spec_model m;
  cm_model *cm = NULL;
  pp_err err = {0};
  if (spec_model_load("gpt3-175b", &m, &err) || cm_model_create(&m, c, p, &cm, &err)) {
    fprintf(stderr, "%s\n", err.msg);
    abort();
  }
  return cm;
}

#endif
