#!/usr/bin/env bash
# Downpour end to end: 2 worker groups (2 workers each, a process per group)
# train asynchronously against one server group in a third process; both
# groups reach the bar and metrics.jsonl has a stream per group.
# Usage: topology_downpour.sh BUILD
set -euo pipefail
BUILD=$(cd "${1:-build}" && pwd)
cd "$(dirname "$0")/../.."
source test/e2e/lib/topology.sh
run_topology downpour 0.80 2 3
