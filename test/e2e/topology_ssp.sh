#!/usr/bin/env bash
# SSP end to end (conf/ssp.conf, staleness = 2): 2 worker groups against
# one server group train to the bar, and the staleness the servers
# recorded stays within the bound: while a group computes one step on
# values that hold the other group's pushes up to s steps behind it, the
# other may run on to s steps ahead of it, so with 2 groups a gradient
# meets at most 2s + 1 = 5 of the other's pushes (docs/SCHEMES.md).
# Usage: topology_ssp.sh BUILD
set -euo pipefail
BUILD=$(cd "${1:-build}" && pwd)
cd "$(dirname "$0")/../.."
source test/e2e/lib/topology.sh
run_topology ssp 0.80 2 3
/usr/bin/python3 - "$TOPOLOGY_DIR/ws/metrics.jsonl" <<'PY' || fail "staleness"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
proc = [r for r in lines if r["phase"] == "process" and "staleness_count" in r]
assert proc, "no process line with staleness"
count = sum(r["staleness_count"] for r in proc)
worst = max(r["staleness_max"] for r in proc)
hist = [0] * 64
for r in proc:
    for i, n in enumerate(r["staleness_hist"]):
        hist[i] += n
assert sum(hist) == count, (sum(hist), count)
# 600 steps x 2 groups x every slice: every update recorded
updates = sum(r["updates"] for r in proc)
assert count == updates and count >= 1200, (count, updates)
assert worst <= 5, "SSP with staleness 2 let an update be %d versions stale" % worst
print("ssp: %d updates, max staleness %d, histogram %s" % (count, worst, hist[:worst + 1]))
PY
