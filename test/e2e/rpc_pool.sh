#!/usr/bin/env bash
# The RPC server's call threads (rpc/listener.h) under a synchronous job
# whose calls wait for each other: Sandblaster with its 3 workers in 3
# processes and the servers in a fourth, each server keeping a single
# call thread ([cluster] rpc_threads = 1).  Every step, each worker's
# push_pull waits in the server until the other two pushed, so the step
# gets through only if the pool grows beyond its one thread; the run
# must train to the bar and the servers' log must say the pool grew.
# (The topology_*.sh tests run every scheme with rpc_threads = 1 too.)
# Usage: rpc_pool.sh BUILD
set -euo pipefail
build=${1:-build}
source test/e2e/lib/time_scale.sh "$build"
[ -d build/data/fashion-mnist/train ] || { echo "no build/data/fashion-mnist: run make data"; exit 1; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
sed 's/^nworkers_per_group = .*/nworkers_per_group = 3/; s/^nworkers_per_procs = .*/nworkers_per_procs = 1/' \
  conf/sandblaster.conf >"$dir/sandblaster3.conf"
rc=0
G_MESSAGES_DEBUG=all timeout -k 10 "$(scaled 150)" "$build/shoal" run examples/fashion-mnist/mlp.conf \
  --topology "$dir/sandblaster3.conf" -o job.epochs=0 -o job.train_steps=300 -o job.test_freq=0 \
  -o job.test_steps=30 -o 'layer data.batch_size=66' -o 'layer fc1.num_output=64' -o 'layer fc2.num_output=64' \
  -o cluster.rpc_threads=1 --workspace "$dir/ws" >"$dir/out" 2>"$dir/err" || rc=$?
grep -v 'DEBUG' "$dir/out" || true
[ "$rc" -eq 0 ] || { tail -30 "$dir/err"; echo "FAIL: shoal run exited with $rc"; exit 1; }
for r in 0 1 2 3; do
  grep -qE "^rank $r \(.*\): exit 0$" "$dir/out" || { echo "FAIL: no 'rank $r (...): exit 0' line"; exit 1; }
done
acc=$(sed -n 's/^final test accuracy: //p' "$dir/out")
awk -v a="$acc" 'BEGIN { exit !(a >= 0.75) }' || { echo "FAIL: accuracy '$acc' below the bar 0.75"; exit 1; }
# GLib writes debug lines to stdout
grew=$(cat "$dir/out" "$dir/err" | grep -c 'shoal-rpc-call: .* with every thread busy: .* more threads' || true)
[ "$grew" -ge 1 ] || { echo "FAIL: the servers' call pool never grew past rpc_threads = 1"; exit 1; }
cat "$dir/out" "$dir/err" | grep 'shoal-rpc-call: .* with every thread busy' | sed 's/^.*DEBUG: [0-9:.]*: //' | sort | uniq -c
echo "ok: Sandblaster with 3 worker processes against 1 kept call thread: accuracy $acc"
