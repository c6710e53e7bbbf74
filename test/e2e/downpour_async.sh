#!/usr/bin/env bash
# Asynchrony is real: under Downpour, a worker group slowed down by an
# injected delay (200 ms per step) does not hold the other group back.
# Group 0 must finish all its steps while group 1 is still early in its
# run; under a synchronous scheme group 0 would wait for group 1 every step.
set -euo pipefail
build=${1:-build}
source test/e2e/lib/time_scale.sh "$build"
ws=$(mktemp -d)
trap 'rm -rf "$ws"' EXIT

SHOAL_INJECT_STEP_DELAY=1:200 timeout "$(scaled 240)" "$build/shoal" run examples/fashion-mnist/mlp.conf \
  --topology conf/downpour.conf -o job.epochs=0 -o job.train_steps=40 -o job.test_freq=0 \
  -o job.test_steps=5 -o job.disp_freq=5 -o 'layer fc1.num_output=128' -o 'layer fc2.num_output=128' \
  --workspace "$ws" >"$ws/out" 2>&1 || { cat "$ws/out"; exit 1; }

/usr/bin/python3 - "$ws/metrics.jsonl" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
train = [r for r in lines if r["phase"] == "train"]
def time_of(group, step):
    return min(r["time"] for r in train if r["group"] == group and r["step"] >= step)
# every process measures time from the launcher's start (SHOAL_JOB_START_US)
g0_done = time_of(0, 40)
g1_at_done = max([r["step"] for r in train if r["group"] == 1 and r["time"] <= g0_done] or [0])
print(f"group 0 finished 40 steps at {g0_done:.2f} s; group 1 was at step {g1_at_done}")
assert g1_at_done <= 20, "group 0 waited for the slow group"
assert max(r["step"] for r in train if r["group"] == 1) == 40, "group 1 did not finish"
PY
