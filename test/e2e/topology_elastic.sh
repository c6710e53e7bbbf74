#!/usr/bin/env bash
# Hogwild with elastic averaging (EASGD) end to end: 2 worker groups, each
# with its own server group in its process; every sync_freq updates a
# group's replica and the slice master's center move toward each other
# (conf/elastic.conf, alpha 0.5).  Both groups reach the bar and
# metrics.jsonl has a stream per group.
# Usage: topology_elastic.sh BUILD
set -euo pipefail
BUILD=$(cd "${1:-build}" && pwd)
cd "$(dirname "$0")/../.."
source test/e2e/lib/topology.sh
run_topology elastic 0.80 2 2
grep -q "^hogwild_sync *= *elastic" "$TOPOLOGY_DIR/ws/job.conf" || fail "job.conf does not say elastic"
