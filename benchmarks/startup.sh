#!/bin/bash
# Start-up time of the podplan driver: the median wall time of N calls (default 51) of
# `podplan --version` (loads the cuda module: CUDA runtime, cuBLAS, NCCL) and of a cost-model
# `podplan predict` (loads no module), with the libraries the driver links. The target for
# predict is <= 20 ms. Each call is timed alone (fork + exec + run + exit), outputs discarded.
# usage: benchmarks/startup.sh [path/to/podplan] [N]
set -euo pipefail
bin=${1:-$(dirname "$0")/../build/cli/podplan}
n=${2:-51}
[ -x "$bin" ] || { echo "startup.sh: no podplan at $bin (build first)" >&2; exit 2; }

# median_ms CMD...: median over n calls, in ms (date +%s%N: ns)
median_ms() {
  local i s e
  for ((i = 0; i < n; i++)); do
    s=$(date +%s%N)
    "$@" >/dev/null 2>&1 || true
    e=$(date +%s%N)
    echo $(((e - s) / 1000))
  done | sort -n | awk '{ t[NR] = $1 } END { printf "%.1f", t[int((NR + 1) / 2)] / 1000 }'
}

echo "podplan start-up: $bin, median of $n calls each ($(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg))"
echo "  shared libraries linked: $(ldd "$bin" | grep -c '=>')"
printf "  %-60s %8s ms\n" "/bin/true (fork + exec floor)" "$(median_ms /bin/true)"
printf "  %-60s %8s ms\n" "podplan --version" "$(median_ms "$bin" --version)"
printf "  %-60s %8s ms\n" "podplan predict (llama3-70b, dgx-h100, 64 GPUs)" \
  "$(median_ms "$bin" predict --model llama3-70b --cluster dgx-h100 --gpus 64 \
     --plan tp=8,pp=4,dp=2,mbs=1,gbs=64)"
