/* podplan calibrate: fit and store a calibration. Arrives with calibration; until then -h works and
 * anything else says "not implemented yet" (exit 2). */
#include "cli.h"

static const char usage[] =
    "usage: podplan calibrate --cluster C [--holdout F] [--db F] [--json]\n"
    "\n"
    "Fits the cost model's and the simulator's parameters (per-level bandwidth efficiency and\n"
    "latency per collective algorithm, GEMM efficiency surface, memory-bound efficiency) to the\n"
    "stored measurements with GSL and stores the calibration.\n"
    "\n"
    "  --cluster C   the cluster whose measurements to fit\n"
    "  --holdout F   fraction of measurements held back to report error before and after\n"
    "  --db F        store file (default podplan.db)\n"
    "  --json        calibration_id, measurements, params_fitted, holdout_mape_before/after\n"
    "  -h, --help    this text\n";

int cmd_calibrate(int argc, char **argv) { return cli_not_implemented("calibrate", usage, argc, argv); }
