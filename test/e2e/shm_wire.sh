#!/usr/bin/env bash
# Slices through shared memory ([cluster] shared_memory = auto, the
# default) against the socket (off): the same job ends with the same
# params to the bit (shoal eval's sha256 of them), since the servers do
# the same arithmetic on the same floats in the same order; only where
# the bytes travel differs.  Sandblaster (servers in a process of their
# own) also equals the run in one process.  AllReduce (k = 2, a server
# beside each worker) sums two gradients per slice, which is exact in
# either order, so it is bit-identical too.  A worker that claims another
# host (SHOAL_INJECT_HOST_ID) is refused the region and falls back to the
# socket, with the same params.  Downpour (asynchronous, not
# reproducible run to run) through shared memory trains to the bar.
set -euo pipefail
build=${1:-build}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail () { echo "shm_wire: $*" >&2; exit 1; }

common=(-o job.epochs=0 -o job.train_steps=40 -o job.test_freq=0 -o job.disp_freq=20
        -o 'layer data.shuffle=false' -o 'layer fc1.num_output=128' -o 'layer fc2.num_output=96')

run () {  # name [options ...]: prints the params' digest
  local name=$1
  shift
  G_MESSAGES_DEBUG=all "$build/shoal" run examples/fashion-mnist/mlp.conf "${common[@]}" "$@" \
    --workspace "$dir/$name" >"$dir/$name.out" 2>&1 || { tail -20 "$dir/$name.out"; fail "$name failed"; }
  "$build/shoal" eval "$dir/$name/job.conf" --from "$dir/$name" | sed -n 's/^params: //p'
}
uses_shm () { grep -q "slices move through shared memory" "$dir/$1.out"; }

one=$(run one)
sb_shm=$(run sb_shm -o cluster.server_worker_separate=true)
sb_sock=$(run sb_sock -o cluster.server_worker_separate=true -o cluster.shared_memory=off)
sb_away=$(SHOAL_INJECT_HOST_ID=elsewhere run sb_away -o cluster.server_worker_separate=true)
echo "one process:                  $one"
echo "Sandblaster, shared memory:   $sb_shm"
echo "Sandblaster, socket:          $sb_sock"
echo "Sandblaster, 'another host':  $sb_away"
uses_shm sb_shm || fail "Sandblaster did not use shared memory"
! uses_shm sb_sock || fail "shared_memory = off used shared memory"
! uses_shm sb_away || fail "a worker of 'another host' used shared memory"
grep -q "no shared memory (.*another host" "$dir/sb_away.out" || fail "no fallback message"
[ -n "$one" ] && [ "$sb_shm" = "$one" ] && [ "$sb_sock" = "$one" ] && [ "$sb_away" = "$one" ] \
  || fail "Sandblaster's params differ between the paths"

ar=(--topology conf/allreduce.conf)
ar_shm=$(run ar_shm "${ar[@]}")
ar_sock=$(run ar_sock "${ar[@]}" -o cluster.shared_memory=off)
echo "AllReduce, shared memory:     $ar_shm"
echo "AllReduce, socket:            $ar_sock"
uses_shm ar_shm || fail "AllReduce did not use shared memory"
[ "$ar_shm" = "$ar_sock" ] || fail "AllReduce's params differ between the paths"

G_MESSAGES_DEBUG=all "$build/shoal" run examples/fashion-mnist/mlp.conf --topology conf/downpour.conf \
  -o job.epochs=0 -o job.train_steps=300 -o job.test_freq=0 -o job.disp_freq=100 \
  --workspace "$dir/dp" >"$dir/dp.out" 2>&1 || { tail -20 "$dir/dp.out"; fail "Downpour failed"; }
uses_shm dp || fail "Downpour did not use shared memory"
acc=$(sed -n 's/^final test accuracy: //p' "$dir/dp.out")
awk -v a="$acc" 'BEGIN { exit !(a >= 0.78) }' || fail "Downpour through shared memory: accuracy $acc below 0.78"
echo "Downpour through shared memory: accuracy $acc"
echo "shm_wire: ok"
