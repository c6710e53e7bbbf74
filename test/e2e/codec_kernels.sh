#!/usr/bin/env bash
# The GPU's wire codecs (src/gpu/kernels_codec.cu) against the host's
# (core/codec.c) without a GPU: the kernels' source, its launches
# rewritten for lib/cuda_emulation.h (each thread block run on the host,
# the blocks that meet at barriers as 256 threads at a std::barrier), is
# compiled with g++ and run on test_gpu's cases by lib/codec_kernels.cc:
# the same bytes and residuals, NaN's bits aside.  test_gpu
# /gpu/device-codecs checks the same on a device, where there is one.
# suite: plain
# Usage: codec_kernels.sh [BUILD]  (BUILD is not used: the sources are)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
if ! command -v g++ >/dev/null || ! echo '#include <barrier>' | g++ -std=c++20 -x c++ -fsyntax-only - 2>/dev/null; then
  echo "SKIP: no g++ with C++20's <barrier>"
  exit 77
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# kernel<<<blocks, threads, 0, s>>> (args);  ->  emu_launch (barriers, blocks, threads, s, [&] { kernel (args); });
launch='s/([A-Za-z_0-9]+(<[^<>]*>)?)<<<([^,]+), ([^,]+), 0, s>>> \((.*)\);/emu_launch (BARRIERS, \3, \4, s, [\&] { \1 (\5); });/'
sed -E "$launch" src/gpu/kernels_codec.cu | sed -E '/encode_quantised/s/BARRIERS/true/; s/BARRIERS/false/' >"$dir/kernels.cc"
if grep -q '<<<' "$dir/kernels.cc"; then
  echo "a kernel launch of src/gpu/kernels_codec.cu is not of the form this script rewrites:"
  grep -n '<<<' "$dir/kernels.cc"
  exit 1
fi
glib=$(pkg-config --cflags glib-2.0)
glib_libs=$(pkg-config --libs glib-2.0)
# shellcheck disable=SC2086
gcc -std=c11 -O2 -g -ftree-vectorize -fno-trapping-math $glib -Iinclude -Isrc -c src/core/codec.c -o "$dir/codec.o"
# shellcheck disable=SC2086
g++ -std=c++20 -O1 -g -Wall -Wextra -Werror $glib -Iinclude -Isrc -Itest -Itest/e2e/lib/cuda_shim \
  -include test/e2e/lib/cuda_emulation.h "$dir/kernels.cc" test/e2e/lib/codec_kernels.cc "$dir/codec.o" \
  -o "$dir/codec_kernels" $glib_libs -pthread
"$dir/codec_kernels"
