#!/usr/bin/env bash
# Distributed Hogwild end to end: 2 worker groups, each with its own server
# group in its process, exchange deltas with the slices' master groups
# every sync_freq updates; both groups reach the bar and metrics.jsonl has
# a stream per group.
# Usage: topology_hogwild.sh BUILD
set -euo pipefail
BUILD=$(cd "${1:-build}" && pwd)
cd "$(dirname "$0")/../.."
source test/e2e/lib/topology.sh
run_topology hogwild 0.80 2 2
