#!/usr/bin/env bash
# The network model's NICs against real TCP (docs/SCALE.md, "Validation",
# incast): every process of a layout in a network namespace of its own
# behind a veth whose two directions are each shaped to MBIT Mbit/s by
# the kernel's token bucket filter (tbf: a full-duplex NIC), the veths
# joined by a bridge in one more namespace (a switch that is never the
# bottleneck), so two workers' pushes queue at the server's NIC as on a
# cluster, in real TCP.  Each rank is started with `shoal proc
# --hostfile` in its namespace, in clear ([tls] mode = off) and with a
# host id of its own (no shared memory stands in for the link).  The
# prediction is the same layout on the virtual clock with
# `[emulate] nic_mbit = MBIT` and a calibration per worker count
# (`shoal calibrate --concurrent`, as bench/scale_validate.sh); both
# sides' throughput is computed from their metrics.jsonl the way
# `shoal compare` does.  The layouts are the virtual runs' own job.conf
# (their [emulate] section dropped), so both sides run the same job.
#
#   bench/scale_incast.sh [BUILD]
#   SCHEMES=sandblaster,downpour WORKERS=1,2 MBIT=1000 BUDGET=6400 bench/scale_incast.sh build
#   CAL_DIR=DIR ...   reuse DIR/mlp-kK.cal (bench/scale_validate.sh's) instead of calibrating
#   QUEUE_MS=20 ...   each NIC's queue in ms of its rate (tbf latency): a switch port's buffer
#
# Needs root (or sudo -n) for the namespaces and tc; touches nothing of
# the host's own interfaces.  Schemes whose servers have processes of
# their own only (server_worker_separate): their servers' NICs are what
# the workers share.  Writes under $OUT (default BUILD/scale-incast).
set -euo pipefail
# shellcheck source=bench/scale_lib.sh
. "$(dirname "$0")/scale_lib.sh"
SCHEMES=${SCHEMES:-sandblaster,downpour}
WORKERS=${WORKERS:-1,2}
MBIT=${MBIT:-1000}
BUDGET=${BUDGET:-6400}
OUT=${OUT:-$BUILD/scale-incast}
if [ "$(id -u)" != 0 ]; then
  exec sudo -n OUT="$OUT" CAL_DIR="${CAL_DIR:-}" QUEUE_MS="${QUEUE_MS:-20}" SCHEMES="$SCHEMES" WORKERS="$WORKERS" MBIT="$MBIT" BUDGET="$BUDGET" "$0" "$BUILD" "${@:2}"
fi
command -v tc >/dev/null && command -v ip >/dev/null || { echo "bench/scale_incast.sh: needs ip and tc (iproute2)" >&2; exit 1; }
rm -rf "$OUT"
mkdir -p "$OUT"
scale_machine
echo "incast: schemes $SCHEMES, workers $WORKERS, $BUDGET samples a point, every process's NIC $MBIT Mbit/s each way (tbf)"

prefix=shoal-incast-$$
namespaces=()
cleanup() {
  for ns in "${namespaces[@]}"; do ip netns del "$ns" 2>/dev/null || true; done
}
trap cleanup EXIT

# the switch: a bridge in a namespace of its own
ip netns add "$prefix-sw"
namespaces+=("$prefix-sw")
ip -n "$prefix-sw" link add br0 type bridge
ip -n "$prefix-sw" link set br0 up
ip -n "$prefix-sw" link set lo up
# A token bucket of MBIT with QUEUE_MS (20) of queue.  Its burst is what an idle
# NIC banks, which a real link does not (each message after a pause
# would start that many bytes ahead: a 128 KiB burst let a 1-worker step
# cross 1000 Mbit/s faster than its bytes can); it must hold one packet,
# so the veths hand it packets of at most 16 KiB (GSO) and it banks 20
# KiB, 4 % of a 512 KiB slice.
shape() {  # NAMESPACE DEVICE
  ip -n "$1" link set dev "$2" gso_max_size 16384
  ip netns exec "$1" tc qdisc add dev "$2" root tbf rate "${MBIT}mbit" burst 20kb latency "${QUEUE_MS:-20}ms"
}
# host R: namespace, address 10.203.0.(R+1), its NIC shaped both ways
max_ranks=0
for w in ${WORKERS//,/ }; do max_ranks=$((w + 1 > max_ranks ? w + 1 : max_ranks)); done
for ((r = 0; r < max_ranks; r++)); do
  ns=$prefix-r$r
  ip netns add "$ns"
  namespaces+=("$ns")
  ip -n "$ns" link add nic type veth peer name "p$r" netns "$prefix-sw"
  ip -n "$ns" addr add "10.203.0.$((r + 1))/24" dev nic
  ip -n "$ns" link set lo up
  ip -n "$ns" link set nic up
  ip -n "$prefix-sw" link set "p$r" master br0 up
  shape "$ns" nic              # what the host sends
  shape "$prefix-sw" "p$r"     # what it receives
done

# the prediction first: its runs' job.conf is the real side's layout
for w in ${WORKERS//,/ }; do scale_virtual_point "$w" "$OUT" -o "emulate.nic_mbit=$MBIT"; done

# real_run NAME CONF: every rank of CONF in its host; all must exit 0
real_run() {
  local name=$1 conf=$2 nranks pids=() rc=0
  nranks=$(/usr/bin/python3 - "$conf" <<'PY'
import configparser, sys
c = configparser.ConfigParser(interpolation=None, strict=False)
c.read(sys.argv[1])
k = c["cluster"]
if k.get("server_worker_separate", "true") != "true":
    sys.exit("%s: servers share the workers' processes: no server NIC to share" % sys.argv[1])
workers = int(k["nworker_groups"]) * int(k["nworkers_per_group"]) // int(k["nworkers_per_procs"])
servers = int(k["nserver_groups"]) * int(k["nservers_per_group"]) // int(k["nservers_per_procs"])
print(workers + servers)
PY
)
  : >"$OUT/$name.hosts"
  for ((r = 0; r < nranks; r++)); do echo "10.203.0.$((r + 1))" >>"$OUT/$name.hosts"; done
  (umask 077 && od -An -tx1 -N16 /dev/urandom | tr -d ' \n' >"$OUT/$name.token")
  for ((r = nranks - 1; r >= 0; r--)); do
    ip netns exec "$prefix-r$r" env SHOAL_INJECT_HOST_ID="incast-$r" timeout -k 5 600 "$BUILD/shoal" proc "$conf" \
      --hostfile "$OUT/$name.hosts" --token-file "$OUT/$name.token" --workspace "$OUT/real/$name" -q --rank "$r" \
      >"$OUT/$name-$r.out" 2>"$OUT/$name-$r.err" &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || rc=$?; done
  [ "$rc" = 0 ] || { tail -5 "$OUT/$name"-*.err; echo "the real run $name failed" >&2; exit 1; }
}

start=$SECONDS
for w in ${WORKERS//,/ }; do
  for scheme in ${SCHEMES//,/ }; do
    name=$scheme-w$w
    virtual=$OUT/virtual-w$w/runs/$name-r1
    [ -f "$virtual/job.conf" ] || { echo "no $virtual/job.conf" >&2; exit 1; }
    # the virtual run's job, in clear, without its [emulate] section
    awk '/^\[/ { skip = ($0 == "[emulate]") } !skip' "$virtual/job.conf" >"$OUT/$name.conf"
    printf '\n[tls]\nmode = off\n' >>"$OUT/$name.conf"
    real_run "$name" "$OUT/$name.conf"
  done
done
echo "real runs $((SECONDS - start)) s"

/usr/bin/python3 - "$OUT" "$SCHEMES" "$WORKERS" <<'PY'
import json, os, sys
out, schemes, workers = sys.argv[1], sys.argv[2].split(","), sys.argv[3].split(",")
def throughput(path):
    # shoal compare's rule (tools/runlog.c): per unit, its samples over
    # its train time, each line's window taking its samples / its
    # samples/s; summed over the units
    units = {}
    for line in open(path):
        r = json.loads(line)
        if r.get("phase") == "train":
            units.setdefault((r["group"], r["worker"]), []).append((r["time"], r["samples"], r["samples_per_sec"]))
    total = 0
    for points in units.values():
        prev = seconds = 0
        for _, samples, sps in sorted(points):
            if sps > 0:
                seconds += (samples - prev) / sps
            prev = samples
        total += prev / seconds if seconds > 0 else 0
    return total
print("%-12s %7s %14s %14s %8s" % ("scheme", "workers", "real samples/s", "predicted", "ratio"))
worst = 0
for s in schemes:
    for w in workers:
        name = "%s-w%s" % (s, w)
        real = throughput(os.path.join(out, "real", name, "metrics.jsonl"))
        pred = throughput(os.path.join(out, "virtual-w%s" % w, "runs", name + "-r1", "metrics.jsonl"))
        r = pred / real
        worst = max(worst, abs(r - 1))
        print("%-12s %7s %14.0f %14.0f %8.3f" % (s, w, real, pred, r))
print("worst |predicted / real - 1|: %.1f %% (bar: 15 %%): %s" % (100 * worst, "within" if worst <= 0.15 else "OUTSIDE"))
PY
