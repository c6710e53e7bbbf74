#!/usr/bin/env bash
# SIGINT in a synchronous group spread over processes without a group
# net (every layer split by batch: each process's worker pushes its own
# gradient and the server averages them), the server in a process of its
# own.  Each process picks its stop step from its own step counter, so
# one can go on into the step the other stops at; the servers then refuse
# that step (stop_at, ParamFault STOPPED) and it stops there too.  The
# run must exit 130 promptly with no call timed out, and its resume must
# end with the same final test loss and accuracy as an uninterrupted run,
# to every printed digit.  SHOAL_INJECT_BOUNDARY_DELAY holds worker 1 at
# each step boundary before it looks for the stop, so that the signal
# lands between the two processes' boundaries most of the time;
# SHOAL_INJECT_STEP_DELAY keeps the run going while the signals come.
# Three signals, at different moments (after the train lines of steps 10,
# 30 and 50 of 80); an epoch is 60 steps, so resumes cross its boundary.
# Last, SIGINT to one worker process alone: the launcher stops the job;
# and the same with the launcher signalled too.
set -euo pipefail
build=${1:-build}
source test/e2e/lib/time_scale.sh "$build"
dir=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; rm -rf "$dir"' EXIT

args=(examples/fashion-mnist/mlp.conf -o job.epochs=0 -o job.train_steps=80 -o job.test_freq=0
      -o job.disp_freq=10 -o job.checkpoint_freq=0 -o 'layer data.batch_size=1000'
      -o 'layer fc1.num_output=96' -o 'layer fc2.num_output=96'
      -o updater.lr_list=0.05,0.01 -o 'updater.step_list=0,50'
      -o cluster.nworkers_per_group=2 -o cluster.nworkers_per_procs=1
      -o cluster.server_worker_separate=true -q)

final () {  # the last test line of a workspace: "loss accuracy"
  grep '"phase":"test"' "$1/metrics.jsonl" | tail -1 | sed 's/.*"loss":\([^,}]*\).*"accuracy":\([^,}]*\).*/\1 \2/'
}

run () {  # workspace, then more options
  local ws=$1
  shift
  timeout -k 5 "$(scaled 60)" "$build/shoal" run "${args[@]}" --workspace "$ws" "$@" >"$ws.out" 2>&1 \
    || { cat "$ws.out"; echo "$ws: the run failed"; exit 1; }
}

mkdir -p "$dir/whole"
run "$dir/whole"
whole=$(final "$dir/whole")
echo "uninterrupted:               $whole"

refused=0
for after in 10 30 50; do
  ws=$dir/sig$after
  mkdir -p "$ws"
  SHOAL_INJECT_STEP_DELAY=0:5 SHOAL_INJECT_BOUNDARY_DELAY=0:1:40 \
    "$build/shoal" run "${args[@]}" --workspace "$ws" >"$ws.out" 2>&1 &
  pid=$!
  seen=no
  for _ in $(seq "$(scaled 300)"); do  # until the train line of step $after (bounded: 30 s)
    grep -q "\"step\":$after,.*\"phase\":\"train\"" "$ws/metrics.jsonl" 2>/dev/null && { seen=yes; break; }
    sleep 0.1
  done
  [ "$seen" = yes ] && kill -INT "$pid" \
    || { cat "$ws.out"; echo "no train line of step $after while it runs"; exit 1; }
  start=$(date +%s%N)
  # a clean stop takes a second or two, a call that waits out its 60 s
  # timeout says "timed out" (checked below); past 90 s it hangs
  for _ in $(seq "$(scaled 900)"); do  # bounded: 90 s
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    cat "$ws.out"
    echo "SIGINT after step $after: still running 90 s after the signal"
    exit 1
  fi
  status=0
  wait "$pid" || status=$?
  pid=
  ms=$((($(date +%s%N) - start) / 1000000))
  # every worker process stopped cleanly, and no call waited out its timeout
  if [ "$status" -ne 130 ] || [ "$(grep -c 'worker of group 0): exit 130' "$ws.out")" -ne 2 ] \
     || grep -Eq 'timed out|did not reach|failed|could not tell' "$ws.out"; then
    cat "$ws.out"
    echo "SIGINT after step $after: exit $status, not a clean stop of both worker processes"
    exit 1
  fi
  step=$(grep -o 'group 0 worker 0: stopped at step [0-9]*' "$ws.out" | grep -o '[0-9]*$')
  [ "$(grep -c "group 0 worker [01]: stopped at step $step with a checkpoint" "$ws.out")" -eq 2 ] \
    || { cat "$ws.out"; echo "the two workers stopped at different steps"; exit 1; }
  how=signal
  if grep -q 'stopped at step [0-9]* with its group' "$ws.out"; then
    how="one process went on into the step: refused there"
    refused=$((refused + 1))
  fi
  run "$ws" --resume
  got=$(final "$ws")
  echo "SIGINT after step $after, stopped at $step ($how; exited within ${ms} ms): resumed $got"
  [ "$got" = "$whole" ] || { echo "the resumed run differs from the uninterrupted one"; exit 1; }
done
echo "$refused of 3 stops gave up a step one process had begun"

# SIGINT to one worker process alone (a scheduler preempting its node):
# the launcher stops the job with it, and the resume is exact too
# signal_rank1 DIR LABEL [launcher]: SIGINT to rank 1 alone, or then at once to
# the launcher too, which forwards it to every rank: rank 1, already
# stopping, gets a second SIGINT from its launcher, which must not end it
# before its checkpoint (a user's second signal would; the launcher's
# forward of a stop it did not start must not).
signal_rank1 () {
  local name=$2 also=${3:-}
  ws=$dir/$1
  mkdir -p "$ws"
  SHOAL_INJECT_STEP_DELAY=0:5 "$build/shoal" run "${args[@]}" --workspace "$ws" >"$ws.out" 2>&1 &
  pid=$!
  for _ in $(seq "$(scaled 300)"); do  # until the train line of step 20 (bounded: 30 s)
    grep -q '"step":20,.*"phase":"train"' "$ws/metrics.jsonl" 2>/dev/null && break
    sleep 0.1
  done
  pkill -INT -f "shoal proc $ws/job.conf --rank 1 " || { cat "$ws.out"; echo "no rank 1 to signal"; exit 1; }
  [ -n "$also" ] && kill -INT "$pid"
  status=0
  timeout "$(scaled 90)" tail --pid="$pid" -f /dev/null || { cat "$ws.out"; echo "still running $(scaled 90) s after the signal"; exit 1; }
  wait "$pid" || status=$?
  pid=
  [ "$status" -eq 130 ] || { cat "$ws.out"; echo "$name: exit $status"; exit 1; }
  # Which rank ends first races (rank 0 is refused the stop step by the
  # servers and may exit before rank 1 has written its checkpoint): the
  # launcher names the first, either one; rank 1's worker stopped on its
  # own request, rank 0's with its group or, had the launcher's SIGINT
  # reached it first, on request as well.
  if [ -z "$also" ]; then
    grep -qE "rank [01] \(1 worker of group 0\) stopped with a checkpoint \(a stop request\); stopping [12] process(es)?$" \
      "$ws.out" || { cat "$ws.out"; echo "$name: the launcher did not stop the job with the rank"; exit 1; }
  fi
  # With the launcher's SIGINT too, rank 0 has a stop request of its own
  # and may reach the servers first: rank 1 then stops with its group -
  # what matters is that it stopped with its checkpoint, not killed.
  local how="on request"
  [ -n "$also" ] && how="(on request|with its group \(a worker in another process stopped there\))"
  grep -qE "\[group 0 worker 1\] stopped at step [0-9]+ $how; checkpoint saved" "$ws.out" \
    || { cat "$ws.out"; echo "$name: rank 1 did not stop with a checkpoint"; exit 1; }
  step=$(grep -o 'group 0 worker 1: stopped at step [0-9]*' "$ws.out" | grep -o '[0-9]*$' || true)
  [ -n "$step" ] && [ "$(grep -c "group 0 worker [01]: stopped at step $step with" "$ws.out")" -eq 2 ] \
    || { cat "$ws.out"; echo "$name: the two workers did not both stop at one step with a checkpoint"; exit 1; }
  run "$ws" --resume
  got=$(final "$ws")
  echo "$name, stopped at $step: resumed $got"
  [ "$got" = "$whole" ] || { echo "the resumed run differs from the uninterrupted one"; exit 1; }
}
signal_rank1 one "SIGINT to rank 1 alone"
signal_rank1 two "SIGINT to rank 1, then to the launcher" launcher
