#!/usr/bin/env bash
# AllReduce end to end: one group of 2 workers, a process each, with a server
# beside each worker that owns half the slices; synchronous over Thrift
# on loopback; the MLP subset reaches the bar.
# Usage: topology_allreduce.sh BUILD
set -euo pipefail
BUILD=$(cd "${1:-build}" && pwd)
cd "$(dirname "$0")/../.."
source test/e2e/lib/topology.sh
run_topology allreduce 0.80 1 2
