#!/usr/bin/env bash
# A process of servers alone, told to stop (SIGTERM: a scheduler
# preempting the node that holds only the job's servers) while its
# worker processes have not said they are done: it waits 5 s for them,
# then ends with exit 130 and says it stopped, as a worker process does.
# It said "servers done" and exited 0, so under `shoal run` the job
# failed blaming the workers that lost it ("1 of 2 processes failed;
# first rank 0 ...: exit 1") instead of stopping (exit 130, resumable).
# Usage: servers_stop.sh BUILD
set -euo pipefail
BUILD=$(cd "${1:-build}" && pwd)
cd "$(dirname "$0")/../.."
source test/e2e/lib/time_scale.sh "$BUILD"
source test/e2e/lib/topology.sh
dir=$(mktemp -d)
pid=
cleanup() {
  [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT

small_job_conf "$dir/job.conf" conf/sandblaster.conf
make_token "$dir/token"
base=$(free_ports_base 2)
# rank 1 holds the servers; rank 0 (the workers) is never started
"$BUILD/shoal" proc "$dir/job.conf" --rank 1 --hostfile <(printf '127.0.0.1\n127.0.0.1\n') --base-port "$base" \
  --token-file "$dir/token" --workspace "$dir/ws" -q >"$dir/out" 2>"$dir/err" &
pid=$!
for _ in $(seq "$(scaled 100)"); do
  ss -Htln "sport = :$((base + 1))" | grep -q . && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
ss -Htln "sport = :$((base + 1))" | grep -q . || { cat "$dir/err"; fail "rank 1 never listened"; }
kill -TERM "$pid"
timeout "$(scaled 30)" tail --pid="$pid" -f /dev/null || fail "rank 1 still runs $(scaled 30) s after SIGTERM"
rc=0
wait "$pid" || rc=$?
pid=
[ "$rc" -eq 130 ] || { cat "$dir/out" "$dir/err"; fail "rank 1 exited with $rc after SIGTERM, not 130"; }
grep -qx 'rank 1: servers stopped (a stop request) before every worker process was done' "$dir/out" \
  || { cat "$dir/out"; fail "rank 1 does not say it stopped"; }
echo "servers alone, SIGTERM: exit 130, '$(cat "$dir/out")'"
