#!/bin/bash
# Fuzz campaign: runs each libFuzzer harness of fuzz/ for MINUTES, one after the other, and
# prints one line per harness:
#   fuzz NAME minutes=M execs=N exec_per_s=R cov=C ft=F corpus=K crashes=X
# execs and exec_per_s are libFuzzer's stat::number_of_executed_units and
# stat::average_exec_per_sec (-print_final_stats=1); cov (coverage edges) and ft (features) come
# from its last status line; corpus counts the scratch corpus's files; crashes counts the
# artifacts it wrote (crash-*, leak-*, timeout-*, oom-*: any input that broke an invariant,
# tripped ASan/UBSan/LSan, ran over 25 s or over 2 GiB). Exit status 1 when any harness found
# one, 2 on bad usage or a failed build.
#
# usage: benchmarks/fuzz.sh MINUTES [NAME[:MINUTES]...]   (default: every harness)
#        benchmarks/fuzz.sh merge [NAME...]    minimise the scratch corpora into fuzz/corpus
# (merge adds the scratch inputs that reach new edges: -merge=1 -use_counters=0, edges rather
# than hit counts, keeps the committed corpus to a few hundred small files)
# With FUZZ_RUNS=N in the environment a harness also stops after N executions (libFuzzer
# -runs), so MINUTES becomes a cap: e.g. FUZZ_RUNS=10000000 benchmarks/fuzz.sh 60.
#
# Builds build-fuzz/ with clang and -DPODPLAN_FUZZ=ON when a harness is missing (./setup.sh fuzz
# installs clang and libFuzzer). Scratch corpora, artifacts and logs live in
# build-fuzz/campaign/ (git-ignored); a scratch corpus starts as a copy of fuzz/corpus/NAME and
# keeps what earlier runs found. Each harness reads fuzz/dict/NAME.dict.
set -uo pipefail
cd "$(dirname "$0")/.."
ALL=(model cluster plan nccltests studycsv pillar capacity)
BUILD=build-fuzz
WORK=$BUILD/campaign

usage() {
  sed -n '/^# usage:/,/^#        /p' "$0" | sed 's/^# //' >&2
  exit 2
}
[ $# -ge 1 ] || usage

build() {
  local need=0 n
  for n in "${ALL[@]}"; do [ -x "$BUILD/fuzz/fuzz_$n" ] || need=1; done
  [ $need = 1 ] || [ "${FUZZ_REBUILD:-0}" = 1 ] || return 0
  cmake -S . -B "$BUILD" -DCMAKE_C_COMPILER=clang -DPODPLAN_FUZZ=ON -DPODPLAN_WERROR=ON \
    >"$WORK.cmake.log" 2>&1 && cmake --build "$BUILD" -j"$(nproc)" >>"$WORK.cmake.log" 2>&1 ||
    { echo "fuzz.sh: build failed (see $WORK.cmake.log)" >&2; exit 2; }
}

# one harness: NAME SECONDS
campaign() {
  local n=$1 secs=$2 corpus=$WORK/corpus/$1 art=$WORK/artifacts/$1/ log=$WORK/$1.log
  local execs rate cov ft crashes start=$SECONDS
  mkdir -p "$corpus" "$art"
  cp -n fuzz/corpus/"$n"/* "$corpus"/
  "$BUILD/fuzz/fuzz_$n" "$corpus" -dict=fuzz/dict/"$n".dict -max_total_time="$secs" \
    -print_final_stats=1 -timeout=25 -rss_limit_mb=2048 -artifact_prefix="$art" \
    -close_fd_mask=1 -runs="${FUZZ_RUNS:--1}" >"$log" 2>&1
  local elapsed=$((SECONDS - start))
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1 | cut -d' ' -f2)
  ft=$(grep -o 'ft: [0-9]*' "$log" | tail -n 1 | cut -d' ' -f2)
  crashes=$(find "$art" -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' \
    -o -name 'oom-*' \) | wc -l)
  printf 'fuzz %s minutes=%s execs=%s exec_per_s=%s cov=%s ft=%s corpus=%s crashes=%s\n' "$n" \
    "$(awk "BEGIN{printf \"%.1f\", $elapsed/60}")" "${execs:-0}" "${rate:-0}" "${cov:-0}" "${ft:-0}" \
    "$(find "$corpus" -type f | wc -l)" "$crashes"
  [ "$crashes" = 0 ]
}

mkdir -p "$WORK"
if [ "$1" = merge ]; then
  shift
  build
  names=("${@:-${ALL[@]}}")
  for n in "${names[@]}"; do
    [ -d "$WORK/corpus/$n" ] || continue
    before=$(ls fuzz/corpus/"$n" | wc -l)
    "$BUILD/fuzz/fuzz_$n" -merge=1 -use_counters=0 fuzz/corpus/"$n" "$WORK/corpus/$n" \
      >"$WORK/$n.merge.log" 2>&1 || { echo "fuzz.sh: merge of $n failed (see $WORK/$n.merge.log)"; exit 2; }
    echo "merge $n files=$before->$(ls fuzz/corpus/"$n" | wc -l) bytes=$(du -sb fuzz/corpus/"$n" | cut -f1)"
  done
  exit 0
fi

minutes=$1
shift
[[ $minutes =~ ^[0-9]+([.][0-9]+)?$ ]] || usage
build
status=0
for arg in "${@:-${ALL[@]}}"; do
  n=${arg%%:*}
  m=$minutes
  [ "$arg" = "$n" ] || m=${arg#*:}
  [ -f "fuzz/fuzz_$n.c" ] || { echo "fuzz.sh: no harness $n (have: ${ALL[*]})" >&2; exit 2; }
  secs=$(awk "BEGIN{s=int($m*60); print s<1?1:s}")
  campaign "$n" "$secs" || status=1
done
exit $status
