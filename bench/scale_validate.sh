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
#   REAL_FROM=DIR: the real half (DIR/real) and its calibrations
#   (DIR/mlp-kK.cal) are an earlier run's OUT, made on another machine;
#   only the virtual half runs here, with that machine's cores
#   (DIR/machine.txt, or CORES=N).  The virtual clock does not read the
#   host it runs on, so a 2-core machine predicts a 16-core one's sweep.
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
REAL_FROM=${REAL_FROM:-}
if [ -n "$REAL_FROM" ]; then
  REAL_FROM=$(realpath -e -- "$REAL_FROM") && [ -f "$REAL_FROM/real/results.csv" ] ||
    { echo "REAL_FROM: no real/results.csv in ${REAL_FROM:-the folder given}" >&2; exit 1; }
  [ "$(realpath -m -- "$OUT")" != "$REAL_FROM" ] || { echo "REAL_FROM and OUT are the same folder" >&2; exit 1; }
  CAL_DIR=$REAL_FROM
fi
rm -rf "$OUT"
mkdir -p "$OUT"
if [ -n "$REAL_FROM" ]; then
  cores=${CORES:-$(sed -n 's/^machine: \([0-9]*\) cores.*/\1/p' "$REAL_FROM/machine.txt" 2>/dev/null)}
  [[ $cores =~ ^[1-9][0-9]*$ ]] || { echo "REAL_FROM: no $REAL_FROM/machine.txt: say the cores with CORES=N" >&2; exit 1; }
  cp "$REAL_FROM/machine.txt" "$OUT/" 2>/dev/null || echo "machine: $cores cores (CORES)" >"$OUT/machine.txt"
  echo "the real half: $REAL_FROM ($(cat "$OUT/machine.txt")); the virtual half on $(scale_machine)"
else
  cores=$(nproc)
  scale_machine | tee "$OUT/machine.txt"
fi
echo "sweep: schemes $SCHEMES, workers $WORKERS, $BUDGET samples a point, links $MBIT Mbit/s"

# one calibration per worker count, made before the real sweep
# (scale_host_calibration; copied from REAL_FROM where given)
# (scale_lib.sh's calibrations per K = min(W, NPROC) follow the real half's machine)
NPROC=$cores
for w in ${WORKERS//,/ }; do scale_host_calibration "$w" "$OUT"; done
start=$SECONDS
if [ -n "$REAL_FROM" ]; then
  cp -r "$REAL_FROM/real" "$OUT/real"
else
  # the report's figures need gnuplot; its CSVs do not
  "$BUILD/shoal" compare "${JOB[@]}" --schemes "$SCHEMES" --workers "$WORKERS" --budget "samples=$BUDGET" --points 2 \
    -o "emulate.bandwidth_mbit=$MBIT" --out "$OUT/real" --quiet >"$OUT/real.log" 2>&1 \
    || { tail -5 "$OUT/real.log"; echo "the real sweep failed" >&2; exit 1; }
fi
real_s=$((SECONDS - start))
start=$SECONDS
# each virtual process gets the cores a real one has there: the
# machine's cores over the worker processes, at least one (docs/SCALE.md,
# "A process's cores")
for w in ${WORKERS//,/ }; do
  scale_virtual_point "$w" "$OUT" -o "emulate.bandwidth_mbit=$MBIT" -o emulate.nic_mbit=unlimited \
    -o "emulate.process_cores=$((cores / w > 1 ? cores / w : 1))"
done
virtual_s=$((SECONDS - start))
echo "real sweep ${real_s} s, virtual sweep ${virtual_s} s"
/usr/bin/python3 - "$OUT" <<'PY'
import csv, glob, os, sys
out = sys.argv[1]
def rates(dirs):
    """(scheme, workers) -> {"samples_per_sec": the mean over the point's
    finished repeats, "" where none finished}, from results.csv (which a
    sweep writes before its figures and scale.csv)"""
    sums = {}
    for d in dirs:
        for r in csv.DictReader(open(os.path.join(d, "results.csv"))):
            scheme, _, workers = r["scheme"].rpartition("-w")
            acc = sums.setdefault((scheme, workers), [])
            if r["status"] == "0" and r["samples_per_sec"]:
                acc.append(float(r["samples_per_sec"]))
    return {k: {"samples_per_sec": "%.1f" % (sum(v) / len(v)) if v else ""} for k, v in sums.items()}
virtual_dirs = sorted(d for d in glob.glob(os.path.join(out, "virtual-w*")) if os.path.isdir(d))
real = rates([os.path.join(out, "real")])
virt = rates(virtual_dirs)
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
