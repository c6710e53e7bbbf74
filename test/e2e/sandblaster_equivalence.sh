#!/usr/bin/env bash
# Sandblaster with k workers and batch B gives the same params after N
# steps as one worker with batch B (batch_size is the group's batch).  With
# shuffling off, worker w's shard (records w, w+k, ...) makes its share of
# every batch and the k shares make up the single worker's batch.  A group
# in one process sums its workers' gradients (a partitioned net, batch
# split) and pushes once; a group spread over processes pushes per worker
# and the server averages.  Compared through the final test loss and
# accuracy on the whole test set.
set -euo pipefail
build=${1:-build}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

common=(-o job.epochs=0 -o job.train_steps=30 -o job.test_freq=0 -o job.disp_freq=10
        -o 'layer data.shuffle=false' -o 'layer fc1.num_output=128' -o 'layer fc2.num_output=128' -q)

run () {  # name batch workers_per_group workers_per_proc [more -o ...]
  local name=$1 batch=$2 k=$3 per=$4
  shift 4
  "$build/shoal" run examples/fashion-mnist/mlp.conf "${common[@]}" -o "layer data.batch_size=$batch" \
    -o cluster.nworkers_per_group="$k" -o cluster.nworkers_per_procs="$per" "$@" \
    --workspace "$dir/$name" >"$dir/$name.out" 2>&1 || { cat "$dir/$name.out"; exit 1; }
  grep '"phase":"test"' "$dir/$name/metrics.jsonl" | grep '"group":0,"worker":0' | tail -1 \
    | sed 's/.*"loss":\([^,}]*\).*"accuracy":\([^,}]*\).*/\1 \2/'
}

one=$(run one 64 1 1)
two=$(run two 64 2 2)
three=$(run three 64 3 3)
four=$(run four 64 4 4)
# over Thrift: the servers in a process of their own, and each worker in a
# process of its own too
remote=$(run remote 64 2 2 -o cluster.server_worker_separate=true -o cluster.nservers_per_group=2 \
  -o cluster.nservers_per_procs=2)
spread=$(run spread 64 2 1 -o cluster.server_worker_separate=true)
echo "1 worker: $one"
echo "2 workers: $two"
echo "3 workers (uneven rows): $three"
echo "4 workers: $four"
echo "2 workers, separate server process: $remote"
echo "2 workers, a process per worker and one for the server: $spread"
for other in "$two" "$three" "$four" "$remote" "$spread"; do
  awk -v a="$one" -v b="$other" 'BEGIN {
    split(a, x, " "); split(b, y, " ");
    rel = (x[1] - y[1]) / x[1]; if (rel < 0) rel = -rel;
    if (rel > 1e-4 || x[2] != y[2]) { print "differ: " a " vs " b; exit 1 } }'
done
