#!/usr/bin/env bash
# Bounds on what a conf may start (issue 12, item 9): more processes or
# worker threads per core than [cluster] max_procs_per_core is refused
# with the numbers and the flag that starts them anyway, before anything
# is forked or written; --oversubscribe starts them.  (The RPC server's
# connection cap: test_rpc /rpc/connection-cap.)
# Usage: bounds.sh BUILD
set -euo pipefail
BUILD=$(cd "${1:-build}" && pwd)
cd "$(dirname "$0")/../.."
source test/e2e/lib/time_scale.sh "$BUILD"
fail() { echo "FAIL: $*"; exit 1; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cores=$(nproc)
s=$([ "$cores" -eq 1 ] && echo "" || echo s)

# 4096 worker groups, one process each, and a server process
rc=0
timeout -k 5 "$(scaled 60)" "$BUILD/shoal" run examples/fashion-mnist/mlp.conf -o cluster.nworker_groups=4096 \
  -o cluster.server_worker_separate=true -q --workspace "$dir/procs" >"$dir/procs.out" 2>&1 || rc=$?
cat "$dir/procs.out"
[ "$rc" -eq 1 ] || fail "procs: exit $rc, expected 1"
grep -qxF "shoal run: examples/fashion-mnist/mlp.conf: [cluster] max_procs_per_core: this machine would run 4097 processes of the job on $cores core$s, more than 8 per core; give --oversubscribe to start them anyway (they share the cores and each runs that much slower)" \
  "$dir/procs.out" || fail "procs: message"
[ ! -e "$dir/procs" ] || fail "procs: the workspace was written"

# threads of one process
threads=$((cores * 8 + 1))
rc=0
timeout -k 5 "$(scaled 60)" "$BUILD/shoal" run examples/fashion-mnist/mlp.conf -o cluster.nworker_groups=$threads \
  -o cluster.nworkers_per_procs=$threads -q --workspace "$dir/threads" >"$dir/threads.out" 2>&1 || rc=$?
cat "$dir/threads.out"
[ "$rc" -eq 1 ] || fail "threads: exit $rc, expected 1"
grep -qxF "shoal run: examples/fashion-mnist/mlp.conf: [cluster] max_procs_per_core: this machine would run $threads worker threads of the job on $cores core$s, more than 8 per core; give --oversubscribe to start them anyway (they share the cores and each runs that much slower)" \
  "$dir/threads.out" || fail "threads: message"

# deliberately: --oversubscribe starts them (a few steps)
timeout -k 5 "$(scaled 120)" "$BUILD/shoal" run examples/fashion-mnist/mlp.conf -o cluster.nworker_groups=$threads \
  -o cluster.nworkers_per_procs=$threads -o job.epochs=0 -o job.train_steps=2 -o job.test_freq=0 \
  -o job.test_steps=1 --oversubscribe -q --workspace "$dir/forced" >"$dir/forced.out" 2>&1 \
  || { cat "$dir/forced.out"; fail "forced: --oversubscribe did not run"; }
echo "bounds: ok"
