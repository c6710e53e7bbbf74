#!/usr/bin/env bash
# Resuming a BN net (issue 12, item 12): its running statistics are the
# units' own, saved with each unit's checkpoint state
# (partition/group_state.c), so a resumed run goes on from what the
# workers had computed, not from the initial statistics.
#   - Sandblaster with its servers in another process, and a group of 2
#     spread over 2 processes (bn1 split by feature: the leader saves the
#     follower's channels too): a run stopped at step 55 and resumed to
#     80 ends exactly as the uninterrupted run (test numbers and the
#     statistics' digest);
#   - Downpour: its groups push in whatever order they reach the servers,
#     so no two Downpour runs end with the same weights, and a resume
#     cannot be compared with an uninterrupted run.  What must be exact is
#     the state a unit goes on from: a run resumed at its last step (no
#     step left) saves the same statistics, to the bit, and a run
#     resumed to train on holds statistics that match its data
#     (test/e2e/lib/bn_stats.c, as bn_schemes.sh).
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
common=(-o job.epochs=0 -o job.test_freq=0 -o job.test_steps=40 -o job.disp_freq=10 -o job.checkpoint_freq=25
        -o 'layer fc1.num_output=128' -o 'layer fc2.num_output=128'
        -o updater.lr_list=0.05,0.01 -o 'updater.step_list=0,50' -q)

run () {  # WORKSPACE ARGS...
  local ws=$1
  shift
  timeout -k 10 "$(scaled 200)" "$BUILD/shoal" run "$conf" "${common[@]}" "$@" --workspace "$ws" >"$ws.out" 2>&1 \
    || { cat "$ws.out" >&2; fail "shoal run $* failed"; }
}
final () {  # the last test line of group 0's first unit: "loss accuracy"
  grep '"phase":"test"' "$1/metrics.jsonl" | grep '"group":0,"worker":0' | tail -1 \
    | sed 's/.*"loss":\([^,}]*\).*"accuracy":\([^,}]*\).*/\1 \2/'
}
stats () { "$dir/bn_stats" "$1/job.conf" "$1" bn1 fc1 "${2:-1}"; }
digest () { stats "$1" | sed 's/.*digest //'; }

exact () {  # NAME ARGS...: stopped at 55 and resumed to 80 == 80 at once
  local name=$1
  shift
  run "$dir/$name-whole" "$@" -o job.train_steps=80
  run "$dir/$name-part" "$@" -o job.train_steps=55
  run "$dir/$name-part" "$@" -o job.train_steps=80 --resume
  local a b
  a="$(final "$dir/$name-whole") $(digest "$dir/$name-whole")"
  b="$(final "$dir/$name-part") $(digest "$dir/$name-part")"
  echo "$name: uninterrupted $a"
  echo "$name: resumed       $b"
  [ "$a" = "$b" ] || fail "$name: the resumed run differs from the uninterrupted one"
}

exact sandblaster --topology conf/sandblaster.conf
exact spread -o 'layer fc1.partition_dim=1' -o 'layer bn1.partition_dim=1' -o 'layer relu1.partition_dim=1' \
  -o cluster.nworkers_per_group=2 -o cluster.nworkers_per_procs=1 -o cluster.server_worker_separate=true
grep -q "rank 1: group 0 from worker 1: ran its leader's steps" "$dir/spread-part.out" || fail "spread: not a spread group"

# Downpour
dp=(--topology conf/downpour.conf)
run "$dir/dp" "${dp[@]}" -o job.train_steps=60
before=$(digest "$dir/dp")
run "$dir/dp" "${dp[@]}" -o job.train_steps=60 --resume
after=$(digest "$dir/dp")
echo "downpour: statistics at step 60 $before, resumed at 60 $after"
[ "$before" = "$after" ] || fail "downpour: a run resumed at its last step saved other statistics"
run "$dir/dp" "${dp[@]}" -o job.train_steps=300 -o 'updater.step_list=0,50,200' -o updater.lr_list=0.05,0.01,0.002 --resume
s=$(stats "$dir/dp" 40)
echo "downpour: resumed to 300: $(final "$dir/dp"); statistics: $s"
awk -v s="$s" 'BEGIN { split (s, f, " "); exit !(f[2] < 0.1 && f[4] < 0.15) }' \
  || fail "downpour: the resumed run's statistics are not what its workers computed ($s)"
echo "bn_resume: ok"
