#!/usr/bin/env bash
# 1,024 emulated workers of the Fashion-MNIST MLP in one process on the
# virtual clock (docs/SCALE.md, "Limits"): the memory test of make test
# (test/e2e/emulate_memory.sh, 256 units) at 1,024 units, with its bound
# (512 MiB + 7.5 MiB a unit: 8 GiB) and the peak's ratio to it printed.
#   bench/emulate_memory.sh [BUILD]     UNITS=N for another count
set -euo pipefail
BUILD=$(cd "${1:-build}" && pwd)
cd "$(dirname "$0")/.."
echo "units: ${UNITS:-1024}; machine: $(free -g | awk '/^Mem:/ {print $2 " GiB, " $7 " GiB available"}')"
UNITS=${UNITS:-1024} test/e2e/emulate_memory.sh "$BUILD"
