#!/usr/bin/env bash
# The comparison table of the search methods: GPT-3 39B and 175B (gbs 1536) and Llama-3 70B
# (gbs 512) on 256 and 1024 GPUs of dgx-a100, dgx-h100 and h100-nvl256, and 288 and 1152 GPUs
# (whole racks) of gb200-nvl72; every method (bench_search), 2 threads, global stopped at 300 s.
# usage: benchmarks/search_table.sh [BUILD_DIR]   (default build); prints bench_search's lines
set -euo pipefail
B=${1:-build}/benchmarks/bench_search
for model in gpt3-39b gpt3-175b llama3-70b; do
  case $model in llama3-70b) gbs=512 ;; *) gbs=1536 ;; esac
  for cg in dgx-a100:256 dgx-a100:1024 dgx-h100:256 dgx-h100:1024 h100-nvl256:256 \
            h100-nvl256:1024 gb200-nvl72:288 gb200-nvl72:1152; do
    cl=${cg%%:*} n=${cg##*:}
    echo "### $model $cl $n gbs $gbs"
    "$B" --model "$model" --cluster "$cl" --gpus "$n" --gbs "$gbs" --threads 2 --time-limit 300
  done
done
