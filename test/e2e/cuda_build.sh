#!/usr/bin/env bash
# The GPU build stays buildable on machines without a GPU: where the CUDA
# toolkit is installed (/usr/local/cuda/bin/nvcc), builds everything with
# `make CUDA=1 BUILD=build-cuda build-only` (its own directory: build/ is
# not touched) and runs build-cuda/test/test_gpu, which compares the GPU
# layers with the CPU ones where there is a CUDA device and otherwise
# skips them, saying "no CUDA device".  Without nvcc it is skipped (exit 77).
# Plain builds only: a sanitizer run leaves the CUDA build to the plain one.
# suite: plain
# Usage: cuda_build.sh [BUILD]  (BUILD, the tested build, is not used)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
cuda_home=${CUDA_HOME:-/usr/local/cuda}

if [ ! -x "$cuda_home/bin/nvcc" ]; then
  echo "SKIP: no CUDA toolkit ($cuda_home/bin/nvcc not found)"
  exit 77
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
# (ldd's output kept first: under pipefail, `ldd | grep -q` fails when grep
# stops reading before ldd has written everything)
deps=$(ldd build-cuda/test/test_gpu)
for lib in libcudart libcublas libcudnn; do
  grep -q "$lib" <<<"$deps" || { echo "test_gpu does not link $lib"; exit 1; }
done
# the shared library carries the GPU backend too (shoal and plugins use it)
dynamic=$(readelf -d build-cuda/libshoal.so)
grep -q 'NEEDED.*\[libcudart' <<<"$dynamic" || { echo "libshoal.so does not link libcudart"; exit 1; }
# (its registration runs from a constructor; the symbol is local to the
# library, which exports only the public ABI: e2e/abi)
symbols=$(nm --defined-only build-cuda/libshoal.so)
grep -qw shoal_gpu_register <<<"$symbols" || { echo "libshoal.so has no GPU backend (shoal_gpu_register)"; exit 1; }
if nm -D --defined-only build-cuda/libshoal.so | grep -qw shoal_gpu_register; then
  echo "libshoal.so exports shoal_gpu_register: the version script did not apply"; exit 1
fi

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
