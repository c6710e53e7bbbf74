#!/usr/bin/env bash
# Memory of the virtual clock's units (emulate/unit_state.h): UNITS
# emulated Downpour workers of the full Fashion-MNIST MLP (1.86 M params,
# 7.11 MiB in fp32) in one process, one step each (enough: every unit's
# state, slices and data shard are made and moved), then the run's own
# reading of /proc/self/status ("[emulate] memory:" line).  The bound:
#  - peak resident (VmHWM) at most 512 MiB + UNITS x 7.5 MiB: one fp32
#    copy of the params in flight a unit plus its state; a unit that kept
#    a whole net took about 18 MiB anonymous (256 units: 4.6 GiB);
#  - the slices the units hold between their steps at most one copy of
#    the params each (7.11 MiB: they hold values or a gradient per slice,
#    never both, with n_push = n_fetch = 1).
# make test runs 256 units; bench/emulate_memory.sh 1,024 (UNITS=1024).
# Not under TSan: its shadow and metadata pages are resident memory the
# process counts as its own (256 units: 9.8 GiB peak against the 2.4 GiB
# bound); the virtual clock's threads meet under TSan in virtual_clock.sh
# and virtual_faults.sh.
# suite: plain address undefined
# Usage: emulate_memory.sh BUILD
set -euo pipefail
BUILD=$(cd "${1:-build}" && pwd)
cd "$(dirname "$0")/../.."
source test/e2e/lib/time_scale.sh "$BUILD"
UNITS=${UNITS:-256}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
[ -d "$BUILD/data/fashion-mnist/train" ] || { echo "SKIP: no $BUILD/data/fashion-mnist (make data)"; exit 77; }

timeout -k 5 "$(scaled 600)" "$BUILD/shoal" run examples/fashion-mnist/mlp.conf --topology conf/downpour.conf \
  -o "layer data.train=$BUILD/data/fashion-mnist/train" -o "layer data.test=$BUILD/data/fashion-mnist/test" \
  -o "cluster.nworker_groups=$UNITS" -o cluster.nworkers_per_group=1 -o cluster.nworkers_per_procs=1 \
  -o job.epochs=0 -o job.train_steps=1 -o job.test_freq=0 -o job.test_steps=1 -o job.test_groups=1 \
  -o job.checkpoint_freq=0 -o job.threads=1 -o emulate.clock=virtual -o emulate.step_ms=20 \
  -o emulate.nic_mbit=10000 --workspace "$dir/ws" -q >"$dir/out" 2>&1 || { tail -5 "$dir/out"; fail "the run failed"; }
line=$(grep '\[emulate\] memory:' "$dir/out") || fail "no memory line: $(tail -3 "$dir/out")"
echo "${line#*\] }"
grep -q "the $UNITS units held" <<<"$line" || fail "not $UNITS units: $line"
/usr/bin/python3 - "$line" "$UNITS" <<'PY'
import re, sys
line, units = sys.argv[1], int(sys.argv[2])
peak = float(re.search(r"peak resident ([0-9.]+) MiB", line).group(1))
per_unit = float(re.search(r"\(([0-9.]+) MiB a unit\)", line).group(1))
bound = 512 + units * 7.5
params_mib = 1863690 * 4 / 2**20
print("peak resident %.0f MiB, bound %.0f MiB (%.2f of it); %.2f MiB per unit, %.2f MiB a unit of slices held "
      "(one copy of the params: %.2f MiB)" % (peak, bound, peak / bound, peak / units, per_unit, params_mib))
assert peak <= bound, "peak resident %.0f MiB above the bound %.0f MiB" % (peak, bound)
assert per_unit <= params_mib + 0.01, "a unit held %.2f MiB of slices, more than one copy of the params" % per_unit
PY
