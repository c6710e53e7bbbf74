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
grep -q "^machine: $(nproc) cores" "$dir/v/machine.txt" || fail "no machine.txt beside the real half"

# the virtual half alone against that real half (REAL_FROM: a real half
# made on another machine), with the cores it names: the same table
echo "machine: 8 cores, elsewhere" >"$dir/v/machine.txt"
rc=0
REAL_FROM="$dir/v" WORKERS=1,2 SCHEMES=downpour BUDGET=1280 MBIT=1000 OUT="$dir/again" timeout -k 5 "$(scaled 120)" \
  bench/scale_validate.sh "$BUILD" -o 'layer fc1.num_output=32' -o 'layer fc2.num_output=32' -o job.test_steps=5 \
  >"$dir/out2" 2>"$dir/err2" || rc=$?
cat "$dir/out2"
[ "$rc" = 0 ] || { tail -20 "$dir/err2"; fail "REAL_FROM: bench/scale_validate.sh exited with $rc"; }
[ ! -e "$dir/again/real.log" ] || fail "REAL_FROM ran the real half again"
grep -q '^the real half: .*machine: 8 cores, elsewhere' "$dir/out2" || fail "REAL_FROM: the machine of the real half not named"
grep -q '^process_cores=4$' "$dir/again/virtual-w2/runs/downpour-w2-r1/job.conf" ||
  fail "REAL_FROM: the virtual processes did not get the real machine's cores (8 / 2 workers = 4)"
for w in 1 2; do
  real_then=$(awk -v w="$w" '$1 == "downpour" && $2 == w { print $3 }' "$dir/out")
  real_now=$(awk -v w="$w" '$1 == "downpour" && $2 == w { print $3 }' "$dir/out2")
  [ -n "$real_then" ] && [ "$real_then" = "$real_now" ] || fail "REAL_FROM: the real column changed at $w workers"
done
# the calibration per size follows that machine too: on 1 core, 2
# workers step one at a time (K = 1)
echo "machine: 1 cores, elsewhere" >"$dir/v/machine.txt"
REAL_FROM="$dir/v" WORKERS=1,2 SCHEMES=downpour BUDGET=1280 MBIT=1000 OUT="$dir/one" timeout -k 5 "$(scaled 120)" \
  bench/scale_validate.sh "$BUILD" -o 'layer fc1.num_output=32' -o 'layer fc2.num_output=32' -o job.test_steps=5 \
  >"$dir/out4" 2>&1 || { tail -20 "$dir/out4"; fail "REAL_FROM on 1 core failed"; }
grep -q '^calibration=.*/mlp-k1\.cal$' "$dir/one/virtual-w2/runs/downpour-w2-r1/job.conf" ||
  fail "REAL_FROM: 2 workers on the real half's 1 core were not predicted with its 1-at-a-time calibration"
rc=0
REAL_FROM="$dir" OUT="$dir/none" bench/scale_validate.sh "$BUILD" >"$dir/out3" 2>&1 || rc=$?
[ "$rc" != 0 ] && grep -q 'REAL_FROM: no real/results.csv' "$dir/out3" || fail "REAL_FROM without a real half was not refused"
echo "validate_harness: ok"
