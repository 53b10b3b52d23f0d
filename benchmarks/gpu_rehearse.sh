#!/bin/bash
# Rehearses benchmarks/gpu_check.sh as a bare GPU machine would run it, on this Debian 12
# machine (no GPU needed): a clean Debian 12 chroot with the toolchain, CMake and Python but no
# development packages, the nvidia-nccl-cu13 wheel installed, /usr/local/cuda bind-mounted
# read-only, and a clone of this repository's HEAD plus .gpu-deps/ (nothing else). Without a
# GPU the build must pass and every GPU step say NO GPU: exit 77 is the expected outcome.
#
# usage: benchmarks/gpu_rehearse.sh [CHROOT_DIR] [OUT_DIR]
#   CHROOT_DIR  default build-rehearse/bookworm; made with debootstrap when missing
#   OUT_DIR     default build-rehearse/out: gpu_check.sh's files
# Needs root, network (debootstrap, pip download), and .gpu-deps/ (benchmarks/gpu_deps.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
base=${1:-$root/build-rehearse/bookworm}
out=${2:-$root/build-rehearse/out}
[ "$(id -u)" = 0 ] || { echo "gpu_rehearse: needs root (chroot, mount)" >&2; exit 2; }
[ -d /usr/local/cuda ] || { echo "gpu_rehearse: /usr/local/cuda not found" >&2; exit 2; }
[ -f .gpu-deps/SHA256SUMS ] || benchmarks/gpu_deps.sh
if [ ! -x "$base/usr/bin/cmake" ]; then
  command -v debootstrap >/dev/null || apt-get install -y -q debootstrap
  debootstrap --variant=minbase \
    --include=ca-certificates,cmake,make,gcc,g++,libc6-dev,python3,python3-pip,git,procps \
    bookworm "$base"
fi
# the wheel, installed the way pip installs it on the GPU machine (site-packages/nvidia/nccl)
whl=$root/build-rehearse/wheels
mkdir -p "$whl" "$out"
ls "$whl"/nvidia_nccl_cu13-*.whl >/dev/null 2>&1 ||
  python3 -m pip download -q --no-deps --only-binary=:all: -d "$whl" nvidia-nccl-cu13
cp "$whl"/nvidia_nccl_cu13-*.whl "$base/tmp/"
chroot "$base" sh -c 'python3 -m pip install -q --no-deps --no-index --break-system-packages /tmp/nvidia_nccl_cu13-*.whl'
dev=$(chroot "$base" dpkg-query -W -f '${Package}\n' | grep -E -- '-dev$' | tr '\n' ' ')
echo "gpu_rehearse: -dev packages in the chroot (toolchain only): $dev"

# the working tree as it travels: a clone of HEAD and the carried packages
rm -rf "$base/work/podplan"
mkdir -p "$base/work"
git clone -q "$root" "$base/work/podplan"
git -C "$base/work/podplan" checkout -q "$(git rev-parse HEAD)"
cp -r .gpu-deps "$base/work/podplan/"
mkdir -p "$base/usr/local/cuda" "$base/proc" "$base/dev" "$base/out"
mounts=()
cleanup() {
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do umount "${mounts[i]}" 2>/dev/null || true; done
}
trap cleanup EXIT
mount --bind /usr/local/cuda "$base/usr/local/cuda" && mounts+=("$base/usr/local/cuda")
mount -o remount,bind,ro "$base/usr/local/cuda"
mount -t proc proc "$base/proc" && mounts+=("$base/proc")
mount --bind /dev "$base/dev" && mounts+=("$base/dev")
mount --bind "$out" "$base/out" && mounts+=("$base/out")
set +e
chroot "$base" env -i PATH=/usr/local/cuda/bin:/usr/local/bin:/usr/bin:/bin HOME=/root OUT=/out \
  bash -c 'cd /work/podplan && bash benchmarks/gpu_check.sh'
rc=$?
set -e
echo "gpu_rehearse: gpu_check.sh exited $rc (77: no GPU, everything else passed); files in $out"
exit $rc
