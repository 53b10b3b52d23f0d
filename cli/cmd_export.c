/* podplan export: a stored plan as Megatron-LM arguments (traces/tr_megatron.c) or as its
 * canonical JSON. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "podplan/tr.h"

static const char usage[] =
    "usage: podplan export --plan-id ID --format megatron|json [--model M] [--db F]\n"
    "\n"
    "Prints a stored plan. megatron: one line of Megatron-LM arguments (tensor, pipeline,\n"
    "context and expert parallel sizes, the layer split, sequence parallelism, micro and\n"
    "global batch, recomputation, optimizer sharding); a non-uniform plan has none (exit 2).\n"
    "json: the plan's canonical JSON (uniform or non-uniform).\n"
    "\n";

/* The options: getopt's table and the help's text. */
static const cli_opt opts[] = {
    {"plan-id", "ID", 'p', "a plan id from the store (podplan search, check --db, ...)"},
    {"format", "F", 'f', "megatron or json"},
    {"model", "M", 'm',
     "the model the plan trains (its layer count sets the layer split);\n"
     "default: the model the store has the plan's scores on"},
    {"db", "F", 'd', "store file (default podplan.db)"},
    {"help", NULL, 'h', "this text"},
};
#define NOPTS (sizeof opts / sizeof opts[0])

static const char *const CMD = "export";

/* The model whose layers the plan splits: the one its scores name (all of them agreeing). */
static int plan_model(store *s, long long id, spec_model *m, pp_err *err) {
  int64_t ids[8];
  int n = 0;
  if (store_plan_models(s, id, ids, 8, &n, err)) return err->code;
  if (n == 0)
    return pp_err_set(err, PP_INPUT,
                      "plan %lld has no score naming its model: give --model M (its layer count "
                      "sets the layer split)", id);
  if (store_get_model(s, ids[0], m, err)) return err->code;
  for (int i = 1; i < n && i < 8; i++) {
    spec_model o;
    if (store_get_model(s, ids[i], &o, err)) return err->code;
    if (o.layers != m->layers || (o.experts > 0) != (m->experts > 0))
      return pp_err_set(err, PP_INPUT,
                        "plan %lld is scored on models %s (%d layers) and %s (%d layers): give "
                        "--model M", id, m->name, m->layers, o.name, o.layers);
  }
  return PP_OK;
}

int cmd_export(int argc, char **argv) {
  struct option longs[NOPTS + 1];
  cli_opts_longs(opts, NOPTS, longs);
  const char *format = NULL, *model = NULL, *db = STORE_DEFAULT_PATH;
  int plan_id = 0, first = 1, c;
  while ((c = cli_getopt(CMD, argc, argv, "h", longs, &first)) != -1) {
    switch (c) {
    case 'h':
      fputs(usage, stdout);
      cli_opts_help(stdout, opts, NOPTS, 14);
      return 0;
    case 'p':
      if (cli_int(CMD, "--plan-id", optarg, 1, 2147483647, &plan_id)) return 2;
      break;
    case 'f': format = optarg; break;
    case 'm': model = optarg; break;
    case 'd': db = optarg; break;
    default: return 2;
    }
  }
  if (optind < argc) return cli_usage_error(CMD, "unexpected argument '%s'", argv[optind]);
  if (!plan_id || !format) return cli_usage_error(CMD, "--plan-id and --format are required");
  int megatron = strcmp(format, "megatron") == 0;
  if (!megatron && strcmp(format, "json") != 0)
    return cli_usage_error(CMD, "--format: '%s' is not megatron or json", format);
  pp_err err = {0};
  spec_model m;
  if (model && spec_model_load(model, &m, &err)) return cli_fail(CMD, &err);
  if (access(db, F_OK) != 0) {
    pp_err_set(&err, PP_INPUT, "%s: no such database (plans get there with search, check --db, "
               "...)", db);
    return cli_fail(CMD, &err);
  }
  store *s = NULL;
  spec_plan p;
  memset(&p, 0, sizeof p);
  char *text = NULL;
  int rc = store_open(db, NULL, &s, &err);
  if (!rc) rc = store_get_plan(s, plan_id, &p, &err);
  if (!rc && megatron) {
    if (!model && !p.nstages) rc = plan_model(s, plan_id, &m, &err);
    if (!rc && (rc = tr_megatron_args(&p, &m, &text, &err)))
      pp_err_prefix(&err, "plan %d", plan_id);
  } else if (!rc && !(text = spec_plan_json(&p))) {
    rc = pp_err_set(&err, PP_NOMEM, "out of memory");
  }
  store_close(s);
  spec_plan_clear(&p);
  if (rc) return cli_fail(CMD, &err);
  puts(text);
  free(text);
  return 0;
}
