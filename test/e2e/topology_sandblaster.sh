#!/usr/bin/env bash
# Sandblaster end to end: 2 workers of one group in one process, 2 servers
# in another, synchronous (BSP) over Thrift on loopback; the MLP subset
# reaches the bar and metrics.jsonl has the group's stream.
# Usage: topology_sandblaster.sh BUILD
set -euo pipefail
BUILD=$(cd "${1:-build}" && pwd)
cd "$(dirname "$0")/../.."
source test/e2e/lib/topology.sh
run_topology sandblaster 0.80 1 2
