#!/bin/bash
# Prepares, on a Debian 12 machine with network, what benchmarks/gpu_check.sh needs on a bare
# GPU machine beyond CUDA, cuBLAS, NCCL (the nvidia-nccl-cu13 wheel), CMake, a C compiler and
# Python: the Debian 12 packages of Jansson and SQLite (runtime + headers, about 1.5 MiB),
# downloaded with apt-get into .gpu-deps/ (git-ignored; it travels with the working tree).
# gpu_check.sh unpacks them into build-gpu/deps/ there, never into /. Debian 12's libraries
# run on newer glibc (Ubuntu 22.04/24.04). usage: benchmarks/gpu_deps.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PACKAGES=(libjansson4 libjansson-dev libsqlite3-0 libsqlite3-dev)
dir=.gpu-deps
mkdir -p "$dir"
rm -f "$dir"/*.deb
(cd "$dir" && apt-get download "${PACKAGES[@]}")
# plain file names: '+' (in Debian security versions) becomes '_'
for f in "$dir"/*+*.deb; do [ -e "$f" ] && mv "$f" "${f//+/_}"; done
(cd "$dir" && sha256sum ./*.deb > SHA256SUMS)
echo "gpu_deps: $(ls "$dir"/*.deb | wc -l) packages in $dir ($(du -sh "$dir" | cut -f1)):"
ls -1 "$dir"/*.deb | sed 's|^|  |'
