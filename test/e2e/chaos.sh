#!/usr/bin/env bash
# Chaos (issue 12): multi-process jobs of every scheme - Downpour,
# Hogwild, SSP, Hogwild with elastic averaging, Sandblaster, AllReduce,
# Sandblaster with backup workers - with faults injected at random -
# kill -9, SIGSTOP for good, or SIGSTOP then SIGCONT a moment later
# (shorter than heartbeat_timeout) - on a random rank at a random time,
# from a seeded schedule that is printed.  Each job must either finish
# (exit 0, "final test accuracy" at least the bar) or fail with a last
# line naming the rank it lost and why, within the time bound (a hang
# fails the test), and every checkpoint store saved before the fault
# must still be there.  A synchronous scheme (Sandblaster, AllReduce,
# backup workers) cannot go on without a rank: a rank killed or stopped
# for good must fail its job (README.md, "Checkpoints and faults").
# Ends with the figures: faults injected, jobs finished, jobs failed
# clearly, hangs (must be 0).
# Then (issue 23) each scheme is stopped by SIGINT and resumed, a second
# run into a live run's workspace is refused, and a launcher killed while
# its links stall leaves no rank behind (below).
# Usage: chaos.sh BUILD [ROUNDS]   (SHOAL_CHAOS_SEED: the schedule's seed,
# default 1; SHOAL_CHAOS_TRIES: tries of the issue-23 part, default
# ROUNDS; SHOAL_CHAOS_SCHEMES: the schemes, default all;
# SHOAL_CHAOS_LANES: jobs at once, default 2; make test runs one round,
# `make chaos` 5 rounds and 20 tries)
set -euo pipefail
BUILD=$(cd "${1:-build}" && pwd)
rounds=${2:-${SHOAL_CHAOS_ROUNDS:-1}}
seed=${SHOAL_CHAOS_SEED:-1}
cd "$(dirname "$0")/../.."
source test/e2e/lib/time_scale.sh "$BUILD"
source test/e2e/lib/topology.sh

dir=$(mktemp -d)
launcher=
cleanup() {
  [ -n "$launcher" ] && kill "$launcher" 2>/dev/null
  local pids
  pids=$(pgrep -f -- "$dir/" || true)
  [ -n "$pids" ] && kill -KILL $pids 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT

RANDOM=$seed
BAR=0.70
# The jobs run SHOAL_CHAOS_LANES (2) at a time, each drawn from the seed
# in the same order as one after the other, its lines printed in that
# order once the lane's batch ends; a job's figures go to its
# $dir/NAME.result, summed at the end.
lanes=${SHOAL_CHAOS_LANES:-2}
spawned=()
count() {  # FIGURE: one more of it for the job $name
  echo "$1" >>"$dir/$name.result"
}
spawn() {  # CASE: runs it for the job $name once a lane is free
  ( "$1" ) >"$dir/$name.log" 2>&1 &
  spawned+=("$name")
  while [ "$(jobs -rp | wc -l)" -ge "$lanes" ]; do wait -n || true; done
}
drain() {  # waits for every spawned job and prints their lines
  wait || true
  local n
  for n in "${spawned[@]}"; do cat "$dir/$n.log"; done
  spawned=()
}
tally() {  # FIGURE: how many the jobs counted
  cat "$dir"/*.result 2>/dev/null | grep -cx "$1" || true
}
# SHOAL_CHAOS_SCHEMES: some of them (a rerun of one scheme's cases)
read -r -a SCHEMES <<<"${SHOAL_CHAOS_SCHEMES:-downpour hogwild ssp elastic sandblaster allreduce backup}"
for scheme in "${SCHEMES[@]}"; do
  [ -f "conf/$scheme.conf" ] || { echo "chaos: no scheme '$scheme' (conf/$scheme.conf)"; exit 2; }
done
echo "chaos: seed $seed, $rounds round(s) of ${SCHEMES[*]}"

nranks() {  # SCHEME: the processes of its layout
  case $1 in
    downpour|ssp|backup) echo 3 ;;
    *) echo 2 ;;
  esac
}

# fault_case: one job of the fault rounds, its schedule drawn (name, ws,
# sync, steps, rank, action, at, required); its figures go to
# $dir/$name.result (count)
fault_case() {
  echo "--- $name: $action rank $rank at +$((at / 10)).$((at % 10)) s, all_groups_required = $required"
  timeout -k 10 "$(scaled 150)" "$BUILD/shoal" run examples/fashion-mnist/mlp.conf --topology "conf/$scheme.conf" \
    "${TOPOLOGY_ARGS[@]}" -o job.train_steps=$steps -o job.checkpoint_freq=200 \
    -o cluster.heartbeat_interval=0.5 -o cluster.heartbeat_timeout=3 -o cluster.progress_timeout="$(scaled 20)" \
    -o cluster.all_groups_required=$required --no-restart -q --workspace "$ws" \
    >"$dir/$name.out" 2>"$dir/$name.err" &
  launcher=$!
  # the fault comes while the job trains: once every group wrote a train
  # line (the launcher's own first line comes before its ranks listen:
  # under TSan a rank stopped then had not opened its port, and its peer
  # failed first with "cannot connect", the job's last line naming it)
  local groups g
  groups=$(sed -n 's/^nworker_groups *= *//p' "conf/$scheme.conf")
  for _ in $(seq "$(scaled 300)"); do
    for ((g = 0; g < groups; g++)); do
      grep -q "\"group\":$g,.*\"phase\":\"train\"" "$ws/metrics.jsonl" 2>/dev/null || break
    done
    [ "$g" -eq "$groups" ] && break
    kill -0 "$launcher" 2>/dev/null || break
    sleep 0.1
  done
  sleep "$((at / 10)).$((at % 10))"
  pid=$(pgrep -f -- "proc $ws/job.conf --rank $rank " | head -1 || true)
  saved=()
  faulted=0
  for r in 0 1 2; do
    [ -f "$ws/checkpoint/rank-$r/data.mdb" ] && saved+=("$r")
  done
  if [ -n "$pid" ]; then
    count injected
    faulted=1
    case $action in
      kill) kill -KILL "$pid" ;;
      stop) kill -STOP "$pid" ;;
      pause) kill -STOP "$pid"; sleep 1; kill -CONT "$pid" 2>/dev/null || true ;;
    esac
  else
    echo "    (rank $rank had already ended: no fault)"
  fi
  rc=0
  wait "$launcher" || rc=$?
  launcher=
  # a process stopped for good that the launcher did not end would be a hang
  left=$(pgrep -f -- "$ws/" || true)
  [ -n "$left" ] && kill -KILL $left 2>/dev/null
  grep -v '^\*\*' "$dir/$name.err" | sed 's/^/    /' | tail -8 || true
  sed 's/^/    /' "$dir/$name.out" | tail -4
  last=$(grep -v '^\*\*' "$dir/$name.err" | grep -v '^$' | tail -1 || true)
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ] || [ -n "$left" ]; then
    echo "    HANG (exit $rc${left:+, processes left})"
    count hangs
  elif [ "$rc" -eq 0 ] && [ "$sync" -eq 1 ] && [ "$faulted" -eq 1 ] && [ "$action" != pause ] \
       && ! grep -q "\"step\":$steps,.*\"phase\":\"train\"" "$ws/metrics.jsonl"; then
    count bad
    echo "    BAD: a synchronous job finished without rank $rank (it had not reached its last step)"
  elif [ "$rc" -eq 0 ]; then
    acc=$(sed -n 's/^final test accuracy: //p' "$dir/$name.out")
    if [ -n "$acc" ] && awk -v a="$acc" -v b="$BAR" 'BEGIN { exit !(a >= b) }'; then
      count finished
      echo "    finished: accuracy $acc"
    else
      count bad
      echo "    BAD: exit 0 without a final accuracy of at least $BAR"
    fi
  elif grep -qE "^shoal run: rank [0-9] \(.*\) (lost: |failed: )" "$dir/$name.err" \
       && [[ "$last" == "shoal run: "*" processes failed; "*"rank $rank ("* ]]; then
    count failed_clearly
    echo "    failed clearly (exit $rc)"
  else
    count bad
    echo "    BAD: exit $rc without a last line naming the lost rank $rank"
  fi
  if grep -qF "(null)" "$dir/$name.out" "$dir/$name.err"; then
    count bad
    echo "    BAD: (null) printed"
  fi
  for r in "${saved[@]}"; do
    if [ ! -f "$ws/checkpoint/rank-$r/data.mdb" ]; then
      count bad
      echo "    BAD: rank $r's checkpoint store is gone"
    fi
  done
}

for round in $(seq "$rounds"); do
  for scheme in "${SCHEMES[@]}"; do
    name="$scheme-$round"
    ws="$dir/$name"
    sync=$(case $scheme in sandblaster|allreduce|backup) echo 1 ;; *) echo 0 ;; esac)
    # a synchronous group runs 1500 steps in about 2 s here: more, so
    # that the fault lands while it trains
    steps=$([ "$sync" -eq 1 ] && echo 4000 || echo 1500)
    # the schedule: which rank, what, when (tenths of a second after training began)
    rank=$((RANDOM % $(nranks "$scheme")))
    case $((RANDOM % 3)) in
      0) action=kill ;;
      1) action=stop ;;
      *) action=pause ;;
    esac
    at=$((5 + RANDOM % 25))
    # RANDOM drawn here, not in $(...): a subshell's RANDOM is reseeded,
    # which left all_groups_required out of the printed seed's schedule
    required=false
    [ $((RANDOM % 2)) -eq 0 ] && required=true
    spawn fault_case
  done
done
drain
injected=$(tally injected) finished=$(tally finished) failed_clearly=$(tally failed_clearly)
hangs=$(tally hangs) bad=$(tally bad)
echo "chaos: faults injected $injected, jobs finished $finished, failed clearly $failed_clearly, hangs $hangs, bad $bad"

# ---- stops, concurrent runs, orphans (issue 23) ---------------------------
# TRIES times each: every multi-process scheme stopped by SIGINT at a
# random moment, and resumed (it must finish); while it trains, a second
# run into its workspace (plain, --force or --resume, drawn) must be
# refused; and a Downpour run whose links stall, its launcher sent SIGTERM
# and then SIGKILL: no rank may be left once [cluster] stop_timeout (2 s
# here) has passed - the wait for them is bounded at 30 s.
# Backup workers included: a stop that lands after the others applied
# the stopping worker's step without it falls at the servers' next step
# (stop_at returns it), so every process checkpoints the same step.
tries=${SHOAL_CHAOS_TRIES:-$rounds}
orphans=0 orphan_tries=0
# stop_case: one SIGINT-then-resume of a scheme (name, ws, at, second
# drawn); its figures go to $dir/$name.result (count)
stop_case() {
  echo "--- $name: SIGINT at +$((at / 10)).$((at % 10)) s, a second run ${second:-(plain)} meanwhile"
  timeout -k 10 "$(scaled 150)" "$BUILD/shoal" run examples/fashion-mnist/mlp.conf --topology "conf/$scheme.conf" \
    "${TOPOLOGY_ARGS[@]}" -o job.train_steps=100000 -o job.checkpoint_freq=500 -q --workspace "$ws" \
    >"$dir/$name.out" 2>"$dir/$name.err" &
  launcher=$!
  for _ in $(seq "$(scaled 300)"); do
    [ -s "$ws/metrics.jsonl" ] && break
    kill -0 "$launcher" 2>/dev/null || break
    sleep 0.1
  done
  rc=0
  timeout -k 10 "$(scaled 60)" "$BUILD/shoal" run examples/fashion-mnist/mlp.conf --topology "conf/$scheme.conf" \
    "${TOPOLOGY_ARGS[@]}" -o job.train_steps=100000 -q --workspace "$ws" $second \
    >"$dir/$name.second" 2>&1 || rc=$?
  if [ "$rc" -eq 1 ] && grep -q "the workspace is in use by another run" "$dir/$name.second"; then
    count refused
  else
    count accepted_twice
    echo "    BAD: the second run was not refused (exit $rc)"
    tail -3 "$dir/$name.second" | sed 's/^/    /'
  fi
  sleep "$((at / 10)).$((at % 10))"
  pkill -INT -P "$launcher" -x shoal || true   # the launcher under timeout
  rc=0
  wait "$launcher" || rc=$?
  launcher=
  if [ "$rc" -ne 130 ]; then
    count bad
    echo "    BAD: SIGINT: exit $rc, expected 130"
    tail -4 "$dir/$name.err" | sed 's/^/    /'
    return
  fi
  count stopped
  # the resumed run goes 300 steps past the furthest group
  last=$(grep -o 'stopped at step [0-9]*' "$dir/$name.out" | grep -o '[0-9]*$' | sort -n | tail -1)
  rc=0
  timeout -k 10 "$(scaled 150)" "$BUILD/shoal" run examples/fashion-mnist/mlp.conf --topology "conf/$scheme.conf" \
    "${TOPOLOGY_ARGS[@]}" -o job.train_steps=$((${last:-0} + 300)) -o job.checkpoint_freq=500 -q \
    --workspace "$ws" --resume >"$dir/$name.resumed" 2>"$dir/$name.rerr" || rc=$?
  if [ "$rc" -eq 0 ] && grep -q "^final test accuracy: " "$dir/$name.resumed"; then
    count resumed
    echo "    stopped at step ${last:-?}, resumed: $(grep '^final test accuracy: ' "$dir/$name.resumed")"
  else
    count bad
    echo "    BAD: --resume after the stop: exit $rc"
    grep -v '^\*\*' "$dir/$name.rerr" | tail -3 | sed 's/^/    /'
  fi
}

for try in $(seq "$tries"); do
  for scheme in "${SCHEMES[@]}"; do
    name="stop-$scheme-$try"
    ws="$dir/$name"
    at=$((5 + RANDOM % 25))
    modes=("" --force --resume)
    second=${modes[$((RANDOM % 3))]}
    spawn stop_case
  done
  drain
  name="orphans-$try"
  ws="$dir/$name"
  orphan_tries=$((orphan_tries + 1))
  "$BUILD/shoal" run examples/fashion-mnist/mlp.conf --topology conf/downpour.conf "${TOPOLOGY_ARGS[@]}" \
    -o job.train_steps=100000 -o emulate.bandwidth_mbit=1e-9 -o cluster.stop_timeout=2 -q \
    --workspace "$ws" >"$dir/$name.out" 2>"$dir/$name.err" &
  launcher=$!
  for _ in $(seq "$(scaled 300)"); do
    [ "$(pgrep -fc -- "proc $ws/job.conf" || true)" -eq 3 ] && break
    sleep 0.1
  done
  sleep "0.$((RANDOM % 10))"
  kill -TERM "$launcher"
  sleep 0.2
  kill -KILL "$launcher" 2>/dev/null || true
  wait "$launcher" 2>/dev/null || true
  launcher=
  for _ in $(seq "$(scaled 300)"); do
    pgrep -f -- "proc $ws/job.conf" >/dev/null || break
    sleep 0.1
  done
  left=$(pgrep -fc -- "proc $ws/job.conf" || true)
  echo "--- $name: launcher killed with stalled links: ${left:-0} ranks left after $(scaled 30) s"
  if [ "${left:-0}" -gt 0 ]; then
    orphans=$((orphans + left))
    pkill -KILL -f -- "proc $ws/job.conf" || true
  fi
done
stopped=$(tally stopped) resumed=$(tally resumed) refused=$(tally refused)
accepted_twice=$(tally accepted_twice) bad=$(tally bad)
echo "chaos: stopped by SIGINT $stopped, resumed $resumed; second runs refused $refused, accepted $accepted_twice; orphans $orphans after $orphan_tries launcher kills"
[ "$hangs" -eq 0 ] && [ "$bad" -eq 0 ] && [ "$accepted_twice" -eq 0 ] && [ "$orphans" -eq 0 ] \
  || { echo "FAIL: chaos"; exit 1; }
echo "chaos: ok"
