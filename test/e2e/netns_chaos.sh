#!/usr/bin/env bash
# Faults that cross hosts, with three network namespaces as three hosts
# (10.203.0.1-3, one rank each, joined by a bridge in a fourth namespace):
# every SINGA scheme trains across them over TLS, then Downpour (groups
# on hosts A and B, servers on C, all_groups_required = false) and
# Sandblaster (workers on A, servers on B) meet faults of host B: its
# link cut for good, a partition that heals after 2 s, 5 % of its
# packets dropped each way (iptables' statistic match), its link held to
# 200 Mbit/s (tc tbf), 20 ms more latency (tc netem, or where the kernel
# has no sch_netem every packet reaching host b held 20 ms by an NFQUEUE
# program, test/e2e/lib/delay_queue.c), and every process of the host
# killed at once.  Each run is
# bounded and must end as docs/SCHEMES.md's table says: finished (by all,
# or by the survivors naming the lost group), or failed naming the lost
# host and rank; none may hang, and the checkpoints of every run load
# (shoal eval --from the workspace).  Heartbeats: 0.5 s, lost after 6 s;
# a failing rank's threads get stop_timeout = 4 s to end (default 30 s).
# may-skip-in-ci: a container without CAP_SYS_ADMIN cannot make namespaces; no package gives that
# Usage: netns_chaos.sh BUILD
set -euo pipefail
source "$(dirname "$0")/lib/as_root.sh" "$@"
BUILD=$(cd "${1:-build}" && pwd)
cd "$(dirname "$0")/../.."
source test/e2e/lib/time_scale.sh "$BUILD"
source test/e2e/lib/topology.sh

tag=shoal-chaos-$$
hosts=(a b c)
dir=$(mktemp -d)
pids=()
delayer=
cleanup() {
  set +e
  for h in "${hosts[@]}"; do
    ip netns pids "$tag-$h" 2>/dev/null | xargs -r kill -9
    ip netns del "$tag-$h" 2>/dev/null
  done
  ip netns del "$tag-sw" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT

if ! command -v ip >/dev/null || ! ip netns add "$tag-sw" 2>"$dir/err"; then
  echo "SKIP: cannot create network namespaces: $(cat "$dir/err" 2>/dev/null)"
  exit 77
fi
iptables=iptables
command -v iptables >/dev/null || iptables=iptables-legacy
command -v "$iptables" >/dev/null || { echo "SKIP: no iptables (make deps installs it)"; exit 77; }
ip -n "$tag-sw" link add br0 type bridge
ip -n "$tag-sw" link set br0 up
for i in 0 1 2; do
  h=${hosts[$i]}
  ip netns add "$tag-$h"
  ip -n "$tag-sw" link add "p$h" type veth peer name eth0 netns "$tag-$h"
  ip -n "$tag-sw" link set "p$h" master br0 up
  ip -n "$tag-$h" addr add "10.203.0.$((i + 1))/24" dev eth0
  ip -n "$tag-$h" link set eth0 up
  ip -n "$tag-$h" link set lo up
done
printf '10.203.0.1\n10.203.0.2\n10.203.0.3\n' >"$dir/hosts"
make_token "$dir/token"
"$BUILD/shoal" certs --ranks 3 --name chaos --out "$dir/tls" >/dev/null
# latency: tc netem where the kernel has sch_netem, else every packet that
# reaches host b held 20 ms in the kernel by an NFQUEUE program
# (test/e2e/lib/delay_queue.c, libnetfilter-queue-dev; it says why on
# arrival rather than on departure)
netem=1
ip netns exec "$tag-b" tc qdisc add dev eth0 root netem delay 1ms 2>"$dir/netem.err" || netem=0
ip netns exec "$tag-b" tc qdisc del dev eth0 root 2>/dev/null || true
delay_queue=
if [ "$netem" -eq 0 ] && [ "${SHOAL_NETNS_CHAOS_ALL:-0}" = 1 ]; then
  # shellcheck disable=SC2046  # pkg-config prints several flags
  cc -std=c11 -O2 -Wall -Wextra -Werror -o "$dir/delay_queue" test/e2e/lib/delay_queue.c \
    $(pkg-config --cflags --libs libnetfilter_queue) 2>"$dir/delay_queue.err" && delay_queue=$dir/delay_queue
fi

# conf SCHEME SLOW_MS STEPS: the small MLP under SCHEME for STEPS steps, a
# checkpoint every 50, fast heartbeats, each step SLOW_MS longer so that
# faults land mid-run
conf() {
  local out=$dir/$1-$2-$3.conf
  small_job_conf "$out" "conf/$1.conf"
  sed -i -e 's/^\[job\]$/[job]\ncheckpoint_freq = 50/' -e "s/^train_steps = 600\$/train_steps = $3/" "$out"
  printf 'heartbeat_interval = 0.5\nheartbeat_timeout = 6\nstop_timeout = 4\nall_groups_required = false\n' >>"$out"
  [ "$2" -gt 0 ] && printf '\n[emulate]\nslow_groups = %s\nslow_extra_ms = %s\n' \
    "$([ "$1" = downpour ] || [ "$1" = hogwild ] && echo 0, 1 || echo 0)" "$2" >>"$out"
  echo "$out"
}

# when_step N WS: waits (at most 60 s) for a train line at step >= N
when_step() {
  for _ in $(seq "$(scaled 600)"); do
    [ -f "$2/metrics.jsonl" ] && /usr/bin/python3 -c '
import json, sys
s = [json.loads(l).get("step", 0) for l in open(sys.argv[1]) if l.strip()]
sys.exit(0 if max(s, default=0) >= int(sys.argv[2]) else 1)' "$2/metrics.jsonl" "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}

drop_all() {   # drop_all HOST -A|-D: every packet in and out of HOST
  ip netns exec "$tag-$1" "$iptables" "$2" INPUT -j DROP
  ip netns exec "$tag-$1" "$iptables" "$2" OUTPUT -j DROP
}

# run NAME SCHEME NPROCS FAULT: rank r on host r, FAULT on host b; leaves
# NAME-R.{out,err,rc}.  Fails if any rank runs into its time limit.  A
# degraded network (loss, rate, latency) slows every step: those runs take
# 100 steps, the others 600.
run() {
  local name=$1 scheme=$2 nprocs=$3 fault=$4 slow=0 ws=$dir/ws/$1
  steps=600
  case $fault in cut|partition|kill) slow=10 ;; loss|rate|latency) steps=100 ;; esac
  local c
  c=$(conf "$scheme" "$slow" "$steps")
  case $fault in
    loss) for chain in INPUT OUTPUT; do
            ip netns exec "$tag-b" "$iptables" -A "$chain" -m statistic --mode random --probability 0.05 -j DROP
          done ;;
    rate) ip netns exec "$tag-b" tc qdisc add dev eth0 root tbf rate 200mbit burst 256kb latency 100ms ;;
    latency)
      if [ "$netem" -eq 1 ]; then
        ip netns exec "$tag-b" tc qdisc add dev eth0 root netem delay 20ms
      else
        ip netns exec "$tag-b" "$iptables" -A INPUT -i eth0 -j NFQUEUE --queue-num 0 --queue-bypass
        ip netns exec "$tag-b" timeout "$(scaled 150)" "$delay_queue" 0 20 150 >"$dir/delay_queue.out" 2>&1 &
        delayer=$!
      fi ;;
  esac
  local r start=$SECONDS
  pids=()
  for ((r = 0; r < nprocs; r++)); do
    (
      rc=0
      ip netns exec "$tag-${hosts[$r]}" env SHOAL_INJECT_HOST_ID="chaos-${hosts[$r]}" timeout -k 5 "$(scaled 120)" \
        "$BUILD/shoal" proc "$c" --hostfile "$dir/hosts" --token-file "$dir/token" --tls-dir "$dir/tls" \
        --workspace "$ws" -q --rank "$r" >"$dir/$name-$r.out" 2>"$dir/$name-$r.err" || rc=$?
      echo "$rc" >"$dir/$name-$r.rc"
    ) &
    pids+=($!)
  done
  case $fault in
    cut|partition|kill)
      when_step 150 "$ws" || fail "$name: never reached step 150"
      case $fault in
        cut) ip -n "$tag-b" link set eth0 down ;;
        partition) drop_all b -A; sleep 2; drop_all b -D ;;
        kill) ip netns pids "$tag-b" | xargs -r kill -9 ;;
      esac ;;
  esac
  for p in "${pids[@]}"; do wait "$p" || true; done
  [ -n "$delayer" ] && { kill "$delayer" 2>/dev/null; wait "$delayer" || true; delayer=; }
  # undo the fault: the next run has a healthy host b
  ip -n "$tag-b" link set eth0 up
  ip netns exec "$tag-b" "$iptables" -F
  ip netns exec "$tag-b" tc qdisc del dev eth0 root 2>/dev/null || true
  local rcs=""
  for ((r = 0; r < nprocs; r++)); do
    local rc
    rc=$(cat "$dir/$name-$r.rc")
    [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ] && [ "$fault" != kill -o "$r" -ne 1 ] \
      && { tail -5 "$dir/$name-$r.err"; fail "$name: rank $r hung (timed out)"; }
    rcs="$rcs $rc"
  done
  echo "$name: exit statuses$rcs, $((SECONDS - start)) s"
  # whatever happened, the checkpoints written load
  if [ -d "$ws/checkpoint" ]; then
    "$BUILD/shoal" eval "$c" --from "$ws" >"$dir/$name.eval" 2>&1 \
      || { cat "$dir/$name.eval"; fail "$name: its checkpoint does not load"; }
  fi
}

rc_of() { cat "$dir/$1-$2.rc"; }
finished() {   # finished NAME RANK: exit 0 and a result line
  [ "$(rc_of "$1" "$2")" -eq 0 ] || { tail -5 "$dir/$1-$2.err"; fail "$1: rank $2 exited $(rc_of "$1" "$2")"; }
}
accuracy_ok() {   # accuracy_ok NAME RANK: its group's test accuracy at the last run's steps >= the bar
  local acc bar=0.80
  [ "$steps" -lt 600 ] && bar=0.70
  acc=$(sed -n "s/^rank [0-9]*: group [0-9]* worker 0: $steps steps at [0-9]* samples\/s, test accuracy //p" \
          "$dir/$1-$2.out")
  [ -n "$acc" ] || fail "$1: rank $2 reported no accuracy"
  awk -v a="$acc" -v b="$bar" 'BEGIN { exit !(a >= b) }' || fail "$1: rank $2's accuracy $acc is below $bar"
}
failed_naming() {   # failed_naming NAME RANK 'RANK (WHAT)' HOST: exit != 0, its error names the rank and host
  [ "$(rc_of "$1" "$2")" -ne 0 ] || fail "$1: rank $2 finished, expected to fail"
  local last
  last=$(grep "^shoal proc (rank $2): " "$dir/$1-$2.err" | tail -1)
  [[ "$last" == *"$3 on $4 "* || "$last" == *"$3 at $4:"* ]] \
    || { tail -5 "$dir/$1-$2.err"; fail "$1: rank $2's error does not name $3 on $4: $last"; }
}

# In `make test` a subset, to keep the suite short: Sandblaster and
# Downpour across the hosts and the faults that end or partition host b
# (cut, kill, a partition that heals); SHOAL_NETNS_CHAOS_ALL=1 (`make
# chaos`) adds AllReduce and Hogwild and the faults that only cost time
# (loss, rate, latency).
all=${SHOAL_NETNS_CHAOS_ALL:-0}

# ---- every scheme across the hosts ------------------------------------------
run sandblaster sandblaster 2 none
finished sandblaster 0; finished sandblaster 1; accuracy_ok sandblaster 0
if [ "$all" = 1 ]; then
  run allreduce allreduce 2 none
  finished allreduce 0; finished allreduce 1; accuracy_ok allreduce 0
  run hogwild hogwild 2 none
  finished hogwild 0; finished hogwild 1; accuracy_ok hogwild 0; accuracy_ok hogwild 1
else
  echo "allreduce, hogwild across the hosts: in make chaos (SHOAL_NETNS_CHAOS_ALL=1)"
fi
run downpour downpour 3 none
for r in 0 1 2; do finished downpour "$r"; done
accuracy_ok downpour 0; accuracy_ok downpour 1

# ---- faults of host b --------------------------------------------------------
# Downpour: host b holds group 1.  The network's faults heal or cost time only.
faults="partition"
[ "$all" = 1 ] && faults="loss rate partition latency"
faults=${SHOAL_NETNS_CHAOS_FAULTS:-$faults}   # a subset, to look at one fault
for fault in $faults; do
  if [ "$fault" = latency ] && [ "$netem" -eq 0 ] && [ -z "$delay_queue" ]; then
    echo "downpour-latency: skipped: neither tc netem ($(head -c 80 "$dir/netem.err")) nor" \
         "test/e2e/lib/delay_queue.c ($(head -c 80 "$dir/delay_queue.err")) is available here"
    continue
  fi
  run "downpour-$fault" downpour 3 "$fault"
  for r in 0 1 2; do finished "downpour-$fault" "$r"; done
  accuracy_ok "downpour-$fault" 0; accuracy_ok "downpour-$fault" 1
  echo "downpour-$fault: all finished, ok"
done
# a link cut for good: the survivors finish without group 1; host b's rank
# gives up naming the servers' host it lost (after heartbeat_timeout, then
# stop_timeout for its threads stuck in calls on the dead link)
run downpour-cut downpour 3 cut
finished downpour-cut 0; finished downpour-cut 2; accuracy_ok downpour-cut 0
# the servers drop group 1 (rank 0 may finish its steps before the loss is declared)
grep -q 'group 1 lost: rank 1 (2 workers of group 1) on 10.203.0.2' "$dir/downpour-cut-2.err" \
  || { tail -5 "$dir/downpour-cut-2.err"; fail "downpour-cut: the servers do not name rank 1 on 10.203.0.2 lost"; }
failed_naming downpour-cut 1 "rank 2 (2 servers)" 10.203.0.3
echo "downpour-cut: survivors finished, host b's rank failed naming rank 2 on 10.203.0.3, ok"
# every process of host b killed at once: the survivors finish, naming it
run downpour-kill downpour 3 kill
finished downpour-kill 0; finished downpour-kill 2; accuracy_ok downpour-kill 0
grep -q 'group 1 lost: rank 1 (2 workers of group 1) on 10.203.0.2' "$dir/downpour-kill-2.err" \
  || { tail -5 "$dir/downpour-kill-2.err"; fail "downpour-kill: the servers do not name rank 1 on 10.203.0.2"; }
echo "downpour-kill: survivors finished naming rank 1 on 10.203.0.2, ok"

# Sandblaster: host b holds the servers; a synchronous job cannot go on
for fault in cut kill; do
  run "sandblaster-$fault" sandblaster 2 "$fault"
  failed_naming "sandblaster-$fault" 0 "rank 1 (2 servers)" 10.203.0.2
  echo "sandblaster-$fault: rank 0 failed naming rank 1 on 10.203.0.2, ok"
done
