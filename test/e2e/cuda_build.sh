#!/usr/bin/env bash
# The GPU build stays buildable on machines without a GPU: where the CUDA
# toolkit is installed (/usr/local/cuda/bin/nvcc), builds everything with
# `make CUDA=1 BUILD=build-cuda build-only` (its own directory: build/ is
# not touched) and runs build-cuda/test/test_gpu, which compares the GPU
# layers with the CPU ones where there is a CUDA device and otherwise
# skips them, saying "no CUDA device".  Without nvcc it prints SKIP.
# Usage: cuda_build.sh [BUILD]  (BUILD, the tested build, is not used)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
cuda_home=${CUDA_HOME:-/usr/local/cuda}

if [ ! -x "$cuda_home/bin/nvcc" ]; then
  echo "SKIP: no CUDA toolkit ($cuda_home/bin/nvcc not found)"
  exit 0
fi
if [ -n "${SHOAL_SANITIZE:-}" ]; then
  echo "SKIP: sanitizer run ($SHOAL_SANITIZE); the CUDA build is checked by the plain make test"
  exit 0
fi

mkdir -p build-cuda
start=$(date +%s)
# one build at a time in build-cuda (several make test runs may share the tree);
# the outer make's flags and variables (MAKEFLAGS) are not this build's
flock build-cuda/.lock env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make --no-print-directory -j2 CUDA=1 CUDA_HOME="$cuda_home" BUILD=build-cuda build-only \
  >build-cuda/build.log 2>&1 || {
  tail -30 build-cuda/build.log
  echo "make CUDA=1 BUILD=build-cuda build-only failed (log: build-cuda/build.log)"
  exit 1
}
echo "make CUDA=1 BUILD=build-cuda build-only: ok in $(( $(date +%s) - start )) s"

# the GPU objects keep the layering too (src/gpu registers itself; nothing
# below it names CUDA)
scripts/check-layers.sh build-cuda

# the CUDA libraries are linked, not merely declared
for lib in libcudart libcublas libcudnn; do
  ldd build-cuda/test/test_gpu | grep -q "$lib" || { echo "test_gpu does not link $lib"; exit 1; }
done

log=build-cuda/test_gpu.log
rc=0
timeout 120 build-cuda/test/test_gpu >"$log" 2>&1 || rc=$?
grep -E '^(ok|not ok)|SKIP|no CUDA device|cuda:' "$log" | head -40
[ "$rc" -eq 0 ] || { echo "test_gpu failed (exit $rc, log: $log)"; exit 1; }
! grep -q '^not ok' "$log" || { echo "test_gpu has failures"; exit 1; }
if grep -q 'SKIP no CUDA device' "$log"; then
  echo "test_gpu: GPU comparisons skipped (no CUDA device here)"
else
  echo "test_gpu: GPU comparisons ran"
fi
