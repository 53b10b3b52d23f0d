/* sim.h for programs without SimGrid (the podplan driver): each function loads the module
 * podplan_sim.so (once per process; the dynamic loader keeps it) and calls its own. SimGrid and
 * its dependencies stay local to the module, so its SMPI MPI_* never shadow Open MPI's. */
#include <string.h>

#include "sim_mod.h"

static const sim_module *load(pp_err *err) {
  const void *t = NULL;
#ifdef PODPLAN_HAVE_SIM
  if (pp_mod_load(SIM_MOD_FILE, SIM_MOD_SYMBOL, PODPLAN_VERSION, sizeof(sim_module), &t, err))
    pp_err_prefix(err, "simulator");
#else
  pp_err_set(err, PP_NOTIMPL, "simulator: built without SimGrid (PODPLAN_SIM=OFF)");
#endif
  return t;
}

int sim_run(cm_model *cm, const spec_plan *plan, const sim_opts *o, sim_result *out,
            pp_err *err) {
  const sim_module *s = load(err);
  if (!s) {
    memset(out, 0, sizeof *out);
    return err->code;
  }
  return s->run(cm, plan, o, out, err);
}

int sim_available(pp_err *err) {
  return load(err) ? PP_OK : err->code;
}

int sim_collectives(cm_model *cm, sim_coll_job *jobs, int njobs, sim_fidelity f, pp_err *err) {
  const sim_module *s = load(err);
  return s ? s->collectives(cm, jobs, njobs, f, err) : err->code;
}

void sim_result_clear(sim_result *r) {
  pp_err err = {0};
  const sim_module *s = load(&err);
  if (s) s->result_clear(r);
}

const char *sim_ev_name(sim_ev_kind k) {
  pp_err err = {0};
  const sim_module *s = load(&err);
  return s ? s->ev_name(k) : "?";
}
