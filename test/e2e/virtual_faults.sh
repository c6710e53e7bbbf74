#!/usr/bin/env bash
# The virtual clock under the faults a user can ask for (issue 23, item 6):
#  1. a heavy tail: slow_delay = pareto(1, 0.01) draws 1e30 ms; the run
#     ends (each draw is bounded by an hour) instead of spinning forever;
#  2. SIGINT to an SSP run stops it within 5 s, exit 130, and the message
#     does not offer --resume (a virtual run keeps no checkpoint);
#  3. group 0 lost (fault_group = 0) under Hogwild's elastic sync: the
#     final accuracy printed, and the one shoal compare reports, are the
#     survivor's, not group 0's last test.
# Usage: virtual_faults.sh BUILD
set -euo pipefail
BUILD=$(cd "${1:-build}" && pwd)
cd "$(dirname "$0")/../.."
source test/e2e/lib/time_scale.sh "$BUILD"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

SMALL=(examples/fashion-mnist/mlp.conf -o job.epochs=0 -o job.test_steps=10 -o job.disp_freq=10
       -o 'layer fc1.num_output=32' -o 'layer fc2.num_output=32' -o job.threads=1 -o emulate.clock=virtual
       -o emulate.step_ms=8)

# 1. pareto(1, 0.01)
rc=0
timeout -k 5 "$(scaled 60)" "$BUILD/shoal" run "${SMALL[@]}" --topology conf/downpour.conf -o job.train_steps=20 \
  -o job.test_freq=0 -o emulate.slow_groups=1 -o 'emulate.slow_delay=pareto(1, 0.01)' \
  --workspace "$dir/pareto" >"$dir/pareto.out" 2>&1 || rc=$?
[ "$rc" = 0 ] || { tail -5 "$dir/pareto.out"; fail "pareto(1, 0.01): exit $rc (124: it spun)"; }
/usr/bin/python3 - "$dir/pareto/metrics.jsonl" <<'PY' || fail "pareto's virtual times"
import json, sys
train = [json.loads(l) for l in open(sys.argv[1])]
train = [r for r in train if r["phase"] == "train"]
end = {g: max(r["vtime"] for r in train if r["group"] == g) for g in (0, 1)}
# group 1: about an hour per step (the bound), group 0 not slowed
assert 20 * 3600 * 0.9 <= end[1] <= 20 * 3600 * 1.1 and end[0] < 60, end
print("pareto(1, 0.01): group 1 ends at %.0f virtual s, group 0 at %.3f" % (end[1], end[0]))
PY
echo "1. heavy tail: ok"

# 2. SIGINT to a long SSP run
"$BUILD/shoal" run "${SMALL[@]}" --topology conf/ssp.conf -o job.train_steps=1000000 -o job.test_freq=0 \
  -o emulate.slow_groups=1 -o emulate.slow_factor=3 --workspace "$dir/ssp" >"$dir/ssp.out" 2>&1 &
pid=$!
for _ in $(seq "$(scaled 100)"); do
  grep -q "step 20 loss" "$dir/ssp.out" 2>/dev/null && break
  sleep 0.1
done
kill -INT "$pid"
rc=0
for _ in $(seq "$(scaled 50)"); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$pid" 2>/dev/null; then
  kill -KILL "$pid"
  fail "SSP on the virtual clock still running 5 s after SIGINT"
fi
wait "$pid" || rc=$?
[ "$rc" = 130 ] || { tail -5 "$dir/ssp.out"; fail "SSP stopped: exit $rc, not 130"; }
grep -q -- "--resume" "$dir/ssp.out" && fail "a virtual run's stop offers --resume"
grep -q "keeps no checkpoint: run it again, it repeats exactly" "$dir/ssp.out" \
  || { tail -3 "$dir/ssp.out"; fail "no word on how to go on"; }
echo "2. SIGINT: ok"

# 3. group 0 lost under the elastic sync
LOST=(--topology conf/elastic.conf -o job.train_steps=300 -o job.test_freq=100 -o emulate.fault_group=0
      -o emulate.fault_at=0.6 -o cluster.all_groups_required=false)
timeout -k 5 "$(scaled 120)" "$BUILD/shoal" run "${SMALL[@]}" "${LOST[@]}" --workspace "$dir/lost" >"$dir/lost.out" 2>&1 \
  || { tail -5 "$dir/lost.out"; fail "elastic without group 0"; }
printed=$(sed -n 's/^final test accuracy: \([0-9.]*\) (group 1; group 0 was lost)$/\1/p' "$dir/lost.out")
[ -n "$printed" ] || { tail -3 "$dir/lost.out"; fail "the final accuracy is not named as group 1's"; }
survivor_of() {  # METRICS: group 1's last test accuracy, once group 0 stopped short
  /usr/bin/python3 - "$1" <<'PY'
import json, sys
test = [json.loads(l) for l in open(sys.argv[1])]
test = [r for r in test if r["phase"] == "test"]
g0 = max((r["step"] for r in test if r["group"] == 0), default=0)
g1 = [r for r in test if r["group"] == 1]
assert g1[-1]["step"] > g0, (g0, g1[-1]["step"])
print("%.4f" % g1[-1]["accuracy"])
PY
}
survivor=$(survivor_of "$dir/lost/metrics.jsonl")
[ "$printed" = "$survivor" ] || fail "printed $printed, group 1's last test is $survivor"
cat >"$dir/lost.emulate" <<EOF
[emulate]
clock = virtual
step_ms = 8
fault_group = 0
fault_at = 0.3
EOF
timeout -k 5 "$(scaled 180)" "$BUILD/shoal" compare "${SMALL[0]}" --schemes elastic --out "$dir/cmp" --quiet \
  --emulate "$dir/lost.emulate" -o job.train_steps=300 -o job.test_freq=100 -o job.test_steps=10 \
  -o 'layer fc1.num_output=32' -o 'layer fc2.num_output=32' -o job.threads=1 -o cluster.all_groups_required=false \
  >"$dir/cmp.out" 2>&1 || { tail -5 "$dir/cmp.out"; fail "compare with group 0 lost"; }
survivor=$(survivor_of "$dir/cmp/runs/elastic-r1/metrics.jsonl")
grep -q "final test accuracy $survivor" "$dir/cmp.out" || { cat "$dir/cmp.out"; fail "compare reports another accuracy than group 1's $survivor"; }
echo "3. group 0 lost: final accuracy $printed (run), $survivor (compare), group 1's: ok"
echo "virtual_faults: ok"
