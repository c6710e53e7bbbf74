#!/usr/bin/env bash
# Emulation on the real clock, through `shoal run` and its processes:
#  1. a slowed group and limited links: the run says what it emulates and
#     trains to the end (how much slower it is, is not asserted: timing);
#  2. a scheduled fault: group 1's process dies as kill -9 would at 1 s
#     into the job; Downpour with all_groups_required = false finishes
#     without it, and the launcher reports the kill.
# Usage: emulate_real.sh BUILD
set -euo pipefail
BUILD=$(cd "${1:-build}" && pwd)
cd "$(dirname "$0")/../.."
source test/e2e/lib/time_scale.sh "$BUILD"
source test/e2e/lib/topology.sh
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

SMALL=(--topology conf/downpour.conf -o job.epochs=0 -o job.test_freq=0 -o job.test_steps=10 -o job.disp_freq=20
       -o 'layer fc1.num_output=64' -o 'layer fc2.num_output=64')
rc=0
timeout -k 10 "$(scaled 120)" "$BUILD/shoal" run examples/fashion-mnist/mlp.conf "${SMALL[@]}" -o job.train_steps=80 \
  -o emulate.slow_groups=1 -o emulate.slow_factor=3 -o emulate.slow_extra_ms=2 -o emulate.bandwidth_mbit=400 \
  -o emulate.latency_ms=1 --workspace "$dir/slow" >"$dir/slow.out" 2>"$dir/slow.err" || rc=$?
[ "$rc" -eq 0 ] || { tail "$dir/slow.err"; fail "slowed run: exit $rc"; }
grep -q "\[group 1 worker 0\] \[emulate\] slowed: 3x its compute time + 2 ms per step (2 slowed workers)" "$dir/slow.err" \
  || fail "no slowdown line"
grep -q "\[emulate\] every link between processes: 400 Mbit/s, 1 ms latency" "$dir/slow.err" || fail "no link line"
grep -q "^final test accuracy: " "$dir/slow.out" || fail "no final accuracy"
for g in 0 1; do
  grep -q "\"step\":80,\"group\":$g,\"worker\":0,\"phase\":\"train\"" "$dir/slow/metrics.jsonl" || fail "group $g did not end"
done
echo "1. slowed group and links: ok"

rc=0
start=$SECONDS
timeout -k 10 "$(scaled 150)" "$BUILD/shoal" run examples/fashion-mnist/mlp.conf "${SMALL[@]}" -o job.train_steps=100000 \
  -o job.max_seconds=4 -o emulate.fault_group=1 -o emulate.fault_at=1 -o cluster.all_groups_required=false \
  --workspace "$dir/fault" >"$dir/fault.out" 2>"$dir/fault.err" || rc=$?
cat "$dir/fault.out"
[ "$rc" -eq 0 ] || { tail "$dir/fault.err"; fail "Downpour without group 1: exit $rc"; }
grep -q "rank 1 (group 1): \[emulate\] fault: this process dies now" "$dir/fault.err" || fail "no fault line"
grep -qF "shoal run: rank 1 (2 workers of group 1): killed by signal 9 (Killed): the group is lost; the others go on" \
  "$dir/fault.out" "$dir/fault.err" || fail "the launcher did not report the kill"
grep -q "^1 worker group lost (group 1); the job finished without it$" "$dir/fault.out" || fail "no summary"
if pgrep -f -- "$dir/fault" >/dev/null; then fail "processes left behind"; fi
echo "2. fault: ok ($((SECONDS - start)) s)"
