#!/usr/bin/env bash
# [job] memory_limit: a conf whose nets need more than it (a conv layer's
# 265 MiB column buffer under 64M) is refused by `shoal run` with exit 1
# and a message naming the layer, the bytes and the limit, before any of
# it is allocated, whether workers share the process with the servers or
# not; the same conf under a larger limit trains.  (Nets of several
# threads sharing one budget: test_memory_budget.)
# Not under TSan: its runtime's shadow and metadata pages are resident
# memory the process counts as its own (~450 MiB before the first layer)
# and that no plain run holds.
# suite: plain address undefined
set -uo pipefail
build=${1:-build}
source test/e2e/lib/time_scale.sh "$build"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

cat >"$dir/conv.conf" <<'EOF2'
[job]
name = budget
train_steps = 3
test_freq = 0
test_steps = 2
memory_limit = 8M

[updater]
type = sgd
lr = 0.01

[layer data]
type = lmdb_input
train = DATA/train
test = DATA/test
batch_size = 1

[layer conv1]
type = conv
src = data
num_filters = 4
kernel = 28
pad = 27

[layer fc]
type = dense
src = conv1
num_output = 10

[layer loss]
type = softmax_loss
src = fc, data
EOF2
data="$build/data/fashion-mnist"
[ -f "$data/train/data.mdb" ] || data=build/data/fashion-mnist   # sanitizer builds read the plain build's
[ -f "$data/train/data.mdb" ] || { echo "SKIP: no $data (make data)"; exit 77; }
sed -i "s|DATA|$data|" "$dir/conv.conf"
want=".conf:18: [layer conv1] column matrix: needs 9.1 MiB, which brings what the job holds in this process to 9.1 MiB; job.memory_limit is 8.0 MiB"

for sep in false true; do
  rc=0
  timeout -k 5 "$(scaled 120)" "$build/shoal" run "$dir/conv.conf" -o "cluster.server_worker_separate=$sep" \
    --workspace "$dir/ws-$sep" >"$dir/out" 2>"$dir/err" || rc=$?
  cat "$dir/out" "$dir/err"
  [ "$rc" -eq 1 ] || fail "server_worker_separate=$sep: exit $rc, expected 1"
  grep -qF -- "$want" "$dir/err" || fail "server_worker_separate=$sep: no '$want'"
  grep -qiE 'signal|trap|abort|core dumped' "$dir/out" "$dir/err" && fail "server_worker_separate=$sep: a process died on a signal"
  echo "ok: refused, server_worker_separate=$sep"
done

rc=0
timeout -k 5 "$(scaled 300)" "$build/shoal" run "$dir/conv.conf" -o job.memory_limit=256M \
  --workspace "$dir/ws-fits" >"$dir/out" 2>"$dir/err" || rc=$?
[ "$rc" -eq 0 ] || { cat "$dir/out" "$dir/err"; fail "under 256M: exit $rc, expected 0"; }
grep -q '"step": *3' "$dir/ws-fits/metrics.jsonl" 2>/dev/null || grep -q 'step 3' "$dir/out" "$dir/err" \
  || { cat "$dir/out" "$dir/err"; ls "$dir/ws-fits"; fail "under 256M: did not train to step 3"; }
echo "ok: the same conf under 256M trains"
