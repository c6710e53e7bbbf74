#!/usr/bin/env bash
# Batch normalisation under every scheme (issue 12, item 12).  A BN net's
# running statistics are the unit's own (core/param_statistics.c): no
# server holds them, so no pull can overwrite them.  They once lay in
# server slices, where nothing updated them, and every scheme with
# servers tested with nearly the initial statistics (this net: 0.86 in
# one process, 0.75-0.81 elsewhere).  For the MLP with a batchnorm after
# fc1 (test/e2e/lib/bn_mlp.conf), under Sandblaster with its servers in
# another process, AllReduce, Downpour, Hogwild and a group of 2 workers
# spread over processes, each checks:
#   - the final test accuracy is within 0.03 of the one-process run's;
#   - the statistics the test pass read (the params the run saved, which
#     shoal eval loads) are what the workers computed: per channel, the
#     running mean within 0.1 data std of fc1's batch mean at the same
#     weights and the running variance within 15 % of its batch variance
#     (test/e2e/lib/bn_stats.c; the initial statistics are ~0.45 std off);
#   - `shoal eval --from WS` prints the run's final test numbers (group
#     0's first unit wrote the params; its test pass read the same).
# The spread group's statistics equal those of the same group in one
# process to the bit.
set -euo pipefail
BUILD=$(cd "${1:-build}" && pwd)
cd "$(dirname "$0")/../.."
source test/e2e/lib/time_scale.sh "$BUILD"
source test/e2e/lib/topology.sh   # fail
source test/e2e/lib/bn_stats.sh   # build_bn_stats
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
build_bn_stats "$dir/bn_stats"

conf=test/e2e/lib/bn_mlp.conf
args=(-o job.epochs=0 -o job.train_steps=600 -o job.test_freq=0 -o job.test_steps=0 -o job.disp_freq=100
      -o 'layer fc1.num_output=256' -o 'layer fc2.num_output=256' -o 'updater.step_list=0, 400' -q)

run () {  # NAME ARGS...: trains into $dir/NAME, checks statistics and eval, prints the accuracy
  local name=$1 ws=$dir/$1
  shift
  timeout -k 10 "$(scaled 200)" "$BUILD/shoal" run "$conf" "${args[@]}" "$@" --workspace "$ws" >"$dir/$name.out" 2>&1 \
    || { cat "$dir/$name.out" >&2; fail "$name: shoal run failed"; }
  local line loss acc stats
  line=$(grep '"phase":"test"' "$ws/metrics.jsonl" | grep '"group":0,"worker":0' | tail -1)
  loss=$(echo "$line" | sed 's/.*"loss":\([^,}]*\).*/\1/')
  acc=$(echo "$line" | sed 's/.*"accuracy":\([^,}]*\).*/\1/')
  stats=$("$dir/bn_stats" "$ws/job.conf" "$ws" bn1 fc1 40) || fail "$name: bn_stats"
  echo "$name: accuracy $acc, loss $loss; statistics: $stats" >&2
  awk -v s="$stats" 'BEGIN { split (s, f, " "); exit !(f[2] < 0.1 && f[4] < 0.15) }' \
    || fail "$name: the saved running statistics are not what the workers computed ($stats)"
  "$BUILD/shoal" eval "$ws/job.conf" --from "$ws" >"$dir/$name.eval" 2>&1 || { cat "$dir/$name.eval"; fail "$name: eval"; }
  grep -qx "test loss: $(printf '%.6f' "$loss")" "$dir/$name.eval" \
    && grep -qx "test accuracy: $(printf '%.4f' "$acc")" "$dir/$name.eval" \
    || { cat "$dir/$name.eval"; fail "$name: shoal eval differs from the run's final test ($loss, $acc)"; }
  echo "$acc"
}

near () {  # NAME ACC: within 0.03 of the one-process run
  awk -v a="$2" -v b="$one" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 0.03) }' \
    || fail "$1: test accuracy $2, one process $one"
}

one=$(run one)
# (the other layers by batch in both groups: a spread group splits by batch
# only, and the in-process group's default, auto, would split fc2 by feature)
feature=(-o 'layer fc1.partition_dim=1' -o 'layer bn1.partition_dim=1' -o 'layer relu1.partition_dim=1'
         -o cluster.partition_dim=0)
for scheme in sandblaster allreduce downpour hogwild; do
  acc=$(run "$scheme" --topology "conf/$scheme.conf")
  near "$scheme" "$acc"
done
# a group of 2 spread over 2 processes (fc1, bn1 split by feature: each
# worker computes its channels' statistics, the leader gathers them),
# its servers in a third
acc=$(run spread "${feature[@]}" -o cluster.nworkers_per_group=2 -o cluster.nworkers_per_procs=1 \
  -o cluster.server_worker_separate=true)
grep -q "rank 1: group 0 from worker 1: ran its leader's steps" "$dir/spread.out" || fail "spread: not a spread group"
near spread "$acc"
# ... and the same group in one process computes the same statistics, to the bit
run group "${feature[@]}" -o cluster.nworkers_per_group=2 -o cluster.nworkers_per_procs=2 \
  -o cluster.server_worker_separate=true >/dev/null
digest () { "$dir/bn_stats" "$dir/$1/job.conf" "$dir/$1" bn1 fc1 1 | sed 's/.*digest //'; }
[ "$(digest spread)" = "$(digest group)" ] || fail "the spread group's statistics differ from the group's in one process"
echo "bn_schemes: ok (one process $one)"
