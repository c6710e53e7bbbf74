#!/usr/bin/env bash
# A worker group spread over processes with feature and hybrid splits:
# bridges and the group's gradients cross processes over Thrift, and the
# group computes what it computes in one process.  N steps give the same
# final test loss and accuracy, to every printed digit:
#   - the MLP with fc1/relu1 split by feature and the rest by batch, k = 2:
#     one process; one process per worker with the server apart
#     (Sandblaster); k = 4 with two workers in each of two processes and
#     a server beside each (AllReduce's layout);
#   - the hybrid LeNet (examples/fashion-mnist/hybrid.conf) in one
#     process and under conf/allreduce.conf;
#   - a spread run that ends early and is resumed from its checkpoint;
# and Downpour and Hogwild with both groups spread train, and a killed
# follower fails its leader at once.
# The unpartitioned net agrees within float rounding (the in-process
# partition tests show why it is not to the bit: sums in another order).
set -euo pipefail
build=${1:-build}
source test/e2e/lib/time_scale.sh "$build"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

final () {  # the last test line of a workspace: "loss accuracy"
  grep '"phase":"test"' "$1/metrics.jsonl" | grep '"group":0,"worker":0' | tail -1 \
    | sed 's/.*"loss":\([^,}]*\).*"accuracy":\([^,}]*\).*/\1 \2/'
}

mlp=(examples/fashion-mnist/mlp.conf -o job.epochs=0 -o job.train_steps=30 -o job.test_freq=0
     -o job.disp_freq=10 -o 'layer data.shuffle=false' -o 'layer fc1.num_output=128'
     -o 'layer fc2.num_output=128' -o 'layer data.batch_size=64' -q)
split=(-o 'layer fc1.partition_dim=1' -o 'layer relu1.partition_dim=1' -o cluster.partition_dim=0)

run () {  # name conf-and-options...
  local name=$1
  shift
  timeout -k 10 "$(scaled 300)" "$build/shoal" run "$@" --workspace "$dir/$name" >"$dir/$name.out" 2>&1 \
    || { cat "$dir/$name.out" >&2; exit 1; }
  final "$dir/$name"
}

plain=$(run plain "${mlp[@]}")
one=$(run one "${mlp[@]}" "${split[@]}" -o cluster.nworkers_per_group=2 -o cluster.nworkers_per_procs=2)
sandblaster=$(run sandblaster "${mlp[@]}" "${split[@]}" -o cluster.nworkers_per_group=2 \
  -o cluster.nworkers_per_procs=1 -o cluster.server_worker_separate=true)
grep -q "rank 1: group 0 from worker 1: ran its leader's steps" "$dir/sandblaster.out"
# two worker processes on this machine share its cores: BLAS threads split
cores=$(nproc)
want=$(( cores / 2 > 0 ? cores / 2 : 1 ))
[ "$(grep -c "BLAS threads: $want ($cores cores, 2 worker threads sharing them)" "$dir/sandblaster.out")" -ge 2 ] \
  || { grep "BLAS threads" "$dir/sandblaster.out"; echo "BLAS threads not split between the ranks"; exit 1; }
allreduce4=$(run allreduce4 "${mlp[@]}" "${split[@]}" -o cluster.nworkers_per_group=4 \
  -o cluster.nworkers_per_procs=2 -o cluster.nservers_per_group=4 -o cluster.nservers_per_procs=2)
one4=$(run one4 "${mlp[@]}" "${split[@]}" -o cluster.nworkers_per_group=4 -o cluster.nworkers_per_procs=4)
echo "unpartitioned:                        $plain"
echo "k=2 hybrid, one process:              $one"
echo "k=2 hybrid, a process per worker:     $sandblaster"
echo "k=4 hybrid, one process:              $one4"
echo "k=4 hybrid, two processes of two:     $allreduce4"
[ "$one" = "$sandblaster" ] || { echo "k=2 spread differs from one process"; exit 1; }
[ "$one4" = "$allreduce4" ] || { echo "k=4 spread differs from one process"; exit 1; }
awk -v a="$plain" -v b="$one" 'BEGIN {
  split(a, x, " "); split(b, y, " ");
  rel = (x[1] - y[1]) / x[1]; if (rel < 0) rel = -rel;
  if (rel > 1e-4) { print "partitioned differs from unpartitioned: " a " vs " b; exit 1 } }'

cnn=(examples/fashion-mnist/hybrid.conf -o job.epochs=0 -o job.train_steps=25 -o job.test_freq=0
     -o job.disp_freq=5 -o 'layer data.shuffle=false' -o job.test_steps=20 -q)
hyb_one=$(run hyb_one "${cnn[@]}")
hyb_all=$(run hyb_all "${cnn[@]}" --topology conf/allreduce.conf)
echo "hybrid LeNet, one process:            $hyb_one"
echo "hybrid LeNet, AllReduce:              $hyb_all"
[ "$hyb_one" = "$hyb_all" ] || { echo "hybrid LeNet under AllReduce differs"; exit 1; }

# the asynchronous schemes with every group spread over two processes:
# each group's leader pushes for its group.  Two groups pushing stale
# gradients into one momentum-0.9 server at the conf's lr 0.02 end 25
# steps anywhere from 0.9 to 2.5 (CI saw 2.52; 1 run in 6 here went past
# 2.0); at lr 0.01 and 40 steps, 12 runs beside a busy core ended at
# 0.83-1.13
for scheme in downpour hogwild; do
  timeout -k 10 "$(scaled 300)" "$build/shoal" run "${cnn[@]}" --topology "conf/$scheme.conf" -o cluster.nworkers_per_procs=1 \
    -o job.train_steps=40 -o 'updater.lr_list=0.01, 0.001' \
    --workspace "$dir/$scheme" >"$dir/$scheme.out" 2>&1 || { cat "$dir/$scheme.out"; exit 1; }
  for g in 0 1; do
    line=$(grep '"phase":"test"' "$dir/$scheme/metrics.jsonl" | grep "\"group\":$g,\"worker\":0" | tail -1)
    loss=$(echo "$line" | sed 's/.*"loss":\([^,}]*\).*/\1/')
    awk -v l="$loss" 'BEGIN { exit !(l + 0 > 0 && l + 0 < 2.0) }' \
      || { echo "$scheme group $g: test loss '$loss' after 40 steps"; exit 1; }
  done
  echo "hybrid LeNet, $scheme, spread groups:  test loss of group 0 $(final "$dir/$scheme")"
done

# resume: ends at step 20 (checkpoints at 10, 20), resumed to 30
spread=("${mlp[@]}" "${split[@]}" -o cluster.nworkers_per_group=2 -o cluster.nworkers_per_procs=1
        -o cluster.server_worker_separate=true -o job.checkpoint_freq=10)
timeout -k 10 "$(scaled 300)" "$build/shoal" run "${spread[@]}" -o job.train_steps=20 --workspace "$dir/resume" \
  >"$dir/resume.out" 2>&1 || { cat "$dir/resume.out"; exit 1; }
timeout -k 10 "$(scaled 300)" "$build/shoal" run "${spread[@]}" --resume --workspace "$dir/resume" \
  >>"$dir/resume.out" 2>&1 || { cat "$dir/resume.out"; exit 1; }
resumed=$(final "$dir/resume")
echo "k=2 spread, stopped at 20, resumed:   $resumed"
[ "$resumed" = "$sandblaster" ] || { echo "the resumed spread run differs"; exit 1; }

# a follower killed mid-run: the leader fails with a message naming it,
# at once (not after the launcher's 60 s watchdog)
SHOAL_INJECT_STEP_DELAY=0:50 timeout -k 10 "$(scaled 120)" "$build/shoal" run "${mlp[@]}" "${split[@]}" \
  -o job.train_steps=2000 -o cluster.nworkers_per_group=2 -o cluster.nworkers_per_procs=1 \
  --workspace "$dir/killed" >"$dir/killed.out" 2>&1 &
pid=$!
for _ in $(seq "$(scaled 200)"); do  # until it trains (bounded: 20 s)
  grep -q '"phase":"train"' "$dir/killed/metrics.jsonl" 2>/dev/null && break
  sleep 0.1
done
pkill -9 -f "shoal proc $dir/killed/job.conf --rank 1"
started=$SECONDS
status=0
wait "$pid" || status=$?
[ "$status" -ne 0 ] || { cat "$dir/killed.out"; echo "a run that lost a process succeeded"; exit 1; }
# however the leader met the death (a send, a reply, a wait), it probes the
# process and names it gone (the probe finds the port closed, or a
# connection the dying process accepted reset); the launcher's watchdog
# (60 s without progress) would say something else
grep -qE "shoal proc \(rank 0\): group 0: process 1 is gone: .*(cannot connect|Connection reset by peer)" "$dir/killed.out" \
  || { cat "$dir/killed.out"; exit 1; }
echo "follower killed: the leader failed in $((SECONDS - started)) s"
