#!/usr/bin/env bash
# Orphaned ranks end (issue 23, item 4): a Downpour run whose links stall
# ([emulate] bandwidth_mbit = 1e-9: nothing gets through), then SIGTERM to
# the launcher and SIGKILL before it can escalate.  Every rank was told to
# stop (the launcher's forward, or the kernel's parent-death signal) and
# waits on links that never deliver: each must end once [cluster]
# stop_timeout (here 2 s) has passed, saying why.  The wait below is a
# bound on a hang, not a timing check: 60 s.
set -euo pipefail
BUILD=$(cd "${1:-build}" && pwd)
cd "$(dirname "$0")/../.."
source test/e2e/lib/time_scale.sh "$BUILD"
source test/e2e/lib/topology.sh
dir=$(mktemp -d)
cleanup() {
  local pids
  pids=$(pgrep -f -- "$dir/" || true)
  [ -n "$pids" ] && kill -KILL $pids 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT
ws=$dir/ws
"$BUILD/shoal" run examples/fashion-mnist/mlp.conf --topology conf/downpour.conf "${TOPOLOGY_ARGS[@]}" \
  -o job.train_steps=100000 -o emulate.bandwidth_mbit=1e-9 -o cluster.stop_timeout=2 \
  --workspace "$ws" >"$dir/out" 2>"$dir/err" &
launcher=$!
for _ in $(seq "$(scaled 600)"); do  # every rank started (bounded: 60 s)
  [ "$(pgrep -fc -- "proc $ws/job.conf" || true)" -eq 3 ] && break
  sleep 0.1
done
[ "$(pgrep -fc -- "proc $ws/job.conf" || true)" -eq 3 ] || { cat "$dir/err"; fail "the ranks did not start"; }
sleep 1  # into their first fetch, which the stalled links never deliver
kill -TERM "$launcher"
sleep 0.2
kill -KILL "$launcher"
wait "$launcher" 2>/dev/null || true
for _ in $(seq "$(scaled 600)"); do
  pgrep -f -- "proc $ws/job.conf" >/dev/null || break
  sleep 0.1
done
if pgrep -f -- "proc $ws/job.conf" >/dev/null; then
  pgrep -fa -- "proc $ws/job.conf"
  fail "ranks outlived their launcher by $(scaled 60) s"
fi
n=$(grep -c "the stop did not end within \[cluster\] stop_timeout" "$dir/err" || true)
[ "$n" -ge 1 ] || { cat "$dir/err"; fail "no rank said why it ended"; }
echo "orphans: 0 ranks left ($n ended at stop_timeout)"
