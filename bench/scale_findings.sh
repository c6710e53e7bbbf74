#!/usr/bin/env bash
# The scale findings of docs/SCALE.md ("Findings") that need a sweep of a
# scheme's own knob, each a `shoal compare --workers` on the virtual clock
# with this machine's calibration, 10 Gbit/s NICs and 0.05 ms latency
# (the schemes' files are in bench/scale-findings/):
#
#   shards   Downpour with 1, 2 and 8 server shards, each in a process
#            (a NIC) of its own, at 1 to 64 groups: where the knee lies
#   ssp      SSP with a bound of 0, 2 and 8 clocks and without one, 16
#            groups, every step drawn with a long tail (pareto step_delay):
#            staleness, throughput and accuracy against the bound
#   hogwild  Hogwild syncing every 1, 10 and 100 updates, 4 and 16 groups:
#            bytes per sample against accuracy
#   synclr   Sandblaster at 1 and 16 workers with sync_lr none, linear,
#            linear with a 20-update warm-up and sqrt: accuracy of large
#            synchronous batches (Goyal et al. 2017)
#   backup   Sandblaster with and without backup workers (about 5 % of k,
#            at least one: Chen et al. 2016) at 1 to 32 workers, every
#            step drawn with a long tail (pareto step_delay), 3 seeds,
#            once with NICs of 10 Tbit/s (the network nearly free: the
#            step is the slowest draw, against the order statistics of
#            the draws) and once with the sweeps' 10 Gbit/s
#
#   bench/scale_findings.sh [BUILD] [shards|ssp|hogwild|synclr|backup|all]
#   CAL=mlp.cal bench/scale_findings.sh build ssp   (reuse a calibration)
#
# Reads the repository and BUILD (the Fashion-MNIST LMDB of `make data`),
# writes under $OUT (default BUILD/scale-findings).  Virtual time does not
# depend on the machine's load; the wall time does: a sweep took 6 to 18
# minutes on this 2-core machine at a load of 15-20 (docs/SCALE.md).
set -euo pipefail
WHICH=${2:-all}
case $WHICH in shards|ssp|hogwild|synclr|backup|all) ;;
  *) echo "bench/scale_findings.sh: unknown sweep '$WHICH' (shards, ssp, hogwild, synclr, backup or all)" >&2
     exit 2 ;; esac
# the lib takes the arguments after BUILD as model overrides: here the
# second is the sweep's name, so it gets BUILD alone
# shellcheck source=bench/scale_lib.sh
. "$(dirname "$0")/scale_lib.sh" "${1:-build}"
OUT=${OUT:-$BUILD/scale-findings}
mkdir -p "$OUT"
CAL=${CAL:-$OUT/mlp.cal}
[ -f "$CAL" ] || scale_calibrate "$CAL"
scale_cluster "$CAL"
VIRTUAL=("${CLUSTER[@]}" -o job.test_steps=40 --conf-dir bench/scale-findings --quiet --force)

sweep () {   # NAME SCHEMES WORKERS SAMPLES POINTS [more options]
  local name=$1 schemes=$2 workers=$3 samples=$4 points=$5
  shift 5
  local start=$SECONDS
  echo "== $name: $BUILD/shoal compare examples/fashion-mnist/mlp.conf --schemes $schemes --workers $workers" \
       "--budget samples=$samples --points $points $* (virtual, $(basename "$CAL"))"
  "$BUILD/shoal" compare "${JOB[@]}" "${VIRTUAL[@]}" --schemes "$schemes" --workers "$workers" \
    --budget "samples=$samples" --points "$points" --out "$OUT/$name" "$@" >"$OUT/$name.log" 2>&1 \
    || { tail -5 "$OUT/$name.log"; echo "the $name sweep failed" >&2; return 1; }
  echo "   $((SECONDS - start)) s of wall time; $OUT/$name/report.md"
  /usr/bin/python3 - "$OUT/$name/results.csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
print("   %-26s %10s %9s %15s %14s %10s" % ("scheme-workers", "samples/s", "accuracy", "staleness mean", "staleness max",
                                            "bytes/sample"))
for r in rows:
    if r["status"] != "0":
        print("   %-26s failed (status %s)" % (r["scheme"], r["status"]))
        continue
    print("   %-26s %10.0f %9.4f %15s %14s %10.0f" % (r["scheme"], float(r["samples_per_sec"]), float(r["final_accuracy"]),
                                                     r["staleness_mean"], r["staleness_max"], float(r["bytes_per_sample"])))
PY
}

case $WHICH in shards|all)
  sweep shards downpour-1nic,downpour-2nic,downpour-8nic 1,4,16,64 64000 2 ;; esac
case $WHICH in ssp|all)
  sweep ssp ssp-slack0,ssp-slack2,ssp-slack8,ssp-unbounded 16 64000 4 -o 'emulate.step_delay=pareto(5,1.5)' ;; esac
case $WHICH in hogwild|all)
  sweep hogwild hogwild-sync1,hogwild-sync10,hogwild-sync100 4,16 64000 4 ;; esac
case $WHICH in synclr|all)
  sweep synclr sync-lr-none,sync-lr-linear,sync-lr-linear-warmup,sync-lr-sqrt 1,16 64000 4 ;; esac
case $WHICH in backup|all)
  sweep backup-free conf/sandblaster.conf,conf/backup.conf 1,4,8,16,32 64000 2 --repeats 3 \
    -o 'emulate.step_delay=pareto(5,1.5)' -o emulate.nic_mbit=10000000
  sweep backup-10g conf/sandblaster.conf,conf/backup.conf 1,4,8,16,32 64000 2 --repeats 3 \
    -o 'emulate.step_delay=pareto(5,1.5)' ;; esac
