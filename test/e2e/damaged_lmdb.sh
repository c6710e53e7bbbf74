#!/usr/bin/env bash
# A data.mdb cut short (a partial copy, a full disk while copying) is an
# error naming the file with exit 1, never a SIGBUS from a read through
# LMDB's map: the training set, the test set and a workspace's checkpoint.
set -uo pipefail
build=${1:-build}
source test/e2e/lib/time_scale.sh "$build"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
shoal="$build/shoal"
failures=0
small=(-o job.epochs=0 -o job.train_steps=10 -o job.test_freq=0 -o job.test_steps=2
       -o 'layer fc1.num_output=16' -o 'layer fc2.num_output=16' -q)

# expect STATUS 'MESSAGE' ARGS...: runs shoal (bounded), checks exit status and stderr
expect() {
  local want_status=$1 want_msg=$2
  shift 2
  timeout -k 5 "$(scaled 60)" "$shoal" "$@" >"$dir/out" 2>"$dir/err"
  local status=$?
  if [ "$status" -ne "$want_status" ] || ! grep -qF -- "$want_msg" "$dir/err"; then
    echo "FAIL: shoal $*"
    echo "  want exit $want_status and: $want_msg"
    echo "  got exit $status and: $(cat "$dir/err")"
    failures=$((failures + 1))
  else
    echo "ok: $want_msg"
  fi
}

src="$build/data/fashion-mnist/test"
[ -f "$src/data.mdb" ] || src=build/data/fashion-mnist/test   # sanitizer builds read the plain build's
full=$(stat -c %s "$src/data.mdb")
for cut in 8192 $((full / 2)); do
  rm -rf "$dir/cut"
  mkdir "$dir/cut"
  cp "$src/data.mdb" "$dir/cut/"
  truncate -s "$cut" "$dir/cut/data.mdb"
  expect 1 "[layer data] train: $dir/cut/data.mdb: truncated: the file has $cut bytes, its pages in use end at byte $full (a partial copy or a damaged file)" \
    run examples/fashion-mnist/mlp.conf "${small[@]}" -o "layer data.train=$dir/cut" --workspace "$dir/ws-$cut"
  expect 1 "[layer data] test: $dir/cut/data.mdb: truncated: the file has $cut bytes" \
    run examples/fashion-mnist/mlp.conf "${small[@]}" -o "layer data.test=$dir/cut" --workspace "$dir/ws-$cut"
done
truncate -s 0 "$dir/cut/data.mdb"
expect 1 "$dir/cut/data.mdb: truncated: the file has 0 bytes, fewer than LMDB's two meta pages (8192 bytes at least)" \
  run examples/fashion-mnist/mlp.conf "${small[@]}" -o "layer data.train=$dir/cut" --workspace "$dir/ws-0"

# a checkpoint cut short: --resume names it and keeps it as it is
"$shoal" run examples/fashion-mnist/mlp.conf "${small[@]}" --workspace "$dir/ws" >/dev/null 2>&1 \
  || { echo "FAIL: the run that makes the checkpoint"; exit 1; }
ckpt="$dir/ws/checkpoint/rank-0/data.mdb"
ckfull=$(stat -c %s "$ckpt")
truncate -s 8192 "$ckpt"
expect 1 "$dir/ws: cannot resume: checkpoint: $ckpt: truncated: the file has 8192 bytes, its pages in use end at byte $ckfull (a partial copy or a damaged file)" \
  run examples/fashion-mnist/mlp.conf "${small[@]}" -o job.train_steps=20 --workspace "$dir/ws" --resume
[ "$(stat -c %s "$ckpt")" -eq 8192 ] || { echo "FAIL: the damaged checkpoint was written to"; failures=$((failures + 1)); }

# cut short while a run reads it (issue 23): another program truncates the
# training set mid-run.  The next read through the map past the new end
# says which file shrank, exit 1 (it was a SIGBUS, exit 135, no word).
cp -r build/data/fashion-mnist/train "$dir/live"
SHOAL_INJECT_STEP_DELAY=0:20@5 timeout -k 5 "$(scaled 120)" "$shoal" run examples/fashion-mnist/mlp.conf "${small[@]}" \
  -o job.train_steps=100000 -o "layer data.train=$dir/live" --workspace "$dir/ws-live" >"$dir/out" 2>"$dir/err" &
pid=$!
for _ in $(seq "$(scaled 600)"); do  # until it trains (bounded: 60 s)
  [ -s "$dir/ws-live/metrics.jsonl" ] && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
truncate -s 16384 "$dir/live/data.mdb"
status=0
wait "$pid" || status=$?
if [ "$status" -ne 1 ] || ! grep -qF "$dir/live/data.mdb: the file shrank while this process read it" "$dir/err"; then
  echo "FAIL: a training set truncated mid-run: exit $status"
  cat "$dir/err"
  failures=$((failures + 1))
else
  echo "ok: a training set truncated mid-run: exit 1, naming the file"
fi

[ "$failures" -eq 0 ]
