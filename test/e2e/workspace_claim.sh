#!/usr/bin/env bash
# Who owns a workspace (issue 12, items 4 and 8): job.conf, checkpoint/
# and metrics.jsonl describe one run.
#  1. a --resume refused (another model) leaves job.conf as it was;
#  2. a resumed run drops the metrics lines a killed run wrote past the
#     checkpoint (no duplicate steps) and its clock goes on from the
#     checkpoint's time;
#  3. a fresh run into the workspace moves the earlier run aside and says
#     where, so a later --resume continues the fresh run, not the old one,
#     and --resume with the old conf is refused;
#  4. the same through the launcher (Downpour, 3 processes);
#  and (1b) every refusal of a resume comes before the workspace changes:
#  a job.conf deleted, damaged or cut short, or another optimiser state,
#  leaves metrics.jsonl and job.conf as they were.
# Usage: workspace_claim.sh BUILD
set -euo pipefail
BUILD=$(cd "${1:-build}" && pwd)
cd "$(dirname "$0")/../.."
source test/e2e/lib/time_scale.sh "$BUILD"
fail() { echo "FAIL: $*"; exit 1; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
ws="$dir/ws"
common=(-o job.epochs=0 -o job.test_freq=0 -o job.test_steps=2 -o job.disp_freq=10 -o job.checkpoint_freq=50
        -o 'layer fc1.num_output=64' -o 'layer fc2.num_output=64' -q --workspace "$ws")
run() { timeout -k 5 "$(scaled 120)" "$BUILD/shoal" run examples/fashion-mnist/mlp.conf "${common[@]}" "$@"; }

run -o job.train_steps=100 >/dev/null
grep -qxF "num_output=64" "$ws/job.conf" || fail "job.conf of the first run"

# 1. a refused resume
rc=0
run -o job.train_steps=200 -o 'layer fc2.num_output=32' --resume >"$dir/refused.out" 2>&1 || rc=$?
cat "$dir/refused.out"
[ "$rc" -eq 1 ] || fail "refused: exit $rc"
grep -qF "shoal run: $ws: cannot resume: its checkpoints belong to another model: [layer fc2] num_output is 64 in $ws/job.conf, 32 in this job (model fingerprint " \
  "$dir/refused.out" || fail "refused: message"
grep -qxF "num_output=32" "$ws/job.conf" && fail "refused: job.conf was overwritten"

# 1b. every refusal comes before the workspace changes: a job.conf
# deleted, damaged, or an updater whose optimiser state the checkpoint
# lacks (the servers' own check refused it only after metrics.jsonl was
# trimmed and job.conf rewritten).  A line past the checkpoint, as a
# killed run leaves one, shows whether the lines were trimmed.
echo '{"time":9999.1,"phase":"train","step":105,"group":0,"worker":0,"loss":1}' >>"$ws/metrics.jsonl"
cp "$ws/metrics.jsonl" "$dir/metrics.kept"
cp "$ws/job.conf" "$dir/job.conf.kept"
unchanged() {  # $1: the case
  cmp -s "$ws/metrics.jsonl" "$dir/metrics.kept" || fail "$1: metrics.jsonl changed"
  if [ -e "$dir/job.conf.now" ]; then cmp -s "$ws/job.conf" "$dir/job.conf.now" || fail "$1: job.conf changed"
  else [ ! -e "$ws/job.conf" ] || fail "$1: job.conf was written"; fi
}
refused() {  # $1: the case, $2: what the message says; the rest: the run's arguments
  local what=$1 says=$2 rc=0
  shift 2
  run "$@" --resume >"$dir/refused.out" 2>&1 || rc=$?
  [ "$rc" -eq 1 ] || { cat "$dir/refused.out"; fail "$what: exit $rc"; }
  grep -qF "$says" "$dir/refused.out" || { cat "$dir/refused.out"; fail "$what: message"; }
  unchanged "$what"
}
mv "$ws/job.conf" "$dir/job.conf.moved"
refused "no job.conf" "shoal run: $ws: cannot resume: $ws/job.conf: missing; it names the model, data and layout" \
  -o job.train_steps=200 -o 'layer fc2.num_output=32'
refused "no job.conf, the same model" "$ws/job.conf: missing" -o job.train_steps=200
echo 'num_output=64' >"$ws/job.conf"
cp "$ws/job.conf" "$dir/job.conf.now"
refused "job.conf damaged" "$ws/job.conf: " -o job.train_steps=200 -o 'layer fc2.num_output=32'
head -c 100 "$dir/job.conf.kept" >"$ws/job.conf"
cp "$ws/job.conf" "$dir/job.conf.now"
refused "job.conf cut short" "cannot resume" -o job.train_steps=200
cp "$dir/job.conf.kept" "$ws/job.conf"
cp "$ws/job.conf" "$dir/job.conf.now"
refused "another updater" "$ws: cannot resume: its checkpoints belong to another model: [updater] type is sgd in $ws/job.conf, adam in this job" \
  -o job.train_steps=200 -o updater.type=adam
rm "$dir/job.conf.now"
sed -i '$d' "$ws/metrics.jsonl"

# 2. lines of a killed run past the checkpoint of step 100 (as kill -9
# after step 100 leaves them), then a resume to 150
last_time=$(grep '"step":100,' "$ws/metrics.jsonl" | tail -1 | sed 's/^{"time":\([0-9.]*\),.*/\1/')
echo '{"time":9999.5,"phase":"train","step":110,"group":0,"worker":0,"loss":1}' >>"$ws/metrics.jsonl"
echo '{"time":9999.9,"phase":"process","rank":0}' >>"$ws/metrics.jsonl"
run -o job.train_steps=150 --resume >/dev/null
grep -qF '9999.' "$ws/metrics.jsonl" && fail "metrics: the killed run's lines past the checkpoint are still there"
dups=$(grep '"phase":"train"' "$ws/metrics.jsonl" | sed 's/.*"step":\([0-9]*\),.*/\1/' | sort -n | uniq -d)
[ -z "$dups" ] || fail "metrics: duplicate train steps: $dups"
first_resumed=$(grep '"step":110,' "$ws/metrics.jsonl" | grep '"phase":"train"' | sed -n 1,1p \
  | sed 's/^{"time":\([0-9.]*\),.*/\1/')
echo "time at step 100: $last_time, at the resumed step 110: $first_resumed"
awk -v a="$last_time" -v b="$first_resumed" 'BEGIN { exit !(b >= a) }' \
  || fail "metrics: the resumed run's clock started over ($first_resumed < $last_time)"

# 3. a fresh run of another model moves the earlier run aside
run -o job.train_steps=50 -o 'layer fc2.num_output=32' >"$dir/fresh.out" 2>&1
cat "$dir/fresh.out"
grep -qF "$ws held an earlier run: its checkpoint, job.conf and metrics.jsonl moved to $ws/previous/1" \
  "$dir/fresh.out" || fail "fresh: not said where the earlier run went"
[ -d "$ws/previous/1/checkpoint" ] && [ -f "$ws/previous/1/metrics.jsonl" ] || fail "fresh: not moved"
grep -qF '"step":150,' "$ws/metrics.jsonl" && fail "fresh: the old run's metrics are still in the workspace"
rc=0
run -o job.train_steps=200 --resume >"$dir/old.out" 2>&1 || rc=$?
[ "$rc" -eq 1 ] || fail "old: --resume of the old run's conf: exit $rc"
grep -qF "[layer fc2] num_output is 32 in $ws/job.conf, 64 in this job" "$dir/old.out" || fail "old: message"
run -o job.train_steps=60 -o 'layer fc2.num_output=32' --resume >/dev/null 2>&1 || fail "fresh: cannot resume"

# 4. through the launcher
lws="$dir/launched"
launch() {
  timeout -k 5 "$(scaled 120)" "$BUILD/shoal" run examples/fashion-mnist/mlp.conf --topology conf/downpour.conf \
    -o job.epochs=0 -o job.test_freq=0 -o job.test_steps=2 -o job.disp_freq=10 -o job.checkpoint_freq=50 \
    -o 'layer fc1.num_output=64' -q --workspace "$lws" "$@"
}
launch -o job.train_steps=100 >/dev/null 2>&1 || fail "launched: first run"
rc=0
launch -o job.train_steps=150 -o 'layer fc1.num_output=32' --resume >"$dir/lrefused.out" 2>&1 || rc=$?
[ "$rc" -eq 1 ] || fail "launched refused: exit $rc"
grep -qF "[layer fc1] num_output is 64 in $lws/job.conf, 32 in this job" "$dir/lrefused.out" || fail "launched refused: message"
grep -qxF "num_output=64" "$lws/job.conf" || fail "launched refused: job.conf was overwritten"
# job.conf deleted: refused before metrics.jsonl is trimmed
echo '{"time":9999.1,"phase":"train","step":105,"group":0,"worker":0,"loss":1}' >>"$lws/metrics.jsonl"
cp "$lws/metrics.jsonl" "$dir/lmetrics.kept"
mv "$lws/job.conf" "$dir/ljob.conf"
rc=0
launch -o job.train_steps=150 -o 'layer fc1.num_output=32' --resume >"$dir/lrefused.out" 2>&1 || rc=$?
[ "$rc" -eq 1 ] || fail "launched without job.conf: exit $rc"
grep -qF "$lws/job.conf: missing" "$dir/lrefused.out" || { cat "$dir/lrefused.out"; fail "launched without job.conf: message"; }
cmp -s "$lws/metrics.jsonl" "$dir/lmetrics.kept" || fail "launched without job.conf: metrics.jsonl changed"
[ ! -e "$lws/job.conf" ] || fail "launched without job.conf: job.conf was written"
mv "$dir/ljob.conf" "$lws/job.conf"
launch -o job.train_steps=150 --resume >/dev/null 2>&1 || fail "launched: resume"
dups=$(grep '"phase":"train"' "$lws/metrics.jsonl" | sed 's/.*"step":\([0-9]*\),"group":\([0-9]*\),"worker":\([0-9]*\).*/\1 \2 \3/' | sort | uniq -d)
[ -z "$dups" ] || fail "launched: duplicate train lines: $dups"
echo "workspace claim: ok"
