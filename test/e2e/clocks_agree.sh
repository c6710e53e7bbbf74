#!/usr/bin/env bash
# One training code path: every model family (BP: the MLP; BPTT: a GRU
# char-RNN; CD: an RBM) under every scheme (one process, Sandblaster,
# AllReduce, Downpour, Hogwild, SSP), trained on the real clock (real
# processes over Thrift on loopback) and on the virtual clock with the
# same seed and layout.  What must agree:
#  - every run writes the same lines: the same (phase, group, worker, step)
#    and the same metric keys (the RBM's "fe" included);
#  - the first step of every unit has the same loss (same init, same data,
#    the same step code);
#  - the synchronous schemes (one process, Sandblaster, AllReduce) the
#    same loss at every step, up to the order in which a server sums the
#    workers' pushes (relative 1e-3);
#  - every family learns on both clocks (the last train loss below the
#    first); an RBM once did not learn on the virtual clock at all.
# The asynchronous schemes' later losses depend on the order pushes
# arrive in, which only the virtual clock makes repeatable.  The same for
# Sandblaster with the wire codecs (2-bit gradients, fp16 values).
# Usage: clocks_agree.sh BUILD
set -euo pipefail
BUILD=$(cd "${1:-build}" && pwd)
cd "$(dirname "$0")/../.."
source test/e2e/lib/time_scale.sh "$BUILD"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

files=$(ls /usr/lib/python3.11/*.py | LC_ALL=C sort | sed -n 1,6p)
# shellcheck disable=SC2086
"$BUILD/shoal" import text --out "$dir/text" --seq-len 16 $files >"$dir/import"
vocab=$(sed -n 's/.*vocabulary of \([0-9]*\).*/\1/p' "$dir/import")
COMMON=(-o job.epochs=0 -o job.train_steps=12 -o job.test_freq=6 -o job.test_steps=3 -o job.disp_freq=1
        -o job.checkpoint_freq=0 -o job.threads=1 -q)
mlp=(examples/fashion-mnist/mlp.conf -o 'layer fc1.num_output=32' -o 'layer fc2.num_output=32')
rnn=(examples/char-rnn/char_rnn.conf -o "layer data.data=$dir/text" -o "layer data.batch_size=8"
     -o "layer gru.hidden_size=16" -o "layer gru.num_layers=1" -o "layer embed.embedding_dim=8"
     -o "layer embed.vocab_size=$vocab" -o "layer logits.num_output=$vocab" -o updater.lr=0.01)
rbm=(examples/dbn/rbm1.conf -o "layer h1.num_output=32" -o updater.momentum=0.5)

run() {  # NAME CLOCK FAMILY TOPOLOGY [OPTION...]
  local name=$1 clock=$2 family=$3 topo=$4 args=()
  shift 4
  case $family in mlp) args=("${mlp[@]}") ;; rnn) args=("${rnn[@]}") ;; rbm) args=("${rbm[@]}") ;; esac
  args+=("$@")
  [ "$topo" = single ] || args+=(--topology "conf/$topo.conf")
  [ "$clock" = virtual ] && args+=(-o emulate.clock=virtual -o emulate.step_ms=5)
  timeout -k 10 "$(scaled 180)" "$BUILD/shoal" run "${args[@]}" "${COMMON[@]}" --workspace "$dir/$name" \
    >"$dir/$name.out" 2>&1 || { tail -5 "$dir/$name.out"; fail "$name did not run"; }
}

agree() {  # NAME WHAT SYNC: runs NAME-real and NAME-virtual agree
  /usr/bin/python3 - "$dir/$1-real/metrics.jsonl" "$dir/$1-virtual/metrics.jsonl" "$2" "$3" <<'PY' \
    || fail "$2: the clocks disagree"
import json, sys
real, virt, what, sync = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1"
def lines(path):
    out = {}
    for l in open(path):
        r = json.loads(l)
        if r["phase"] in ("train", "test"):
            out[(r["phase"], r["group"], r["worker"], r["step"])] = r
    return out
a, b = lines(real), lines(virt)
assert sorted(a) == sorted(b), "%s: other lines: real %s, virtual %s" % (what, sorted(set(a) - set(b))[:4], sorted(set(b) - set(a))[:4])
skip = {"time", "vtime", "samples_per_sec", "compute_s", "wait_s", "peer_wait_s"}
for k in a:
    ka, kb = set(a[k]) - skip, set(b[k]) - skip
    assert ka == kb, "%s %s: keys %s vs %s" % (what, k, sorted(ka), sorted(kb))
def close(x, y, rel):
    return abs(x - y) <= rel * max(abs(x), abs(y), 1e-6)
units = sorted({(g, w) for (p, g, w, s) in a})
same_start = []
for g, w in units:
    train = sorted(s for (p, gg, ww, s) in a if p == "train" and (gg, ww) == (g, w))
    first = ("train", g, w, train[0])
    same_start.append(close(a[first]["loss"], b[first]["loss"], 1e-5))
    if sync:
        for s in train:
            k = ("train", g, w, s)
            assert close(a[k]["loss"], b[k]["loss"], 1e-3), "%s unit %d.%d step %d: loss %g real, %g virtual" % (
                what, g, w, s, a[k]["loss"], b[k]["loss"])
    for side, m in (("real", a), ("virtual", b)):
        l0, l1 = m[("train", g, w, train[0])]["loss"], m[("train", g, w, train[-1])]["loss"]
        assert l1 < l0, "%s unit %d.%d on the %s clock: loss %g -> %g, not learning" % (what, g, w, side, l0, l1)
# synchronous: every unit starts from the initial values; asynchronous:
# at least the first unit to fetch does (on the real clock another may
# fetch after a push)
assert all(same_start) if sync else any(same_start), "%s: first losses differ (units %s)" % (
    what, [u for u, ok in zip(units, same_start) if not ok])
print("%-16s %d units, %d lines: agree (first loss %.4f; last real %.4f, virtual %.4f)" % (
    what, len(units), len(a), a[first]["loss"], a[("train", g, w, train[-1])]["loss"], b[("train", g, w, train[-1])]["loss"]))
PY
}

for family in mlp rnn rbm; do
  for topo in single sandblaster allreduce downpour hogwild ssp; do
    run "$family-$topo-real" real "$family" "$topo"
    run "$family-$topo-virtual" virtual "$family" "$topo"
    case $topo in single | sandblaster | allreduce) sync=1 ;; *) sync=0 ;; esac
    agree "$family-$topo" "$family $topo" "$sync"
  done
done
# the wire codecs between processes: 2-bit gradients with error feedback
# and fp16 values cross the virtual wire as they cross the real one, so a
# synchronous scheme's every loss agrees (a virtual clock that moved fp32
# would train on unquantised gradients)
# (shared memory off: with it the real client moves a slice to a server
# on its own host unencoded; the virtual clock's processes are hosts of
# their own)
CODECS=(-o cluster.wire_grads=2bit -o cluster.wire_values=fp16 -o cluster.shared_memory=off)
run codecs-real real mlp sandblaster "${CODECS[@]}"
run codecs-virtual virtual mlp sandblaster "${CODECS[@]}"
agree codecs "mlp sandblaster 2bit/fp16" 1
run fp32-virtual virtual mlp sandblaster
cmp -s <(grep '"train"' "$dir/fp32-virtual/metrics.jsonl" | sed 's/"time":[0-9.]*,"vtime":[0-9.]*,//') \
  <(grep '"train"' "$dir/codecs-virtual/metrics.jsonl" | sed 's/"time":[0-9.]*,"vtime":[0-9.]*,//') \
  && fail "the virtual clock trained the same with 2-bit gradients as with fp32"
echo "clocks agree"
