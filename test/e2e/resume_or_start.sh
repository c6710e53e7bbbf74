#!/usr/bin/env bash
# A job whose every process is killed before its first checkpoint (a node
# lost early under Slurm: no stop, so no checkpoint; the stores exist, made
# at start) and then requeued: `shoal proc --resume` fails ("no
# checkpoint step is common ..."), so examples/slurm/train.sbatch, which
# passed --resume whenever the checkpoint folder existed, failed every
# such requeue.  `--resume-or-start` starts over from step 0, the first
# attempt's metrics lines dropped (every train line once), and resumes
# like --resume where a checkpoint exists.  Sandblaster, two ranks by hand
# on loopback.  Usage: resume_or_start.sh BUILD
set -euo pipefail
BUILD=$(cd "${1:-build}" && pwd)
cd "$(dirname "$0")/../.."
source test/e2e/lib/time_scale.sh "$BUILD"
source test/e2e/lib/topology.sh
dir=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  rm -rf "$dir"
}
trap cleanup EXIT

small_job_conf "$dir/job.conf" conf/sandblaster.conf
sed 's/^train_steps = 600$/train_steps = 100000/' "$dir/job.conf" >"$dir/long.conf"
make_token "$dir/token"
printf '127.0.0.1\n127.0.0.1\n' >"$dir/hosts"
ws=$dir/ws

# pair CONF TAG ARGS...: both ranks on fresh ports, rank 0 in the foreground; sets rc0 rc1
pair() {
  local conf=$1 tag=$2 base
  shift 2
  base=$(free_ports_base 2)
  local args=("$conf" --hostfile "$dir/hosts" --base-port "$base" --token-file "$dir/token"
              --workspace "$ws" -q "$@")
  "$BUILD/shoal" proc "${args[@]}" --rank 1 >"$dir/$tag-1.out" 2>"$dir/$tag-1.err" &
  local p1=$!
  rc0=0
  timeout -k 5 "$(scaled 90)" "$BUILD/shoal" proc "${args[@]}" --rank 0 >"$dir/$tag-0.out" 2>"$dir/$tag-0.err" || rc0=$?
  rc1=0
  timeout "$(scaled 30)" tail --pid="$p1" -f /dev/null || kill -9 "$p1"
  wait "$p1" || rc1=$?
}

# the first attempt, killed before any checkpoint
base=$(free_ports_base 2)
for r in 1 0; do
  "$BUILD/shoal" proc "$dir/long.conf" --hostfile "$dir/hosts" --base-port "$base" \
    --token-file "$dir/token" --workspace "$ws" -q --rank "$r" >/dev/null 2>&1 &
  pids+=($!)
done
for _ in $(seq "$(scaled 300)"); do
  grep -q '"step":200,' "$ws/metrics.jsonl" 2>/dev/null && break
  sleep 0.1
done
grep -q '"step":200,' "$ws/metrics.jsonl" || fail "the first attempt wrote no train line of step 200"
kill -9 "${pids[@]}"
wait "${pids[@]}" 2>/dev/null || true
pids=()

pair "$dir/job.conf" plain --resume
[ "$rc0" -ne 0 ] && grep -q "no checkpoint step is common to every process's checkpoint" "$dir/plain-0.err" \
  || { cat "$dir/plain-0.err"; fail "--resume with nothing saved: exit $rc0"; }

pair "$dir/job.conf" start --resume-or-start
[ "$rc0" -eq 0 ] && [ "$rc1" -eq 0 ] || { tail -3 "$dir/start-0.err" "$dir/start-1.err"; fail "--resume-or-start: exits $rc0 $rc1"; }
grep -q "holds no checkpoint yet: starting from step 0" "$dir/start-0.err" || fail "rank 0 does not say it starts over"
grep -qE '^rank 0: group 0 worker 0: 600 steps at' "$dir/start-0.out" || { cat "$dir/start-0.out"; fail "not 600 steps"; }
dups=$(grep -o '"step":[0-9]*,"group":0,"worker":0,"phase":"train"' "$ws/metrics.jsonl" | sort | uniq -d)
[ -z "$dups" ] || fail "train lines twice after the start over: $dups"
[ "$(grep -c '"group":0,"worker":0,"phase":"train"' "$ws/metrics.jsonl")" -eq 6 ] || fail "not 6 train lines of steps 100-600"

# with the checkpoint that run ended with: it resumes (nothing left to train)
pair "$dir/job.conf" again --resume-or-start
[ "$rc0" -eq 0 ] && grep -q "resuming at step 600" "$dir/again-0.err" \
  || { tail -3 "$dir/again-0.err"; fail "--resume-or-start with a checkpoint did not resume it"; }
echo "resume_or_start: --resume refused, --resume-or-start started over once, then resumed at 600: ok"
