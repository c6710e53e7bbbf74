#!/usr/bin/env bash
# make check-layers inside make test: every include and every call in
# src/ points down the layers (scripts/check-layers.sh), checked on the
# objects of the build under test.  Also checks that the checker itself
# catches an upward include and an upward call, so it cannot pass by
# checking nothing.
# Usage: check_layers.sh BUILD
set -euo pipefail
build=${1:-build}
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
scripts/check-layers.sh "$build"

# the checker must fail on a planted upward include and call
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/src/core" "$tmp/src/worker" "$tmp/scripts" "$tmp/build/obj/src/core" "$tmp/build/obj/src/worker"
cp scripts/check-layers.sh "$tmp/scripts/"
printf '#include "worker/up.h"\nint shoal_core_down (void);\nint shoal_core_down (void) { extern int shoal_worker_up (void); return shoal_worker_up (); }\n' \
  >"$tmp/src/core/down.c"
printf 'int shoal_worker_up (void);\nint shoal_worker_up (void) { return 1; }\n' >"$tmp/src/worker/up.c"
: >"$tmp/src/worker/up.h"
cc -c -o "$tmp/build/obj/src/core/down.o" -x c - <<<'int shoal_core_down (void); int shoal_worker_up (void); int shoal_core_down (void) { return shoal_worker_up (); }'
cc -c -o "$tmp/build/obj/src/worker/up.o" "$tmp/src/worker/up.c"
out=$(cd "$tmp" && scripts/check-layers.sh build 2>&1) && { echo "$out"; echo "check-layers passed a planted upward include"; exit 1; }
echo "$out"
grep -q 'src/core/down.c:1: includes "worker/up.h": core may not include worker' <<<"$out"
grep -q 'core/down.o: uses shoal_worker_up from worker: core may not call into worker' <<<"$out"
echo "check-layers: planted violations caught"
