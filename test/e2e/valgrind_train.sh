#!/usr/bin/env bash
# Valgrind memcheck of short training runs of the Fashion-MNIST MLP (small
# layers, 20 steps and a 2-batch test pass): one worker, then one process
# with 2 worker threads and 2 servers (in-process AllReduce).  Each run must
# end with "definitely lost: 0 bytes" and no memcheck error (invalid
# access, use of uninitialised values, bad free).  No suppressions are
# needed: GLib's type system and OpenBLAS keep their one-time allocations
# reachable ("still reachable"), which is not a leak.
# Valgrind cannot run a sanitizer build: plain builds only.
# suite: plain
# Usage: valgrind_train.sh BUILD
set -euo pipefail
build=${1:-build}
if ! command -v valgrind >/dev/null; then
  echo "SKIP: valgrind is not installed (make deps installs it)"
  exit 77
fi
[ -d build/data/fashion-mnist/train ] || { echo "no build/data/fashion-mnist: run make data"; exit 1; }
ws=$(mktemp -d)
trap 'rm -rf "$ws"' EXIT
# GLib's slice allocator would hide leaks and misuse behind its magazines
export G_SLICE=always-malloc

small=(-o job.epochs=0 -o job.train_steps=20 -o job.test_steps=2 -o job.disp_freq=10
       -o job.threads=1 -o 'layer fc1.num_output=64' -o 'layer fc2.num_output=32')
threads=(-o cluster.nworkers_per_group=2 -o cluster.nworkers_per_procs=2
         -o cluster.nservers_per_group=2 -o cluster.nservers_per_procs=2)

check() {
  local name=$1
  shift
  local log="$ws/$name.log" rc=0
  valgrind --leak-check=full --errors-for-leak-kinds=definite --error-exitcode=99 \
    --num-callers=30 "$build/shoal" run examples/fashion-mnist/mlp.conf "${small[@]}" "$@" \
    --workspace "$ws/$name" >"$log" 2>&1 || rc=$?
  grep -E 'trained|final test|definitely lost|ERROR SUMMARY' "$log" | sed "s/^/$name: /"
  if [ "$rc" -ne 0 ] || ! grep -q 'definitely lost: 0 bytes in 0 blocks' "$log" \
     || ! grep -q 'ERROR SUMMARY: 0 errors' "$log" || ! grep -q '^final test accuracy' "$log"; then
    echo "FAIL: $name (exit $rc)"
    grep -vE '^\*\* Message' "$log" | tail -60
    return 1
  fi
}

check one_worker
check two_workers "${threads[@]}"
echo "valgrind: no leaks, no errors"
