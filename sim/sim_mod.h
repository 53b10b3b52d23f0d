/* The simulator as a module: podplan_sim.so (SimGrid) exports SIM_MOD_SYMBOL, a table of the
 * sim.h functions; sim_load.c gives programs that do not link SimGrid the same functions,
 * loading the module on first use. */
#ifndef PODPLAN_SIM_MOD_H
#define PODPLAN_SIM_MOD_H

#include "podplan/mod.h"
#include "podplan/sim.h"

typedef struct sim_module {
  pp_mod_head head; /* {PODPLAN_VERSION, sizeof(sim_module)} */
  int (*run)(cm_model *cm, const spec_plan *plan, const sim_opts *o, sim_result *out,
             pp_err *err);
  int (*collectives)(cm_model *cm, sim_coll_job *jobs, int njobs, sim_fidelity f, pp_err *err);
  void (*result_clear)(sim_result *r);
  const char *(*ev_name)(sim_ev_kind k);
} sim_module;
#define SIM_MOD_SYMBOL "podplan_sim_module"
#define SIM_MOD_FILE "podplan_sim.so"

#endif
