#!/bin/bash
# GPU checks in one call on a bare GPU machine: one H100/H200 with its driver, CUDA 13 (nvcc,
# cuBLAS), CMake, a C/C++ compiler and Python with the nvidia-nccl-cu13 wheel; no Debian
# development packages, no network. Jansson and SQLite come with the working tree as Debian
# packages in .gpu-deps/ (made here by benchmarks/gpu_deps.sh), unpacked into build-gpu/deps.
#
# Steps, each under a time limit, each ending in one line "gpu_check: PASS|FAIL|NO GPU <step>":
#   preflight        nvidia-smi, nvcc (compiles a kernel), cuBLAS, NCCL (the wheel), cmake,
#                    make, the deps folder; every missing prerequisite named
#   build            GPU-only Release build (-DPODPLAN_GPU_ONLY=ON: the driver, the cuda
#                    device, its tests, bench_cuda; no SimGrid, OpenBLAS or MPI), sm_90
#   test_cuda_probe  \  test binaries run directly: "skipped" (77) on a GPU machine fails
#   test_cuda_dev    /
#   bench_cuda       cuBLAS GEMMs and the memory kernel (fails below 70% of the bf16 peak)
#   run              podplan run --device cuda: 1 rank, a Llama 3 8B iteration at 4 layers
#   bench_gemm       podplan bench gemm --device cuda: 12 shapes, large and small, long and
#                    short k-loops (what calibrate needs to tell gemm_eff, gemm_k_half and
#                    kernel_us apart)
# run and bench_gemm store their measurements under one cluster: benchmarks/h200-node.json on
# an H200, the dgx-h100 preset otherwise. GSL is not on the GPU machine: the store comes back
# (gpu_check.db) and is fitted where podplan is fully built:
#   podplan calibrate --cluster benchmarks/h200-node.json --db gpu_check.db --holdout 0.25
# Without a GPU (nvidia-smi missing or listing none) the GPU steps report NO GPU instead.
# The last line sums up; exit status 0 all passed, 1 something failed, 77 no GPU (the rest
# passed). Files (at most 5) go to $OUT when set, else build-gpu/check: gpu_check.log (all
# of this output), build.log (the full configure and build log), results.txt (the step lines),
# run-cuda.trace.json, gpu_check.db. The whole run stays within GPU_CHECK_SECONDS (default
# 570).
# usage: [OUT=dir] [NCCL_ROOT=dir] bash benchmarks/gpu_check.sh
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
bld=$root/build-gpu
out=${OUT:-$bld/check}
mkdir -p "$out" || exit 1
out=$(cd "$out" && pwd)
exec > >(tee "$out/gpu_check.log") 2>&1
: > "$out/results.txt"
limit=${GPU_CHECK_SECONDS:-570}
t0=$SECONDS
gpu=0       # 1 when nvidia-smi lists a GPU
built=0     # 1 after a good build
nfail=0 npass=0 nnogpu=0

# result STATUS STEP STARTED DETAIL: the step's one line
result() {
  local line
  line=$(printf "gpu_check: %-6s %-16s %4d s  %s" "$1" "$2" $((SECONDS - $3)) "$4")
  echo "$line"
  echo "$line" >> "$out/results.txt"
  case $1 in PASS) npass=$((npass + 1)) ;; FAIL) nfail=$((nfail + 1)) ;; *) nnogpu=$((nnogpu + 1)) ;; esac
}

# limit_for MAX: seconds a step may take: MAX, or what is left of the total less 15 s
limit_for() {
  local left=$((limit - (SECONDS - t0) - 15))
  [ "$left" -lt "$1" ] && echo $((left > 5 ? left : 5)) || echo "$1"
}

# runstep STEP MAX CMD...: runs CMD under a time limit and reports it. Without a GPU, a test
# binary's 77 (skipped) or an error that names the missing GPU or driver is NO GPU; anything
# else (a module that does not load, a crash) fails. With a GPU, 77 fails.
runstep() {
  local name=$1 max=$2 s=$SECONDS lim rc log
  shift 2
  echo
  echo "== $name: $*"
  if [ "$built" != 1 ]; then
    result FAIL "$name" "$s" "not run: the build failed"
    return
  fi
  lim=$(limit_for "$max")
  log=$(mktemp)
  timeout -k 10 "$lim" "$@" 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  if [ "$rc" = 0 ]; then
    result PASS "$name" "$s" ""
  elif [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    result FAIL "$name" "$s" "timed out after $lim s"
  elif [ "$rc" = 77 ] && [ $gpu = 0 ]; then
    result "NO GPU" "$name" "$s" "skipped (77): no GPU visible"
  elif [ "$rc" = 77 ]; then
    result FAIL "$name" "$s" "skipped (77) on a machine with a GPU"
  elif [ $gpu = 0 ] && grep -qE "cudaGetDeviceCount|no GPU|CUDA driver|no CUDA-capable" "$log" &&
       ! grep -qE "cannot load|not found \(looked in" "$log"; then
    result "NO GPU" "$name" "$s" "exit $rc: $(grep -m1 -E 'cudaGetDeviceCount|no GPU|CUDA driver|no CUDA-capable' "$log" | cut -c1-120)"
  else
    result FAIL "$name" "$s" "exit $rc"
  fi
  rm -f "$log"
}

summary() {
  local verdict
  if [ $nfail -gt 0 ]; then verdict=FAILED
  elif [ $nnogpu -gt 0 ]; then verdict="NO GPU (build and CUDA libraries checked; GPU steps not run)"
  else verdict=PASSED; fi
  echo
  cat "$out/results.txt"
  echo "gpu_check: $((npass + nfail + nnogpu)) steps: $npass PASS, $nfail FAIL, $nnogpu NO GPU in $((SECONDS - t0)) s: $verdict"
  [ $nfail -gt 0 ] && exit 1
  [ $nnogpu -gt 0 ] && exit 77
  exit 0
}

# ---- preflight ------------------------------------------------------------------------------
s=$SECONDS
echo "== preflight ($(date -u +%Y-%m-%dT%H:%M:%SZ), $(uname -m), $(nproc) CPUs, output in $out)"
missing=()
need() { command -v "$1" >/dev/null 2>&1 || missing+=("$2"); }
need timeout "coreutils timeout"
need cmake "cmake (>= 3.22)"
need python3 "python3"
command -v make >/dev/null 2>&1 || command -v ninja >/dev/null 2>&1 || missing+=("make or ninja")
cc=$(command -v cc || command -v gcc || true)
cxx=$(command -v c++ || command -v g++ || true)
[ -n "$cc" ] || missing+=("a C compiler (cc/gcc)")
[ -n "$cxx" ] || missing+=("a C++ compiler (g++: nvcc's host compiler)")
if command -v cmake >/dev/null 2>&1; then
  cv=$(cmake --version | sed -n 's/^cmake version \([0-9]*\.[0-9]*\).*/\1/p')
  echo "cmake $cv"
  printf '%s\n%s\n' 3.22 "$cv" | sort -V -C || missing+=("cmake >= 3.22 (found $cv)")
fi
# CUDA: nvcc on PATH or under /usr/local/cuda; it must compile a kernel with the host compiler
nvcc=$(command -v nvcc || true)
[ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ] && nvcc=/usr/local/cuda/bin/nvcc
cuda=""
if [ -z "$nvcc" ]; then
  missing+=("nvcc (CUDA 13 toolkit; not on PATH, not in /usr/local/cuda/bin)")
else
  cuda=$(dirname "$(dirname "$(readlink -f "$nvcc")")")
  echo "nvcc $nvcc: $("$nvcc" --version | grep -o 'release [0-9.]*' || echo '?')"
  tmp=$(mktemp -d)
  echo '__global__ void k(float *x) { x[threadIdx.x] = 1; } int main(void) { return 0; }' > "$tmp/k.cu"
  if ! timeout 60 "$nvcc" -arch=sm_90 -c "$tmp/k.cu" -o "$tmp/k.o" > "$tmp/nvcc.log" 2>&1; then
    missing+=("nvcc cannot compile a kernel for sm_90: $(head -c 300 "$tmp/nvcc.log" | tr '\n' ' ')")
  fi
  rm -rf "$tmp"
  cublas_h=$(ls "$cuda"/include/cublas_v2.h "$cuda"/targets/*/include/cublas_v2.h 2>/dev/null | head -1)
  cublas_so=$(ls "$cuda"/lib64/libcublas.so "$cuda"/lib/libcublas.so \
              "$cuda"/targets/*/lib/libcublas.so 2>/dev/null | head -1)
  [ -n "$cublas_h" ] && [ -n "$cublas_so" ] && echo "cuBLAS $cublas_so" ||
    missing+=("cuBLAS (cublas_v2.h and libcublas.so under $cuda)")
fi
# NCCL: $NCCL_ROOT, else the nvidia-nccl-cu13 wheel (a namespace package: no __file__)
nccl=${NCCL_ROOT:-}
if [ -z "$nccl" ] && command -v python3 >/dev/null 2>&1; then
  nccl=$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])' 2>/dev/null || true)
fi
if [ -n "$nccl" ] && [ -f "$nccl/include/nccl.h" ] && [ -e "$nccl/lib/libnccl.so.2" ]; then
  echo "NCCL $nccl: $(sed -n 's/^#define NCCL_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\).*/\2/p' "$nccl/include/nccl.h" | paste -sd.)"
else
  missing+=("NCCL (pip wheel nvidia-nccl-cu13: include/nccl.h and lib/libnccl.so.2; or set NCCL_ROOT)")
fi
# Jansson and SQLite: Debian packages carried in .gpu-deps, unpacked with dpkg-deb or ar + tar
debs=()
for p in libjansson4 libjansson-dev libsqlite3-0 libsqlite3-dev; do
  f=$(ls "$root"/.gpu-deps/"${p}"_*.deb 2>/dev/null | head -1)
  [ -n "$f" ] && debs+=("$f") || missing+=(".gpu-deps/${p}_*.deb (run benchmarks/gpu_deps.sh on a Debian 12 machine and bring .gpu-deps)")
done
command -v dpkg-deb >/dev/null 2>&1 || { command -v ar >/dev/null 2>&1 && command -v tar >/dev/null 2>&1; } ||
  missing+=("dpkg-deb, or ar and tar, to unpack .gpu-deps")
# the GPU
if ! command -v nvidia-smi >/dev/null 2>&1; then
  echo "nvidia-smi: not found: no GPU on this machine"
elif ! timeout 30 nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv; then
  echo "nvidia-smi: failed: no usable GPU"
elif [ "$(timeout 30 nvidia-smi -L 2>/dev/null | grep -c '^GPU')" -gt 0 ]; then
  gpu=1
else
  echo "nvidia-smi: no GPU listed"
fi
if [ ${#missing[@]} -gt 0 ]; then
  for m in "${missing[@]}"; do echo "missing: $m"; done
  result FAIL preflight "$s" "${#missing[@]} missing: ${missing[*]}"
  summary
fi
if [ $gpu = 1 ]; then
  result PASS preflight "$s" ""
else
  result "NO GPU" preflight "$s" "no GPU visible: building, then the GPU steps report NO GPU"
fi

# ---- build ----------------------------------------------------------------------------------
s=$SECONDS
echo
echo "== build: GPU-only Release build in $bld (full log: $out/build.log)"
# unpack_deps DIR: the carried Debian packages into DIR (never into /); prints the lib folder
unpack_deps() {
  local f d
  rm -rf "$1" && mkdir -p "$1" || return 1
  for f in "${debs[@]}"; do
    if command -v dpkg-deb >/dev/null 2>&1; then
      dpkg-deb -x "$f" "$1" || return 1
    else
      d=$(mktemp -d) && (cd "$d" && ar x "$f" && tar -xf data.tar.* -C "$1") || return 1
      rm -rf "$d"
    fi
  done
  for d in "$1"/usr/lib/*-linux-gnu "$1"/usr/lib; do
    [ -e "$d/libsqlite3.so" ] && [ -e "$d/libjansson.so" ] && echo "$d" && return 0
  done
  echo "no libsqlite3.so and libjansson.so in $1" >&2
  return 1
}
deps=$bld/deps
lim=$(limit_for 360)
{
  rm -f "$bld/CMakeCache.txt" # nothing found by an earlier configure is kept
  lib=$(unpack_deps "$deps") &&
    echo "Jansson and SQLite from .gpu-deps: $lib" &&
    timeout -k 10 "$lim" cmake -S "$root" -B "$bld" -DCMAKE_BUILD_TYPE=Release \
      -DPODPLAN_GPU_ONLY=ON -DPODPLAN_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
      -DCMAKE_CUDA_COMPILER="$nvcc" -DCUDAToolkit_ROOT="$cuda" -DNCCL_ROOT="$nccl" \
      -DSQLite3_INCLUDE_DIR="$deps/usr/include" -DSQLite3_LIBRARY="$lib/libsqlite3.so" \
      -DJANSSON_INCLUDE_DIR="$deps/usr/include" -DJANSSON_LIBRARY="$lib/libjansson.so" &&
    timeout -k 10 "$(limit_for $((lim - (SECONDS - s))))" cmake --build "$bld" -j"$(nproc)"
} > "$out/build.log" 2>&1
rc=$?
if [ $rc = 0 ]; then
  built=1
  grep -E "^(-- (podplan|The CUDA|Found)|Jansson and SQLite)" "$out/build.log"
  result PASS build "$s" ""
else
  tail -n 25 "$out/build.log"
  [ $rc = 124 ] && why="timed out after $lim s" || why="exit $rc"
  result FAIL build "$s" "$why (see build.log)"
fi

# ---- the GPU steps --------------------------------------------------------------------------
db=$out/gpu_check.db
rm -f "$db"
cluster=dgx-h100
if [ $gpu = 1 ] && timeout 30 nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  cluster=$root/benchmarks/h200-node.json
fi
echo
echo "== measurements go to $db, cluster $cluster"
runstep test_cuda_probe 60 "$bld/tests/test_cuda_probe"
runstep test_cuda_dev 120 "$bld/tests/test_cuda_dev"
runstep bench_cuda 180 "$bld/benchmarks/bench_cuda"
runstep run 120 "$bld/cli/podplan" run --device cuda --model llama3-8b --cluster "$cluster" \
  --gpus 1 --plan tp=1,pp=1,mbs=1,gbs=4 --layers 4 --iters 5 --db "$db" \
  --trace "$out/run-cuda.trace.json"
runstep bench_gemm 120 "$bld/cli/podplan" bench gemm --device cuda --cluster "$cluster" \
  --gpus 1 --db "$db" --shapes \
  8192x8192x8192,4096x4096x4096,8192x1536x12288,2048x12288x1536,16384x16384x16384,\
1024x1024x1024,2048x2048x256,8192x8192x128,512x512x512,4096x14336x4096,4096x4096x14336,256x4096x4096
summary
