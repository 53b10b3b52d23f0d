/* podplan import: read nccl-tests logs. Arrives with the nccl-tests importer; until then -h works and
 * anything else says "not implemented yet" (exit 2). */
#include "cli.h"

static const char usage[] =
    "usage: podplan import nccl-tests FILE... [--cluster C] [--db F] [--json]\n"
    "\n"
    "Reads nccl-tests logs (every format variant: old and new columns, -c 0, per-iteration\n"
    "columns, NCCL INFO and MPI prefixes) and stores their rows as measurements.\n"
    "\n"
    "  --cluster C   the cluster the logs were measured on\n"
    "  --db F        store file (default podplan.db)\n"
    "  --json        per file: collective, ranks, rows, max_busbw_gbps, max_algbw_gbps\n"
    "  -h, --help    this text\n";

int cmd_import(int argc, char **argv) { return cli_not_implemented("import", usage, argc, argv); }
