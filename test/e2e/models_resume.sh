#!/usr/bin/env bash
# Exact resume of the new model families: a run stopped at step 25 and
# resumed to 45 ends with the same test loss (and accuracy), to every
# printed digit, as one that ran 45 steps.
#  - char-RNN: the GRU's carried hidden state of both phases, the text
#    cursor (an epoch is 14 batches, so streams restart twice) and the
#    dropout stream between its two levels; once in one process, once
#    over Thrift with the servers in a process of their own;
#  - RBM: the chain's random stream and the data cursor (CD-1).
set -euo pipefail
build=${1:-build}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

files=$(ls /usr/lib/python3.11/*.py | LC_ALL=C sort | sed -n 1,3p)
# shellcheck disable=SC2086
"$build/shoal" import text --out "$dir/text" --seq-len 20 --val-fraction 0.1 $files | tee "$dir/import"
vocab=$(sed -n 's/.*vocabulary of \([0-9]*\).*/\1/p' "$dir/import")
rnn=(examples/char-rnn/char_rnn.conf -o "layer data.data=$dir/text" -o "layer data.batch_size=28"
     -o "layer gru.hidden_size=32" -o "layer embed.embedding_dim=16" -o "layer embed.vocab_size=$vocab"
     -o "layer logits.num_output=$vocab" -o job.epochs=0 -o job.test_freq=20 -o job.test_steps=0
     -o job.disp_freq=5 -o job.checkpoint_freq=0 -q)
rbm=(examples/dbn/rbm1.conf -o "layer h1.num_output=64" -o "layer data.batch_size=50" -o job.epochs=0
     -o job.test_freq=20 -o job.test_steps=0 -o job.disp_freq=5 -o job.checkpoint_freq=0 -q)

final () { grep '"phase":"test"' "$1/metrics.jsonl" | tail -1 | sed 's/.*"step":\([0-9]*\),.*"loss":\([^,}]*\).*/\1 \2/'; }

check () {  # check NAME CONF-ARGS...: whole vs stopped + resumed
  local name=$1; shift
  "$build/shoal" run "$@" -o job.train_steps=45 --workspace "$dir/$name-whole" >/dev/null
  "$build/shoal" run "$@" -o job.train_steps=25 --workspace "$dir/$name-part" >/dev/null
  "$build/shoal" run "$@" -o job.train_steps=45 --workspace "$dir/$name-part" --resume >/dev/null
  local a b
  a=$(final "$dir/$name-whole")
  b=$(final "$dir/$name-part")
  echo "$name: uninterrupted $a, resumed $b"
  [ "$a" = "$b" ] || { echo "$name: the resumed run differs"; exit 1; }
}

check char-rnn "${rnn[@]}"
check char-rnn-thrift "${rnn[@]}" -o cluster.server_worker_separate=true
check rbm "${rbm[@]}"
