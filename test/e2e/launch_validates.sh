#!/usr/bin/env bash
# `shoal run` with several processes checks the net before it takes the
# workspace: a conf that only the ranks' net building would refuse (an
# unknown layer type, a split a layer cannot do) fails with the message
# naming the user's conf (file:line, layer, key), exit 1, and the
# workspace's earlier run stays where it was: no previous/, the same
# job.conf, checkpoint and metrics.  (The launcher once took the
# workspace first: the earlier run moved to previous/1 for a job that
# never started, and the ranks named the workspace's copy of the conf.)
set -euo pipefail
build=${1:-build}
source test/e2e/lib/time_scale.sh "$build"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
small=(-o job.epochs=0 -o job.train_steps=20 -o job.test_freq=0 -o 'layer fc1.num_output=32'
       -o 'layer fc2.num_output=32' -q)
ws=$dir/ws
"$build/shoal" run examples/fashion-mnist/mlp.conf "${small[@]}" --workspace "$ws" >/dev/null 2>&1 \
  || fail "the earlier run"
snapshot () { (cd "$ws" && find . -type f ! -name token -exec sha256sum {} + | sort); }
before=$(snapshot)

sed 's/^type = relu$/type = reluu/' examples/fashion-mnist/mlp.conf >"$dir/badtype.conf"
line=$(grep -n '^type = reluu' "$dir/badtype.conf" | head -1 | cut -d: -f1)

check () {  # MESSAGE ARGS...: the run fails with MESSAGE and leaves the workspace
  local want=$1 rc=0
  shift
  timeout -k 10 "$(scaled 120)" "$build/shoal" run "$@" "${small[@]}" --workspace "$ws" >"$dir/out" 2>"$dir/err" || rc=$?
  [ "$rc" -eq 1 ] || { cat "$dir/out" "$dir/err"; fail "$*: exit $rc, expected 1"; }
  grep -qF -- "$want" "$dir/err" || { cat "$dir/err"; fail "$*: no '$want'"; }
  grep -q "moved to" "$dir/err" && { cat "$dir/err"; fail "$*: the earlier run was moved aside"; }
  [ ! -e "$ws/previous" ] || fail "$*: $ws/previous exists"
  [ "$(snapshot)" = "$before" ] || fail "$*: the workspace's files changed"
  echo "ok: $want"
}
for scheme in downpour sandblaster allreduce hogwild; do
  check "shoal run: $dir/badtype.conf:$line: [layer relu1] type: unknown layer type 'reluu'" \
    "$dir/badtype.conf" --topology "conf/$scheme.conf"
done
check "[layer loss] partition_dim: a softmax_loss layer cannot be split by feature" \
  examples/fashion-mnist/mlp.conf --topology conf/sandblaster.conf -o 'layer loss.partition_dim=1'
check "[layer data] train: " examples/fashion-mnist/mlp.conf --topology conf/downpour.conf \
  -o "layer data.train=$dir/no-such-db"
echo "launch_validates: ok"
