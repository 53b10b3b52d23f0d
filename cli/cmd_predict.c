/* podplan predict: score a plan with the analytical cost model. Arrives with the cost model; until then -h works and
 * anything else says "not implemented yet" (exit 2). */
#include "cli.h"

static const char usage[] =
    "usage: podplan predict --model M --cluster C [--gpus N] --plan P [--calibration ID] [--json]\n"
    "\n"
    "Scores one plan with the analytical cost model: iteration time and its breakdown (compute,\n"
    "exposed TP/CP/EP communication, pipeline bubble, p2p, DP communication, optimizer),\n"
    "tokens/s, model TFLOP/s per GPU, MFU, HFU, memory per GPU and whether it fits.\n"
    "\n"
    "  --model M          preset name, JSON file or inline JSON (podplan presets lists presets)\n"
    "  --cluster C        preset name, JSON file or inline JSON\n"
    "  --gpus N           size the cluster to N GPUs\n"
    "  --plan P           \"tp=8,pp=16,dp=8,mbs=1,gbs=1536,...\" or a plan JSON file\n"
    "  --calibration ID   use that calibration (default: the latest for the cluster)\n"
    "  --db F             store file (default podplan.db)\n"
    "  --json             one JSON object: iter_time_s, tokens_per_s, model_tflops_per_gpu, mfu,\n"
    "                     hfu, mem_gib_per_gpu, feasible, breakdown\n"
    "  -h, --help         this text\n";

int cmd_predict(int argc, char **argv) { return cli_not_implemented("predict", usage, argc, argv); }
