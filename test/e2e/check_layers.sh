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

# docs/ARCHITECTURE.md's diagram is the checker's lists, as --diagram prints them
doc=$(sed -n '/^<!-- check-layers --diagram -->$/,/^<!-- end check-layers --diagram -->$/p' docs/ARCHITECTURE.md \
      | sed '1,2d;$d' | sed '$d')
if [ "$doc" != "$(scripts/check-layers.sh --diagram)" ]; then
  echo "docs/ARCHITECTURE.md's layer diagram differs from scripts/check-layers.sh --diagram:"
  diff <(echo "$doc") <(scripts/check-layers.sh --diagram)
  exit 1
fi

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

# a downward edge that the lists do not allow: layers calling rpc
rm -f "$tmp/src/core/down.c" "$tmp/build/obj/src/core/down.o"
mkdir -p "$tmp/src/layers" "$tmp/src/rpc" "$tmp/build/obj/src/layers" "$tmp/build/obj/src/rpc"
printf '#include "rpc/wire.h"\n' >"$tmp/src/layers/wired.c"
: >"$tmp/src/rpc/wire.h"
printf 'int shoal_rpc_send (void);\nint shoal_rpc_send (void) { return 1; }\n' >"$tmp/src/rpc/send.c"
cc -c -o "$tmp/build/obj/src/rpc/send.o" "$tmp/src/rpc/send.c"
cc -c -o "$tmp/build/obj/src/layers/wired.o" -x c - <<<'int shoal_rpc_send (void); int shoal_layer_wired (void); int shoal_layer_wired (void) { return shoal_rpc_send (); }'
out=$(cd "$tmp" && scripts/check-layers.sh build 2>&1) && { echo "$out"; echo "check-layers passed layers calling rpc"; exit 1; }
echo "$out"
grep -q 'src/layers/wired.c:1: includes "rpc/wire.h": layers may not include rpc' <<<"$out"
grep -q 'layers/wired.o: uses shoal_rpc_send from rpc: layers may not call into rpc' <<<"$out"
echo "check-layers: planted violations caught"
