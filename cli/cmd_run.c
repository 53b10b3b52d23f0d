/* podplan run: execute a plan for real. Arrives with the execution backend; until then -h works and
 * anything else says "not implemented yet" (exit 2). */
#include "cli.h"

static const char usage[] =
    "usage: podplan run --plan-id ID | (--model M --cluster C --plan P) [--device cpu|cuda]\n"
    "                   [--warmup W] [--iters N] [--layers L] [--trace out.json] [--db F] [--json]\n"
    "\n"
    "Executes the plan's training iteration for real, one rank per GPU (or CPU process) under\n"
    "mpirun/srun: GEMMs, memory-bound ops, collectives and pipeline sends in schedule order.\n"
    "\n"
    "  --device cpu|cuda   MPI + OpenBLAS, or NCCL + cuBLAS\n"
    "  --json              on rank 0: iter_time_s, ranks, device, verified\n"
    "  -h, --help          this text\n";

int cmd_run(int argc, char **argv) { return cli_not_implemented("run", usage, argc, argv); }
