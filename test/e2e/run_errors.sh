#!/usr/bin/env bash
# Bad input to `shoal run` gets a clear message naming the place and a
# non-zero exit, never a crash; a failed run leaves an existing workspace's
# files alone.
set -uo pipefail
build=${1:-build}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
shoal="$build/shoal"
failures=0

# expect STATUS 'MESSAGE' ARGS...: runs shoal, checks exit status and stderr
expect() {
  local want_status=$1 want_msg=$2
  shift 2
  "$shoal" "$@" >"$dir/out" 2>"$dir/err"
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

base=examples/fashion-mnist/mlp.conf
sed 's/^type = relu$/type = reluu/' "$base" >"$dir/badtype.conf"
line=$(grep -n '^type = reluu' "$dir/badtype.conf" | head -1 | cut -d: -f1)
expect 1 "$dir/badtype.conf:$line: [layer relu1] type: unknown layer type 'reluu'" run "$dir/badtype.conf"

sed 's/^num_output = 1024$/num_output = ten/' "$base" >"$dir/nan.conf"
line=$(grep -n '^num_output = ten' "$dir/nan.conf" | head -1 | cut -d: -f1)
expect 1 "$dir/nan.conf:$line: [layer fc1] num_output: expected an integer, got 'ten'" run "$dir/nan.conf"

sed 's/^src = relu1$/src = relu9/' "$base" >"$dir/nosrc.conf"
expect 1 "[layer fc2] src: unknown source layer 'relu9'" run "$dir/nosrc.conf"

expect 1 "[layer data] train: " run "$base" -o "layer data.train=$dir/no-such-db"
expect 1 "-o updater.lr: [updater] lr: expected a number, got 'fast'" run "$base" -o updater.lr=fast
expect 1 "[updater] momentm: unknown key (did you mean 'momentum'?)" run "$base" -o updater.momentm=0.9
expect 1 "[cluster] nworkers_per_procs" run "$base" -o cluster.nworkers_per_group=4 -o cluster.nworkers_per_procs=3
expect 1 "No such file" run "$dir/missing.conf"
expect 2 "expected one JOB.conf" run
expect 2 "unknown command 'rn'" rn

# a failed run does not touch what a workspace already holds
mkdir -p "$dir/ws"
echo '{"kept":true}' >"$dir/ws/metrics.jsonl"
"$shoal" run "$dir/badtype.conf" --workspace "$dir/ws" >/dev/null 2>&1
if ! grep -q kept "$dir/ws/metrics.jsonl"; then
  echo "FAIL: a run that failed validation overwrote metrics.jsonl"
  failures=$((failures + 1))
fi

[ "$failures" -eq 0 ]
