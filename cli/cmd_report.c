/* podplan report: tables and plots from the store. Arrives with reports; until then -h works and
 * anything else says "not implemented yet" (exit 2). */
#include "cli.h"

static const char usage[] =
    "usage: podplan report [--db F] [--out DIR]\n"
    "\n"
    "Writes tables and plots of the stored search runs, scores, measurements and calibrations.\n"
    "\n"
    "  --db F       store file (default podplan.db)\n"
    "  --out DIR    output folder (default report/)\n"
    "  -h, --help   this text\n";

int cmd_report(int argc, char **argv) { return cli_not_implemented("report", usage, argc, argv); }
