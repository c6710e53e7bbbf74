#!/usr/bin/env bash
# End to end: the Fashion-MNIST MLP example trains through `shoal run` on a
# subset (400 steps, 3,200 test images) to an accuracy bar, and leaves
# metrics.jsonl and job.conf in its workspace.
set -euo pipefail
build=${1:-build}
ws=$(mktemp -d)
trap 'rm -rf "$ws"' EXIT

"$build/shoal" run examples/fashion-mnist/mlp.conf -o job.epochs=0 -o job.train_steps=400 \
  -o job.test_freq=200 -o job.test_steps=50 -o job.disp_freq=100 --workspace "$ws" | tee "$ws/out"

acc=$(sed -n 's/^final test accuracy: //p' "$ws/out")
echo "accuracy $acc"
awk -v a="$acc" 'BEGIN { exit !(a >= 0.80) }' || { echo "accuracy $acc below the bar 0.80"; exit 1; }

# metrics: 4 train lines, 2 test lines, each with the documented fields
test "$(grep -c '"phase":"train"' "$ws/metrics.jsonl")" -eq 4
test "$(grep -c '"phase":"test"' "$ws/metrics.jsonl")" -eq 2
/usr/bin/python3 - "$ws/metrics.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r["phase"] == "process":
        # the process's traffic and its server's updates (README, Metrics)
        for k in ("time", "rank", "bytes_sent", "bytes_received", "updates", "staleness_hist"):
            assert k in r, (k, r)
        assert r["staleness_max"] == 0, r   # one synchronous worker
        continue
    for k in ("time", "step", "group", "worker", "phase", "loss", "accuracy", "samples", "compute_s" if r["phase"] == "train" else "samples"):
        assert k in r, (k, r)
    if r["phase"] == "train":
        assert r["samples_per_sec"] > 0, r
PY
grep -q '^train_steps=400' "$ws/job.conf"
