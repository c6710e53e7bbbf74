#!/usr/bin/env bash
# bench/scale_validate.sh end to end on a tiny MLP (32-32): calibrations
# per worker count (--concurrent), the real sweep of Downpour at 1 and 2
# workers over 1000 Mbit/s links, the virtual one, and the table of
# predicted against real throughput.  Its ratio is printed, not checked:
# the 15 % bar is bench/'s (docs/SCALE.md, Validation), no timing is
# asserted here.  Usage: validate_harness.sh BUILD
set -euo pipefail
BUILD=$(cd "${1:-build}" && pwd)
cd "$(dirname "$0")/../.."
source test/e2e/lib/time_scale.sh "$BUILD"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

rc=0
WORKERS=1,2 SCHEMES=downpour BUDGET=1280 MBIT=1000 CAL_SECONDS=0.2 OUT="$dir/v" timeout -k 5 "$(scaled 240)" \
  bench/scale_validate.sh "$BUILD" -o 'layer fc1.num_output=32' -o 'layer fc2.num_output=32' -o job.test_steps=5 \
  >"$dir/out" 2>"$dir/err" || rc=$?
cat "$dir/out"
[ "$rc" = 0 ] || { tail -20 "$dir/err"; fail "bench/scale_validate.sh exited with $rc"; }
for k in 1 2; do
  grep -q "^concurrent=$k$" "$dir/v/mlp-k$k.cal" || fail "no calibration with $k workers stepping at once"
done
for w in 1 2; do
  grep -qE "^downpour +$w +[0-9]+ +[0-9]+ +[0-9]+\.[0-9]{3} " "$dir/out" || fail "no table row for downpour at $w workers"
done
grep -qE '^worst \|predicted / real - 1\|: [0-9.]+ % \(bar: 15 %\): (within|OUTSIDE)$' "$dir/out" || fail "no worst-error line"
echo "validate_harness: ok"
