#!/usr/bin/env bash
# Two "hosts" without a second machine: two network namespaces joined by a
# veth pair, 10.200.0.1 (workers) and 10.200.0.2 (servers), each seeing
# only its own address and loopback.  The Sandblaster layout runs its
# server rank in one and its worker rank in the other, both started by
# hand with `shoal proc --hostfile`, so every call crosses the link; the
# server must listen on its host's address from the hostfile, not on
# 0.0.0.0 or loopback.  The two "hosts" claim different host ids
# (SHOAL_INJECT_HOST_ID), so no shared memory stands in for the link.
# TLS ([tls], docs/SECURITY.md): with no credentials the ranks refuse to
# start (the default mode puts TLS on links between hosts); in clear
# (mode = off) and with the job's certificates from `shoal certs` the
# Sandblaster run trains to the same accuracy; a rank holding another
# job's certificates is refused by its peer, and says why.  Then a
# worker group spread over both "hosts" (bridges between them) trains
# over TLS too.  Skipped (exit 77) where namespaces
# cannot be made (no root and no sudo -n, a container without CAP_SYS_ADMIN).
# may-skip-in-ci: a container without CAP_SYS_ADMIN cannot make namespaces; no package gives that  Usage: multihost_netns.sh BUILD
set -euo pipefail
source "$(dirname "$0")/lib/as_root.sh" "$@"
BUILD=$(cd "${1:-build}" && pwd)
cd "$(dirname "$0")/../.."
source test/e2e/lib/time_scale.sh "$BUILD"
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
"$BUILD/shoal" certs "$dir/job.conf" --out "$dir/tls" >/dev/null || fail "shoal certs failed"
"$BUILD/shoal" certs --ranks 2 --name other --out "$dir/other-tls" >/dev/null || fail "shoal certs --ranks failed"
[ "$(stat -c %a "$dir/tls")" = 700 ] && [ "$(stat -c %a "$dir/tls/rank-0.key")" = 600 ] \
  || fail "shoal certs: the directory or a key is readable by others"
[ ! -e "$dir/tls/ca.key" ] || fail "shoal certs kept the CA's key"

# in_ns SIDE CMD...: CMD in the workers' (w) or servers' (s) "host"
in_ns() {
  local side=$1
  shift
  local ns=$ns_w
  [ "$side" = s ] && ns=$ns_s
  ip netns exec "$ns" env SHOAL_INJECT_HOST_ID="e2e-host-$side" timeout -k 5 "$(scaled 150)" "$@"
}

# run_pair NAME CONF EXTRA...: rank 1 (servers) in its "host", rank 0 in
# the other; both must exit 0.  Leaves NAME.{out,err} of each rank.
run_pair() {
  local name=$1 conf=$2
  shift 2
  local args=("$conf" --hostfile "$dir/hosts" --token-file "$dir/token" --workspace "$dir/$name" -q "$@")
  in_ns s "$BUILD/shoal" proc "${args[@]}" --rank 1 >"$dir/$name-1.out" 2>"$dir/$name-1.err" &
  server_pid=$!
  local rc=0
  in_ns w "$BUILD/shoal" proc "${args[@]}" --rank 0 >"$dir/$name-0.out" 2>"$dir/$name-0.err" || rc=$?
  cat "$dir/$name-0.out"
  [ "$rc" -eq 0 ] || { tail -20 "$dir/$name-0.err"; echo "rank 1:"; tail -20 "$dir/$name-1.err"; fail "$name: rank 0 exited with $rc"; }
  local src=$server_pid
  server_pid=
  rc=0
  wait "$src" || rc=$?
  cat "$dir/$name-1.out"
  [ "$rc" -eq 0 ] || { tail -20 "$dir/$name-1.err"; fail "$name: rank 1 exited with $rc"; }
}

# accuracy NAME: rank 0's test accuracy, at least 0.80
accuracy() {
  local line acc
  line=$(grep -E '^rank 0: group 0 worker 0: 600 steps at [0-9]+ samples/s, test accuracy ' "$dir/$1-0.out") \
    || fail "$1: no result line of rank 0"
  acc=${line##* }
  awk -v a="$acc" 'BEGIN { exit !(a >= 0.80) }' || fail "$1: accuracy $acc below 0.80"
  echo "$acc"
}

# no credentials: refused before training, naming the way out
rc=0
in_ns s "$BUILD/shoal" proc "$dir/job.conf" --hostfile "$dir/hosts" --token-file "$dir/token" \
  --workspace "$dir/none" -q --rank 1 >/dev/null 2>"$dir/none.err" || rc=$?
[ "$rc" -ne 0 ] || fail "two hosts without TLS credentials: rank 1 started"
grep -q 'tls\] mode: hosts: the ranks talk over the network between hosts (10.200.0.1, 10.200.0.2).*shoal certs' \
  "$dir/none.err" || { cat "$dir/none.err"; fail "no credentials: the error does not say what to do"; }
echo "no credentials: refused ($(head -c 120 "$dir/none.err")...)"

# in clear, then over TLS: the same training
sed 's/^\[job\]$/[tls]\nmode = off\n\n[job]/' "$dir/job.conf" >"$dir/clear.conf"
run_pair clear "$dir/clear.conf"
grep -q '^rank 1: servers done$' "$dir/clear-1.out" || fail "no 'rank 1: servers done'"
# the server rank listened on its hostfile address only (it logged nothing else; ss saw it while it ran)
acc_clear=$(accuracy clear)
run_pair tls "$dir/job.conf" --tls-dir "$dir/tls" &
pair_pid=$!
listen=
for _ in $(seq "$(scaled 100)"); do
  listen=$(ip netns exec "$ns_s" ss -Htln "sport = :$port" | awk '{ print $4 }')
  [ -n "$listen" ] && break
  kill -0 "$pair_pid" 2>/dev/null || break
  sleep 0.2
done
rc=0
wait "$pair_pid" || rc=$?
[ "$rc" -eq 0 ] || fail "the TLS run failed"
[ -n "$listen" ] || fail "rank 1 never listened on port $port"
[ "$listen" = "10.200.0.2:$port" ] || fail "rank 1 listens on $listen, not on 10.200.0.2:$port"
echo "server rank listens on $listen"
grep -q 'links between hosts run TLS 1.3' "$dir/tls-0.err" || fail "rank 0 did not say its links run TLS"
acc_tls=$(accuracy tls)
grep -q '"group":0,"worker":0,"phase":"test"' "$dir/tls/../tls/metrics.jsonl" 2>/dev/null \
  || grep -q '"group":0,"worker":0,"phase":"test"' "$dir/tls/metrics.jsonl" 2>/dev/null || true
awk -v a="$acc_clear" -v b="$acc_tls" 'BEGIN { d = a - b; exit !(d <= 0.01 && d >= -0.01) }' \
  || fail "TLS accuracy $acc_tls, in clear $acc_clear: not the same training"
echo "multihost over netns: accuracy $acc_clear in clear, $acc_tls over TLS, ok"

# another job's certificates: rank 0 refuses rank 1's certificate and
# stops; rank 1 never hears from it and ends after progress_timeout (3 s
# here), naming what it dropped from rank 0's host (it said only "never
# heard from ... (it did not start, or cannot reach this process)")
cp "$dir/job.conf" "$dir/intruder.conf"
printf 'progress_timeout = 3\n' >>"$dir/intruder.conf"   # the conf ends in its [cluster]
in_ns s "$BUILD/shoal" proc "$dir/intruder.conf" --hostfile "$dir/hosts" --token-file "$dir/token" \
  --workspace "$dir/intruder" -q --rank 1 --tls-dir "$dir/tls" >/dev/null 2>"$dir/intruder-1.err" &
server_pid=$!
rc=0
in_ns w "$BUILD/shoal" proc "$dir/job.conf" --hostfile "$dir/hosts" --token-file "$dir/token" \
  --workspace "$dir/intruder" -q --rank 0 --tls-dir "$dir/other-tls" >/dev/null 2>"$dir/intruder-0.err" || rc=$?
[ "$rc" -ne 0 ] || fail "a rank with another job's certificates trained"
grep -q "the peer's certificate is refused: not issued by this job's CA" "$dir/intruder-0.err" \
  || { tail -5 "$dir/intruder-0.err"; fail "the intruder's error does not say why"; }
for _ in $(seq "$(scaled 50)"); do
  grep -q 'TLS handshake: the peer refused this rank' "$dir/intruder-1.err" && break
  sleep 0.1
done
grep -q 'TLS handshake: the peer refused this rank' "$dir/intruder-1.err" \
  || { tail -5 "$dir/intruder-1.err"; fail "the server rank did not log the refused handshake"; }
rc=0
wait "$server_pid" || rc=$?
server_pid=
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] \
  || { tail -5 "$dir/intruder-1.err"; fail "the server rank of the refused job exited with $rc"; }
grep -qE "^shoal proc \(rank 1\): rank 0 \(2 workers of group 0\) on 10\.200\.0\.1 lost: never heard from in [0-9]+ s \(it did not start, or cannot reach this process\); this process dropped connections from its host: [0-9]+ from 10\.200\.0\.1 \(the last: TLS handshake: the peer refused this rank \(tlsv1 alert unknown ca\)\)" \
  "$dir/intruder-1.err" || { tail -3 "$dir/intruder-1.err"; fail "the server rank's last word does not name what it refused"; }
# its port free again before the next run takes it
for _ in $(seq "$(scaled 100)"); do
  [ -z "$(ip netns exec "$ns_s" ss -Htln "sport = :$port")" ] && break
  sleep 0.1
done
[ -z "$(ip netns exec "$ns_s" ss -Htln "sport = :$port")" ] || fail "the refused job's server rank did not end"
echo "another job's certificates: refused on both sides"

# a group spread over the two "hosts" (fc1 split by feature, a worker and a
# server on each, AllReduce's layout): bridge messages cross the link too
small_job_conf "$dir/spread.conf" conf/allreduce.conf
sed -i 's/^\[layer fc1\]$/[layer fc1]\npartition_dim = 1/' "$dir/spread.conf"
grep -q '^partition_dim = 1$' "$dir/spread.conf" || fail "no [layer fc1] in the MLP example"
run_pair spread "$dir/spread.conf" --tls-dir "$dir/tls"
grep -qx "rank 1: group 0 from worker 1: ran its leader's steps" "$dir/spread-1.out" || fail "rank 1 did not follow"
acc=$(accuracy spread)
echo "spread group over netns (TLS): accuracy $acc, ok"
