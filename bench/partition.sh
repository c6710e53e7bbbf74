#!/bin/bash
# Partitioned worker group in one process: samples/s of the hybrid LeNet
# and of its feature-split dense layers with k = 1 and k = 2 workers, and
# the connection layers' share of step time (bench/partition.c says what
# is measured).  Needs build/libshoal.a (make).  About 30 s with the defaults.
#   bench/partition.sh [BUILD_DIR] [STEPS] [TRIALS]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
STEPS=${2:-40}
PKGS="glib-2.0 gthread-2.0 gobject-2.0 thrift_c_glib lmdb openblas zlib openssl"
[ -f "$BUILD/libshoal.a" ] || { echo "bench/partition.sh: $BUILD/libshoal.a missing; run make" >&2; exit 1; }
mkdir -p "$BUILD/bench"
# shellcheck disable=SC2046
cc -std=c11 -O2 -D_GNU_SOURCE -Iinclude -Isrc -I"$BUILD/gen" $(pkg-config --cflags $PKGS) \
  bench/partition.c -o "$BUILD/bench/partition" "$BUILD/libshoal.a" $(pkg-config --libs $PKGS) -lm -lpthread
echo "load: $(cut -d' ' -f1-3 /proc/loadavg) (other processes share these cores)"
"$BUILD/bench/partition" "$STEPS" "${3:-5}"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
