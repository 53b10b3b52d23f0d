/* podplan export: print a stored plan. Arrives with the exporters; until then -h works and
 * anything else says "not implemented yet" (exit 2). */
#include "cli.h"

static const char usage[] =
    "usage: podplan export --plan-id ID --format megatron|json [--db F]\n"
    "\n"
    "  --plan-id ID   a plan id from the store (podplan check --db, search, study)\n"
    "  --format F     megatron: Megatron-LM command-line arguments; json: canonical plan JSON\n"
    "  --db F         store file (default podplan.db)\n"
    "  -h, --help     this text\n";

int cmd_export(int argc, char **argv) { return cli_not_implemented("export", usage, argc, argv); }
