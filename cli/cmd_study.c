/* podplan study: run a study. Arrives with studies; until then -h works and
 * anything else says "not implemented yet" (exit 2). */
#include "cli.h"

static const char usage[] =
    "usage: podplan study pillar|validate|capacity [--db F] [--out DIR]\n"
    "\n"
    "  pillar     where Alpa's two-level search still finds the best plan, fabric by fabric\n"
    "  validate   the cost model against published training runs (MAPE per source)\n"
    "  capacity   cluster sizing for a model and a target time\n"
    "\n"
    "  --db F       store file (default podplan.db)\n"
    "  --out DIR    where tables and plots go\n"
    "  -h, --help   this text\n";

int cmd_study(int argc, char **argv) { return cli_not_implemented("study", usage, argc, argv); }
