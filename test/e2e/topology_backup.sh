#!/usr/bin/env bash
# Sandblaster with backup workers end to end (conf/backup.conf: 4 workers
# in 2 processes, b = 1): trains to the bar; each step is applied with
# the first 3 gradients, so the servers drop late ones and count them,
# and no worker ever waits out a step that is gone (the run ends).
# Usage: topology_backup.sh BUILD
set -euo pipefail
BUILD=$(cd "${1:-build}" && pwd)
cd "$(dirname "$0")/../.."
source test/e2e/lib/topology.sh
run_topology backup 0.80 1 3
/usr/bin/python3 - "$TOPOLOGY_DIR/ws/metrics.jsonl" <<'PY' || fail "dropped gradients"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
proc = [r for r in lines if r["phase"] == "process" and "updates" in r]
assert proc, "no server process line"
updates = sum(r["updates"] for r in proc)
dropped = sum(r["dropped"] for r in proc)
# every slice applied 600 steps; the 4th gradient of a step comes late
# unless it ties, so drops are counted and at most one per update
assert updates % 600 == 0 and updates >= 600, updates
assert 0 < dropped <= updates, (dropped, updates)
workers = {r["worker"] for r in lines if r["phase"] == "train"}
assert workers == {0, 1, 2, 3}, workers
print("backup: %d updates, %d late gradients dropped" % (updates, dropped))
PY
