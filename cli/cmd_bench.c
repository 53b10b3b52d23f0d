/* podplan bench: microbenchmarks into the store. Arrives with microbenchmarks; until then -h works and
 * anything else says "not implemented yet" (exit 2). */
#include "cli.h"

static const char usage[] =
    "usage: podplan bench gemm|coll [--device cpu|cuda] [--db F] [options]\n"
    "\n"
    "  gemm   sweep GEMM shapes and store their times (efficiency surface for calibration)\n"
    "  coll   sweep collective sizes and groups; prints nccl-tests-compatible output\n"
    "\n"
    "  --device cpu|cuda   where to run\n"
    "  --db F              store file (default podplan.db)\n"
    "  -h, --help          this text\n";

int cmd_bench(int argc, char **argv) { return cli_not_implemented("bench", usage, argc, argv); }
