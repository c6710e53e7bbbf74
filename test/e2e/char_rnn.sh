#!/usr/bin/env bash
# The char-RNN example (examples/char-rnn) on a short run: `shoal import
# text` of 60 of Python's standard-library sources (sorted, 1.7 MB), the
# example's GRU at hidden 128 for 150 steps of 32 streams, then the whole
# validation split: the loss per byte falls from ln(vocab) = 4.6 to
# below 2.4 (2.10 when written).  `shoal sample` from the workspace:
# the same seed gives the same text, another seed another, and the prime
# comes first; a prime byte outside the vocabulary is refused.  `shoal
# layers` lists the recurrent layers and says their weights are torch's.
set -euo pipefail
build=${1:-build}
source test/e2e/lib/time_scale.sh "$build"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

"$build/shoal" layers >"$dir/layers"
grep -q "^gru: .*weights laid out as torch.nn.GRU's (weight_ih_l0 = \[W_ir; W_iz; W_in\], gates r, z, n)" "$dir/layers"
grep -q "^lstm: .*weights laid out as torch.nn.LSTM's (weight_ih_l0 = \[W_ii; W_if; W_ig; W_io\], gates i, f, g, o)" "$dir/layers"
for t in embedding text_input rbm_visible rbm_hidden rbm_free_energy sigmoid_cross_entropy_loss; do
  grep -q "^$t: " "$dir/layers" || { echo "shoal layers does not list $t"; exit 1; }
done

files=$(ls /usr/lib/python3.11/*.py | LC_ALL=C sort | sed -n 1,60p)
# shellcheck disable=SC2086
"$build/shoal" import text --out "$dir/text" --seq-len 50 $files | tee "$dir/import"
vocab=$(sed -n 's/.*vocabulary of \([0-9]*\).*/\1/p' "$dir/import")
[ -n "$vocab" ]
model=(-o "layer data.data=$dir/text" -o "layer gru.hidden_size=128" -o "layer embed.vocab_size=$vocab"
       -o "layer logits.num_output=$vocab")

start=$SECONDS
"$build/shoal" run examples/char-rnn/char_rnn.conf "${model[@]}" -o job.epochs=0 -o job.train_steps=150 \
  -o job.test_freq=0 -o job.test_steps=0 -o job.disp_freq=50 -o job.checkpoint_freq=0 -q \
  --workspace "$dir/ws" >/dev/null
echo "trained in $((SECONDS - start)) s"
loss=$(grep '"phase":"test"' "$dir/ws/metrics.jsonl" | tail -1 | sed 's/.*"loss":\([^,}]*\).*/\1/')
first=$(grep '"phase":"train"' "$dir/ws/metrics.jsonl" | sed -n 1,1p | sed 's/.*"loss":\([^,}]*\).*/\1/')
echo "train loss of the first 50 steps $first, validation loss after 150: $loss"
awk -v l="$loss" 'BEGIN { exit !(l < 2.4) }' || { echo "validation loss $loss is not below 2.4"; exit 1; }

sample () { "$build/shoal" sample examples/char-rnn/char_rnn.conf "${model[@]}" --from "$dir/ws" "$@"; }
sample --prime 'def ' --length 120 --temperature 0.8 --seed 3 >"$dir/a"
sample --prime 'def ' --length 120 --temperature 0.8 --seed 3 >"$dir/b"
sample --prime 'def ' --length 120 --temperature 0.8 --seed 4 >"$dir/c"
cat "$dir/a"
cmp "$dir/a" "$dir/b"
! cmp -s "$dir/a" "$dir/c"
[ "$(head -c 4 "$dir/a")" = "def " ]
[ "$(wc -c <"$dir/a")" -eq $((4 + 120 + 1)) ]

# piped into head, it ends with its reader (SIGPIPE) instead of generating
# its whole --length (issue 23: it ran on, SIGPIPE ignored); bounded at 60 s
status=0
timeout -k 5 "$(scaled 60)" bash -c "$(declare -f sample); $(declare -p model build dir); sample --length 1000000000 | head -c 100" \
  >/dev/null 2>&1 || status=$?
[ "$status" -ne 124 ] && [ "$status" -ne 137 ] || { echo "shoal sample | head -c 100 ran on"; exit 1; }
status=0
sample --prime $'\x01' --length 5 2>"$dir/err" >/dev/null || status=$?
[ "$status" -eq 1 ]
grep -q "shoal sample: --prime: byte 0x01 ('?') is not in the vocabulary of $dir/text" "$dir/err" || { cat "$dir/err"; exit 1; }
status=0
sample --prime 'x' --from "$dir/none" 2>"$dir/err" >/dev/null || status=$?
[ "$status" -eq 1 ]
grep -q "shoal sample: $dir/none: no such workspace or params file" "$dir/err" || { cat "$dir/err"; exit 1; }
