#!/usr/bin/env bash
# Two "hosts" without a second machine: two network namespaces joined by a
# veth pair, 10.200.0.1 (workers) and 10.200.0.2 (servers), each seeing
# only its own address and loopback.  The Sandblaster layout runs its
# server rank in one and its worker rank in the other, both started by
# hand with `shoal proc --hostfile`, so every call crosses the link; the
# server must listen on its host's address from the hostfile, not on
# 0.0.0.0 or loopback.  Then a worker group spread over both "hosts"
# (bridges between them) trains too.  Skipped (exit 77) where namespaces
# cannot be made (no root and no sudo -n, a container without CAP_SYS_ADMIN).
# may-skip-in-ci: a container without CAP_SYS_ADMIN cannot make namespaces; no package gives that  Usage: multihost_netns.sh BUILD
set -euo pipefail
# namespaces need root: a runner with password-less sudo gives it
if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
  exec sudo -n -E bash "$0" "$@"
fi
BUILD=$(cd "${1:-build}" && pwd)
cd "$(dirname "$0")/../.."
source test/e2e/lib/topology.sh

ns_w=shoal-e2e-$$-w
ns_s=shoal-e2e-$$-s
server_pid=
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  ip netns del "$ns_w" 2>/dev/null || true
  ip netns del "$ns_s" 2>/dev/null || true
  rm -rf "$dir"
}
dir=$(mktemp -d)
trap cleanup EXIT

if ! command -v ip >/dev/null || ! ip netns add "$ns_w" 2>"$dir/err"; then
  echo "SKIP: cannot create network namespaces: $(cat "$dir/err" 2>/dev/null)"
  exit 77
fi
ip netns add "$ns_s"
# the veth pair is made inside the namespaces: nothing of this test
# touches the host's own interfaces or addresses
ip netns exec "$ns_w" ip link add vw type veth peer name vs netns "$ns_s"
ip netns exec "$ns_w" ip addr add 10.200.0.1/24 dev vw
ip netns exec "$ns_s" ip addr add 10.200.0.2/24 dev vs
for ns in "$ns_w" "$ns_s"; do
  ip netns exec "$ns" ip link set lo up
done
ip netns exec "$ns_w" ip link set vw up
ip netns exec "$ns_s" ip link set vs up

small_job_conf "$dir/job.conf" conf/sandblaster.conf
make_token "$dir/token"
printf '# rank 0: the workers, rank 1: the servers\n10.200.0.1\n10.200.0.2\n' >"$dir/hosts"
port=47001   # base port 47000 + rank 1; the namespace is ours alone
args=("$dir/job.conf" --hostfile "$dir/hosts" --token-file "$dir/token" --workspace "$dir/ws" -q)

ip netns exec "$ns_s" timeout -k 5 150 "$BUILD/shoal" proc "${args[@]}" --rank 1 \
  >"$dir/server.out" 2>"$dir/server.err" &
server_pid=$!

# the server rank listens on its hostfile address only
listen=
for _ in $(seq 100); do
  listen=$(ip netns exec "$ns_s" ss -Htln "sport = :$port" | awk '{ print $4 }')
  [ -n "$listen" ] && break
  kill -0 "$server_pid" 2>/dev/null || break
  sleep 0.2
done
[ -n "$listen" ] || { cat "$dir/server.err"; fail "rank 1 never listened on port $port"; }
[ "$listen" = "10.200.0.2:$port" ] || fail "rank 1 listens on $listen, not on 10.200.0.2:$port"
echo "server rank listens on $listen"

rc=0
ip netns exec "$ns_w" timeout -k 5 150 "$BUILD/shoal" proc "${args[@]}" --rank 0 \
  >"$dir/worker.out" 2>"$dir/worker.err" || rc=$?
cat "$dir/worker.out"
[ "$rc" -eq 0 ] || { tail -20 "$dir/worker.err"; fail "the worker rank exited with $rc"; }
src=$server_pid
server_pid=
rc=0
wait "$src" || rc=$?
cat "$dir/server.out"
[ "$rc" -eq 0 ] || { tail -20 "$dir/server.err"; fail "the server rank exited with $rc"; }
grep -qx 'rank 1: servers done' "$dir/server.out" || fail "no 'rank 1: servers done'"

line=$(grep -E '^rank 0: group 0 worker 0: 600 steps at [0-9]+ samples/s, test accuracy ' "$dir/worker.out") \
  || fail "no result line of rank 0"
acc=${line##* }
awk -v a="$acc" 'BEGIN { exit !(a >= 0.80) }' || fail "accuracy $acc below 0.80"
grep -q '"group":0,"worker":0,"phase":"test"' "$dir/ws/metrics.jsonl" || fail "no test line in metrics.jsonl"
echo "multihost over netns: accuracy $acc, ok"

# a group spread over the two "hosts" (fc1 split by feature, a worker and a
# server on each, AllReduce's layout): bridge messages cross the link too
small_job_conf "$dir/spread.conf" conf/allreduce.conf
sed -i 's/^\[layer fc1\]$/[layer fc1]\npartition_dim = 1/' "$dir/spread.conf"
grep -q '^partition_dim = 1$' "$dir/spread.conf" || fail "no [layer fc1] in the MLP example"
args=("$dir/spread.conf" --hostfile "$dir/hosts" --token-file "$dir/token" --workspace "$dir/spread" -q)
ip netns exec "$ns_s" timeout -k 5 150 "$BUILD/shoal" proc "${args[@]}" --rank 1 \
  >"$dir/follower.out" 2>"$dir/follower.err" &
server_pid=$!
rc=0
ip netns exec "$ns_w" timeout -k 5 150 "$BUILD/shoal" proc "${args[@]}" --rank 0 \
  >"$dir/leader.out" 2>"$dir/leader.err" || rc=$?
cat "$dir/leader.out"
[ "$rc" -eq 0 ] || { tail -20 "$dir/leader.err"; fail "the leader rank exited with $rc"; }
src=$server_pid
server_pid=
rc=0
wait "$src" || rc=$?
cat "$dir/follower.out"
[ "$rc" -eq 0 ] || { tail -20 "$dir/follower.err"; fail "the follower rank exited with $rc"; }
grep -qx "rank 1: group 0 from worker 1: ran its leader's steps" "$dir/follower.out" || fail "rank 1 did not follow"
line=$(grep -E '^rank 0: group 0 worker 0: 600 steps at [0-9]+ samples/s, test accuracy ' "$dir/leader.out") \
  || fail "no result line of the leader"
acc=${line##* }
awk -v a="$acc" 'BEGIN { exit !(a >= 0.80) }' || fail "spread group: accuracy $acc below 0.80"
echo "spread group over netns: accuracy $acc, ok"
