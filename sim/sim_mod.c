/* The module podplan_sim.so: the simulator (SimGrid), loaded by sim_load.c. */
#include "sim_mod.h"

PP_MOD_EXPORT const sim_module podplan_sim_module = {
    {PODPLAN_VERSION, sizeof(sim_module)}, sim_run, sim_collectives, sim_result_clear,
    sim_ev_name};
