# shellcheck shell=bash
# Shared by the cluster simulator's bench scripts (scale_sweep.sh,
# scale_validate.sh, scale_findings.sh, scale_incast.sh): sourced, not run, from where the
# script was started and with its arguments:
#   . "$(dirname "$0")/scale_lib.sh"
# It resolves BUILD from the first argument (default build) there, moves
# to the repository's root, checks for the Fashion-MNIST LMDB that `make
# data` writes under BUILD/data (before a script replaces its earlier
# results) and sets JOB: the MLP example on that data with one BLAS
# thread a worker, each worker a machine of one core, as `shoal
# calibrate` measures it.  CAL (a calibration to reuse), where given, is
# resolved from where the script was started as well.

BUILD=$(cd "${1:-build}" && pwd)
[ -z "${CAL:-}" ] || CAL=$(realpath -m -- "$CAL")
[ -z "${CAL_DIR:-}" ] || CAL_DIR=$(realpath -m -- "$CAL_DIR")
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
[ -d "$BUILD/data/fashion-mnist/train" ] || { echo "no $BUILD/data/fashion-mnist: run make data" >&2; exit 1; }
JOB=(examples/fashion-mnist/mlp.conf -o "layer data.train=$BUILD/data/fashion-mnist/train"
     -o "layer data.test=$BUILD/data/fashion-mnist/test" -o job.threads=1)
# the script's arguments after BUILD change the model (-o SECTION.KEY=VALUE),
# e.g. a smaller MLP for a test of the script itself
[ $# -le 1 ] || JOB+=("${@:2}")

# scale_machine: the line that says where the numbers come from (cores
# and CPU).
scale_machine () { echo "machine: $(nproc) cores, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)"; }

# scale_calibrate FILE: measures JOB on this machine into FILE and prints
# calibrate's summary line.
scale_calibrate () { "$BUILD/shoal" calibrate "${JOB[@]}" --out "$1" | head -1; }

# scale_cluster CAL: sets CLUSTER, the virtual cluster of docs/SCALE.md's
# sweeps and findings: the virtual clock with calibration CAL, 10 Gbit/s
# NICs and 0.05 ms of link latency.
scale_cluster () {
  # shellcheck disable=SC2034  # read by the scripts that source this
  CLUSTER=(-o emulate.clock=virtual -o "emulate.calibration=$1" -o emulate.nic_mbit=10000 -o emulate.latency_ms=0.05)
}

# scale_host_calibration W DIR: sets HOST_CAL to the calibration of W
# workers of a real layout on this machine, DIR/mlp-kK.cal: W workers step
# at once on this host's cores, sharing its memory bandwidth and caches
# (and the other load), so their compute is measured with K = min(W,
# cores) stepping at once (`shoal calibrate --concurrent`; a machine of a
# real cluster would calibrate with 1).  Made once per K (CAL_SECONDS:
# its time), or copied from CAL_DIR where given.
scale_host_calibration () {
  local cores k
  cores=${NPROC:-$(nproc)}
  k=$(($1 < cores ? $1 : cores))
  HOST_CAL=$2/mlp-k$k.cal
  [ ! -f "$HOST_CAL" ] || return 0
  if [ -n "${CAL_DIR:-}" ]; then
    cp "$CAL_DIR/mlp-k$k.cal" "$HOST_CAL"
  else
    "$BUILD/shoal" calibrate "${JOB[@]}" --concurrent "$k" ${CAL_SECONDS:+--seconds "$CAL_SECONDS"} --out "$HOST_CAL" \
      | head -1
  fi
}

# scale_virtual_point W DIR [-o LINK ...]: the predicted half of a
# validation point: SCHEMES at W workers, BUDGET samples, on the virtual
# clock with W's host calibration and the given links, into
# DIR/virtual-wW (its log beside it).
scale_virtual_point () {
  local w=$1 dir=$2
  shift 2
  scale_host_calibration "$w" "$dir"
  "$BUILD/shoal" compare "${JOB[@]}" --schemes "$SCHEMES" --workers "$w" --budget "samples=$BUDGET" --points 2 "$@" \
    -o emulate.clock=virtual -o "emulate.calibration=$HOST_CAL" --out "$dir/virtual-w$w" --quiet \
    >"$dir/virtual-w$w.log" 2>&1 \
    || { tail -5 "$dir/virtual-w$w.log"; echo "the virtual sweep at $w workers failed" >&2; return 1; }
}
