/* podplan simulate: score a plan with the SimGrid simulator. Arrives with the simulator; until then -h works and
 * anything else says "not implemented yet" (exit 2). */
#include "cli.h"

static const char usage[] =
    "usage: podplan simulate --model M --cluster C [--gpus N] --plan P [--trace out.json]\n"
    "                        [--platform-out F.xml] [--db F] [--json]\n"
    "\n"
    "Simulates one training iteration of the plan in SimGrid, with every group of the plan\n"
    "running concurrently so that collectives sharing links contend.\n"
    "\n"
    "  --model M, --cluster C, --gpus N, --plan P   as for predict\n"
    "  --trace out.json     write a Perfetto/Chrome trace (a track per GPU)\n"
    "  --platform-out F     write the generated SimGrid platform\n"
    "  --db F               store the score with source 'sim' (default podplan.db)\n"
    "  --json               the keys of predict plus sim_wall_s and link utilisation\n"
    "  -h, --help           this text\n";

int cmd_simulate(int argc, char **argv) { return cli_not_implemented("simulate", usage, argc, argv); }
