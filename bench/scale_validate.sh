#!/usr/bin/env bash
# The virtual clock against reality (docs/SCALE.md, "Validation"): the
# same scale sweep twice through `shoal compare --workers`, once with real
# processes on this machine's cores (links limited by the real-time
# emulation, [emulate] bandwidth_mbit) and once on the virtual clock with
# this machine's calibration and the same links (and, as the real limiter
# paces each socket alone, no NIC shared by a process's links:
# nic_mbit = unlimited; bench/scale_incast.sh checks the NICs against the
# kernel's), then a table of the
# throughput of every scheme and size, predicted against measured.  The
# layouts are the same by construction (one compare code path builds
# both).  The issue's bar is 15 %; it is printed, not asserted.
#
#   bench/scale_validate.sh [BUILD [-o SECTION.KEY=VALUE ...]]
#   (CAL_SECONDS=S: each calibration's time, default calibrate's 3 s; CAL_DIR=DIR: reuse
#   DIR/mlp-kK.cal instead of calibrating)
#   WORKERS=1,2,4,8 SCHEMES=sandblaster,downpour BUDGET=12800 MBIT=1000 \
#     bench/scale_validate.sh build     (a 16-core machine: up to 8 workers)
#
# It reads only the repository and BUILD (the Fashion-MNIST LMDB that
# `make data` writes under BUILD/data) and writes under $OUT (default
# BUILD/scale-validate).  Each worker is a process with one BLAS thread:
# give it at least WORKERS + 1 cores, or the real runs share cores that
# the virtual machines do not.
set -euo pipefail
# shellcheck source=bench/scale_lib.sh
. "$(dirname "$0")/scale_lib.sh"
WORKERS=${WORKERS:-1,2}
SCHEMES=${SCHEMES:-sandblaster,downpour}
BUDGET=${BUDGET:-12800}
MBIT=${MBIT:-1000}
OUT=${OUT:-$BUILD/scale-validate}
rm -rf "$OUT"
mkdir -p "$OUT"
scale_machine
echo "sweep: schemes $SCHEMES, workers $WORKERS, $BUDGET samples a point, links $MBIT Mbit/s"

# one calibration per worker count, made before the real sweep
# (scale_host_calibration)
for w in ${WORKERS//,/ }; do scale_host_calibration "$w" "$OUT"; done
start=$SECONDS
"$BUILD/shoal" compare "${JOB[@]}" --schemes "$SCHEMES" --workers "$WORKERS" --budget "samples=$BUDGET" --points 2 \
  -o "emulate.bandwidth_mbit=$MBIT" --out "$OUT/real" --quiet >"$OUT/real.log" 2>&1 \
  || { tail -5 "$OUT/real.log"; echo "the real sweep failed" >&2; exit 1; }
real_s=$((SECONDS - start))
start=$SECONDS
# each virtual process gets the cores a real one has here: the machine's
# cores over the worker processes, at least one (docs/SCALE.md, "A
# process's cores")
cores=$(nproc)
for w in ${WORKERS//,/ }; do
  scale_virtual_point "$w" "$OUT" -o "emulate.bandwidth_mbit=$MBIT" -o emulate.nic_mbit=unlimited \
    -o "emulate.process_cores=$((cores / w > 1 ? cores / w : 1))"
done
virtual_s=$((SECONDS - start))
echo "real sweep ${real_s} s, virtual sweep ${virtual_s} s"
/usr/bin/python3 - "$OUT" <<'PY'
import csv, glob, os, sys
out = sys.argv[1]
real = {(r["scheme"], r["workers"]): r for r in csv.DictReader(open(os.path.join(out, "real", "scale.csv")))}
virtual_dirs = sorted(glob.glob(os.path.join(out, "virtual-w*")))
virt = {(r["scheme"], r["workers"]): r for d in virtual_dirs if os.path.isdir(d)
        for r in csv.DictReader(open(os.path.join(d, "scale.csv")))}
# where an error comes from: each run's compute and wait (results.csv,
# the workers' summed seconds), predicted against measured
runs = {}
for d, side in [(os.path.join(out, "real"), "real")] + [(d, "virtual") for d in virtual_dirs if os.path.isdir(d)]:
    for r in csv.DictReader(open(os.path.join(d, "results.csv"))):
        runs[(side, r["scheme"])] = r
def part(key, col):
    a, b = runs.get(("real", "%s-w%s" % key)), runs.get(("virtual", "%s-w%s" % key))
    if a is None or b is None or not a[col] or not b[col] or float(a[col]) <= 0.01:
        return "-"
    return "%.3f" % (float(b[col]) / float(a[col]))
print("%-12s %7s %14s %14s %8s %9s %9s" % ("scheme", "workers", "real samples/s", "predicted", "ratio",
                                          "compute", "wait"))
worst = 0
for key in sorted(real, key=lambda k: (k[0], int(k[1]))):
    a, b = real[key], virt.get(key)
    if not a["samples_per_sec"] or b is None or not b["samples_per_sec"]:
        print("%-12s %7s %14s %14s %8s" % (key[0], key[1], a["samples_per_sec"] or "failed",
                                           b["samples_per_sec"] if b else "-", "-"))
        continue
    r = float(b["samples_per_sec"]) / float(a["samples_per_sec"])
    worst = max(worst, abs(r - 1))
    print("%-12s %7s %14.0f %14.0f %8.3f %9s %9s" % (key[0], key[1], float(a["samples_per_sec"]),
                                                    float(b["samples_per_sec"]), r, part(key, "compute_s"),
                                                    part(key, "wait_s")))
print("worst |predicted / real - 1|: %.1f %% (bar: 15 %%): %s" % (100 * worst, "within" if worst <= 0.15 else "OUTSIDE"))
print("compute, wait: predicted / real of the runs' compute and wait seconds (results.csv)")
PY
