#!/usr/bin/env bash
# marks: threads
# Short training runs under ThreadSanitizer: one process with 2 worker
# threads and 2 servers, then each conf/ topology (Sandblaster, AllReduce,
# Downpour, Hogwild: worker, comm, server, RPC and sync threads in several
# processes on loopback).  Tiny layers and 60 steps: the point is the
# threads meeting, not accuracy.  Any TSan report fails the run (the
# processes exit 66).  Only in a TSan build: make SANITIZE=thread test-threads.
# suite: thread
# Usage: tsan_train.sh BUILD
set -euo pipefail
build=${1:-build}
source test/e2e/lib/time_scale.sh "$build"
[ -d build/data/fashion-mnist/train ] || { echo "no build/data/fashion-mnist: run make data"; exit 1; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
small=(-o job.epochs=0 -o job.train_steps=60 -o job.test_steps=2 -o job.disp_freq=20
       -o 'layer fc1.num_output=32' -o 'layer fc2.num_output=32')
failures=0

run() {
  local name=$1 rc=0 start=$SECONDS
  shift
  timeout -k 10 "$(scaled 240)" "$build/shoal" run examples/fashion-mnist/mlp.conf "${small[@]}" "$@" \
    --workspace "$dir/$name" >"$dir/$name.out" 2>"$dir/$name.err" || rc=$?
  if [ "$rc" -eq 0 ] && ! grep -q 'ThreadSanitizer' "$dir/$name.err" \
     && grep -q '^final test accuracy' "$dir/$name.out"; then
    echo "ok: $name ($((SECONDS - start)) s)"
  else
    echo "FAIL: $name: exit $rc"
    grep -A40 'WARNING: ThreadSanitizer' "$dir/$name.err" | head -80 || tail -20 "$dir/$name.err"
    failures=$((failures + 1))
  fi
}

run in_process -o cluster.nworkers_per_group=2 -o cluster.nworkers_per_procs=2 \
  -o cluster.nservers_per_group=2 -o cluster.nservers_per_procs=2
for scheme in sandblaster allreduce downpour hogwild; do
  run "$scheme" --topology "conf/$scheme.conf"
done
[ "$failures" -eq 0 ]
