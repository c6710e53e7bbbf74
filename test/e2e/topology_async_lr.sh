#!/usr/bin/env bash
# async_lr end to end: Downpour with lr / staleness (conf/stale-lr.conf,
# Zhang et al. 2016) and with the full lr per update (conf/downpour-dean.conf,
# Dean et al. 2012) both train to the bar; the staleness the lr was
# divided by is in metrics.jsonl.
# Usage: topology_async_lr.sh BUILD
set -euo pipefail
BUILD=$(cd "${1:-build}" && pwd)
cd "$(dirname "$0")/../.."
source test/e2e/lib/topology.sh
for scheme in stale-lr downpour-dean; do
  run_topology "$scheme" 0.80 2 3
  grep -q '^async_lr' "$TOPOLOGY_DIR/ws/job.conf" || fail "job.conf lacks async_lr"
  /usr/bin/python3 - "$TOPOLOGY_DIR/ws/metrics.jsonl" <<'PY' || fail "staleness of $scheme"
import json, sys
proc = [json.loads(l) for l in open(sys.argv[1])]
proc = [r for r in proc if r["phase"] == "process" and "staleness_count" in r]
count = sum(r["staleness_count"] for r in proc)
assert count >= 1200, count
print("%d updates, mean staleness %.2f" % (count, sum(r["staleness_mean"] * r["staleness_count"] for r in proc) / count))
PY
  rm -rf "$TOPOLOGY_DIR"
done
