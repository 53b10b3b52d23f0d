#!/usr/bin/env bash
# podplan set-up on Debian 12 (bookworm). Installs the Debian packages podplan needs (safe to
# rerun: it installs only what is missing), builds, then:
#   ./setup.sh run     the main job on built-in defaults: the pillar study's quick grid, then
#                      the report of the store (results/pillar, results/report)
#   ./setup.sh tour    the other commands: search --method all, presets, validate, simulate,
#                      the CPU backend under mpirun, calibration
#   ./setup.sh test    the whole test suite: a normal build, then an ASan+UBSan build
#   ./setup.sh backend only build, then the CPU backend under mpirun and calibration (the
#                      part of the tour that runs plans for real)
#   ./setup.sh deps    only install the packages
#   ./setup.sh build   only install and build (build/)
#   ./setup.sh fuzz    also install clang and libFuzzer, build the fuzz harnesses (build-fuzz/)
#                      and replay their corpora; benchmarks/fuzz.sh MINUTES runs a campaign
# Runs as root, or as a user with sudo. CUDA, cuBLAS and NCCL are used when found under
# /usr/local/cuda (they are not Debian packages and are not installed here).
set -euo pipefail
cd "$(dirname "$0")"

PACKAGES=(
  build-essential cmake pkg-config    # toolchain
  libsqlite3-dev libjansson-dev       # store, specs
  libsimgrid-dev                      # sim/: SimGrid 3.32 C API
  libgsl-dev                          # calibration fits
  coinor-libcbc-dev                   # intra-op ILP of the two-level search (Alpa's solver)
  libopenmpi-dev openmpi-bin          # backend ranks, sharded searches
  libopenblas-dev                     # CPU backend GEMMs
  gnuplot-nox                         # plots of studies and reports
)
# Only for the fuzz harnesses (-DPODPLAN_FUZZ=ON): clang and its libFuzzer/sanitizer runtimes.
FUZZ_PACKAGES=(clang libclang-rt-14-dev)
JOBS=$(nproc 2>/dev/null || echo 2)

# deps [PACKAGE...]: install those of the packages (default: PACKAGES) that are missing
deps() {
  local want=("${@:-${PACKAGES[@]}}")
  local missing=() p
  for p in "${want[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -eq 0 ]; then
    echo "setup: all ${#want[@]} Debian packages present"
    return
  fi
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -q
  $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
}

# build DIR [cmake options...]
build() {
  local dir=$1
  shift
  cmake -S . -B "$dir" -DPODPLAN_WERROR=ON "$@"
  cmake --build "$dir" -j"$JOBS"
}

run_main() {
  local bin=build/cli/podplan
  # The question podplan exists to answer: does Alpa's two-level split still find the best
  # plan? The pillar study's quick grid (GPT-3 39B and 175B on 256 GPUs of DGX H100
  # nodes, of one NVLink Switch pod and of GB200 NVL72 racks): every search method, each
  # one's best simulated, the gaps to global's certified lower bound; then the report of
  # everything the store holds. Tables on the terminal; CSV, markdown and plots in results/.
  mkdir -p results
  echo "== podplan study pillar --quick --db podplan.db --out results/pillar"
  $bin study pillar --quick --db podplan.db --out results/pillar
  echo
  echo "== podplan report --db podplan.db --out results/report"
  $bin report --db podplan.db --out results/report
  echo
  echo "The answer: results/pillar/pillar.md (plots beside it); the report: results/report/report.md"
}

# A tour of the other commands: presets, validation against published runs, the simulator,
# the backend on this machine's CPUs and calibration.
run_tour() {
  local bin=build/cli/podplan
  mkdir -p results
  echo "== podplan search --method all: GPT-3 175B on 256 GPUs of h100-nvl256, global batch 1536"
  $bin search --model gpt3-175b --cluster h100-nvl256 --gpus 256 --gbs 1536 --method all \
    --top 3 --db podplan.db
  echo
  echo "== podplan presets"
  $bin presets
  echo
  echo "== podplan check --presets --db podplan.db"
  $bin check --presets --db podplan.db
  echo
  echo "== podplan study validate --db podplan.db --out results"
  $bin study validate --db podplan.db --out results
  echo
  echo "== bench_costmodel"
  build/benchmarks/bench_costmodel --seconds 2
  echo
  echo "== podplan simulate (Llama 3 70B on one 256-GPU NVLink Switch pod; Perfetto trace in results/)"
  $bin simulate --model llama3-70b --cluster h100-nvl256 --gpus 256 \
    --plan tp=8,pp=4,mbs=1,gbs=256,sp=1,recompute=selective,zero=1 \
    --trace results/llama3-70b-nvl256.trace.json --db podplan.db
  echo
  echo "== bench_sim (up to 4096 GPUs)"
  build/benchmarks/bench_sim
  echo
  run_backend
}

# The backend on this machine's CPUs: 4 MPI ranks run a small GPT-style model's iteration
# (tensor and pipeline parallel), a collective sweep is read back as an nccl-tests log.
run_backend() {
  local bin=build/cli/podplan
  local mpirun=(mpirun -n 4 --oversubscribe)
  if [ "$(id -u)" = 0 ]; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  fi
  mkdir -p results
  echo "== bench_backend (OpenBLAS peak, the cpu device's GEMMs, executor overhead)"
  build/benchmarks/bench_backend --quick
  echo
  echo "== mpirun -n 4 podplan run (a small model, tp=2 x pp=2, on the cpu device)"
  "${mpirun[@]}" $bin run --cluster cpu-host --gpus 4 --plan tp=2,pp=2,mbs=1,gbs=8,sp=1 \
    --model '{"name":"gpt-small-cpu","layers":8,"hidden":256,"heads":8,"seq_len":256,"vocab":1024}' \
    --trace results/run-cpu.trace.json --db podplan.db
  echo
  echo "== mpirun -n 4 podplan bench coll, read back by podplan import nccl-tests"
  "${mpirun[@]}" $bin bench coll -b 1K -e 4M --iters 10 --db podplan.db > results/bench-coll.txt
  tail -n 4 results/bench-coll.txt
  # read back without a cluster: these are the CPU's MPI figures and samples of other systems,
  # not measurements of a cluster a calibration could use
  $bin import nccl-tests results/bench-coll.txt tests/fixtures/nccl-tests/synthetic_*.txt \
    --db podplan.db
  echo
  echo "== podplan calibrate: the collective model on two 8-H100 sample logs; the published runs"
  rm -f results/calibrate.db
  $bin import nccl-tests tests/fixtures/nccl-tests/synthetic_all_reduce_v2.19.txt \
    tests/fixtures/nccl-tests/synthetic_all_gather_v2.19.txt --cluster dgx-h100 --gpus 8 \
    --db results/calibrate.db
  $bin calibrate --cluster dgx-h100 --holdout 0.25 --plots results --db results/calibrate.db
  $bin calibrate --runs benchmarks/data/published_runs.csv --plots results \
    --db results/calibrate.db
  echo
  echo "== the funnel on this machine: search on cpu-host, run 6 plans on the CPU backend, fit"
  echo "   on 4 of them, check on 2 (podplan calibrate --from-search)"
  rm -f results/loop.db
  $bin search --model tests/fixtures/backend/tiny.json --cluster cpu-host --gpus 2 --gbs 8 \
    --method exhaustive --top 500 --db results/loop.db > /dev/null
  $bin calibrate --from-search 1 --top 6 --spread --layers 4 --holdout plans \
    --launch "mpirun -n 2 --oversubscribe" --plots results/loop --db results/loop.db
}

run_tests() {
  echo "== tests (build/)"
  (cd build && ctest --output-on-failure -j"$JOBS")
  echo "== tests under AddressSanitizer + UndefinedBehaviorSanitizer (build-san/)"
  build build-san -DPODPLAN_SANITIZE=address,undefined
  (cd build-san && ctest --output-on-failure -j"$JOBS")
}

case "${1:-run}" in
  deps) deps ;;
  build) deps && build build ;;
  run) deps && build build && run_main ;;
  tour) deps && build build && run_tour ;;
  backend) build build && run_backend ;;
  fuzz)
    deps && deps "${FUZZ_PACKAGES[@]}" &&
      build build-fuzz -DCMAKE_C_COMPILER=clang -DPODPLAN_FUZZ=ON &&
      (cd build-fuzz && ctest --output-on-failure -L fuzz)
    ;;
  test) deps && build build && run_tests ;;
  *) echo "usage: $0 [run|test|deps|build|tour|backend|fuzz]" >&2; exit 2 ;;
esac
