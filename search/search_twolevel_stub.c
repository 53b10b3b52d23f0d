/* two-level: arrives with its own file (search_twolevel.c); until then it says so. */
#include "search_int.h"

static int tl_units(search__run *run, int *n, pp_err *err) {
  (void)run, (void)n;
  return pp_err_set(err, PP_NOTIMPL, "search: two-level is not implemented yet");
}
static int tl_unit(search__unit *u, pp_err *err) {
  (void)u;
  return pp_err_set(err, PP_NOTIMPL, "search: two-level is not implemented yet");
}
const search__method search__two_level = {SEARCH_TWO_LEVEL, "two-level", NULL, tl_units, tl_unit,
                                          NULL, NULL};
