#!/usr/bin/env bash
# Bad input for the new model families fails with a clear message and a
# non-zero exit, never a crash: `shoal import text` of an empty file, of
# a binary file, of text that is not UTF-8, of a text shorter than one
# sequence, of a validation split too short, without its required flags;
# a text_input asked for more streams than the text has sequences; an
# embedding whose vocabulary is not the data's; alg = cd on a net without
# RBM layers and an RBM net trained by BP.  An endless input (/dev/zero)
# is text_endless.sh (plain builds only).  A failed import leaves no
# dataset behind, and replacing one needs --force.
set -euo pipefail
build=${1:-build}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

expect () {  # expect STATUS MESSAGE COMMAND...: exits with STATUS, stderr has MESSAGE
  local want=$1 msg=$2 status=0
  shift 2
  "$@" >/dev/null 2>"$dir/err" || status=$?
  if [ "$status" -ne "$want" ] || ! grep -qF -- "$msg" "$dir/err"; then
    echo "expected exit $want and '$msg' from: $*"
    echo "got exit $status:"
    cat "$dir/err"
    exit 1
  fi
}

: >"$dir/empty.txt"
printf 'abc\0def\n' >"$dir/nul.txt"
printf 'caf\xe9 au lait\n' >"$dir/latin1.txt"
printf 'print("hello")\n' >"$dir/short.py"
head -c 3000 /usr/lib/python3.11/os.py >"$dir/os.py"

imp () { "$build/shoal" import text "$@"; }
expect 1 "shoal import text: $dir/empty.txt: empty file: nothing to learn from" \
  imp --in "$dir/empty.txt" --out "$dir/a" --seq-len 10
expect 1 "shoal import text: $dir/nul.txt: not text: a NUL byte at offset 3; for a byte-level corpus use --bytes" \
  imp --in "$dir/nul.txt" --out "$dir/a" --seq-len 2
expect 1 "shoal import text: $dir/latin1.txt: not UTF-8 text: byte 0xe9 at offset 3; for a byte-level corpus use --bytes" \
  imp --in "$dir/latin1.txt" --out "$dir/a" --seq-len 2
expect 1 "shoal import text: the training text holds 15 bytes (of 15), fewer than one sequence of seq_len + 1 = 101: lower --seq-len or give more text" \
  imp --in "$dir/short.py" --out "$dir/a" --seq-len 100 --val-fraction 0
expect 1 "shoal import text: the validation text (--val-fraction 0.01 of 3000 bytes) holds 30 bytes, fewer than one sequence of seq_len + 1 = 51: raise --val-fraction, lower --seq-len or give 0 for no validation" \
  imp --in "$dir/os.py" --out "$dir/a" --seq-len 50 --val-fraction 0.01
expect 2 "shoal import text: --in, --out and --seq-len are required" imp --in "$dir/os.py" --out "$dir/a"
expect 2 "shoal import text: --val-fraction must be in [0, 1)" \
  imp --in "$dir/os.py" --out "$dir/a" --seq-len 5 --val-fraction 1
[ ! -e "$dir/a/train/data.mdb" ] || { echo "a failed import left a dataset"; exit 1; }
# --bytes takes what UTF-8 refuses
imp --bytes --in "$dir/latin1.txt" --out "$dir/latin" --seq-len 2 --val-fraction 0 >/dev/null

imp --in "$dir/os.py" --out "$dir/t" --seq-len 50 --val-fraction 0.2 >/dev/null
expect 1 "$dir/t/train exists and is not empty; use --force to replace the dataset in it" \
  imp --in "$dir/os.py" --out "$dir/t" --seq-len 50
imp --in "$dir/os.py" --out "$dir/t" --seq-len 50 --val-fraction 0.2 --force >/dev/null

vocab=$(sed -n 's/^vocab_size=//p' "$dir/t/vocab.ini")
run=(run examples/char-rnn/char_rnn.conf -o "layer data.data=$dir/t" -o "layer embed.vocab_size=$vocab"
     -o "layer logits.num_output=$vocab" -o job.epochs=0 -o job.train_steps=1 --workspace "$dir/ws")
# 3000 bytes: 47 training sequences of 50, not enough for 64 streams
expect 1 "[layer data] batch_size: $dir/t/train holds 47 sequences of seq_len 50 for shard 0 of 1, fewer than 64 streams of one sequence each: lower batch_size or import with a smaller --seq-len" \
  "$build/shoal" "${run[@]}" -o "layer data.batch_size=64"
expect 1 "-o layer embed.vocab_size: [layer embed] vocab_size: is 163 but the text of 'data' ($dir/t) has $vocab ids (\`shoal import text\` printed it)" \
  "$build/shoal" "${run[@]}" -o "layer embed.vocab_size=163"
expect 1 "[layer data] data: $dir/none/vocab.ini: " "$build/shoal" "${run[@]}" -o "layer data.data=$dir/none"
expect 1 "[job] alg: alg = cd trains RBM layers (rbm_visible, rbm_hidden) by contrastive divergence, and this net has none" \
  "$build/shoal" "${run[@]}" -o job.alg=cd
expect 1 "[layer v1] type: rbm_visible layers are trained by contrastive divergence: set [job] alg = cd" \
  "$build/shoal" run examples/dbn/rbm1.conf -o job.alg=bp --workspace "$dir/ws2"
echo "all refused as expected"
