/* podplan search: search plans. Arrives with plan search; until then -h works and
 * anything else says "not implemented yet" (exit 2). */
#include "cli.h"

static const char usage[] =
    "usage: podplan search --model M --cluster C [--gpus N]\n"
    "                      --method exhaustive|megatron|two-level|global\n"
    "                      [--top K] [--simulate K] [--db F] [--json]\n"
    "\n"
    "Searches the plan space with one method on the cost model, re-scores the best K with the\n"
    "simulator and stores the run.\n"
    "\n"
    "  --method NAME     exhaustive: every uniform plan; megatron: the published heuristic;\n"
    "                    two-level: Alpa's inter-op DP + intra-op ILP (CBC);\n"
    "                    global: joint search with a lower bound and optimality gap\n"
    "  --top K           report the best K plans\n"
    "  --simulate K      re-score the best K with SimGrid\n"
    "  --db F            store file (default podplan.db)\n"
    "  --json            method, evaluations, wall_s, best, best_iter_time_s, lower_bound_s\n"
    "  -h, --help        this text\n";

int cmd_search(int argc, char **argv) { return cli_not_implemented("search", usage, argc, argv); }
