#!/usr/bin/env bash
# Smaller messages ([cluster] wire_values, wire_grads) on the socket
# between a worker and its servers in another process (shared memory off,
# so that the slices cross a socket):
#  - every codec trains the MLP subset to the bar, and moves fewer bytes
#    than fp32 (the process lines' socket totals) in the proportion the
#    codec promises;
#  - with quantised gradients the residuals of error feedback are
#    checkpointed: a run stopped at step 45 and resumed to 70 ends with
#    the params of an uninterrupted run, to the bit (shoal eval's sha256);
#  - fp16 values through shared memory are not encoded (nothing crosses a
#    socket): the same params as fp32.
set -euo pipefail
build=${1:-build}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail () { echo "wire_codecs: $*" >&2; exit 1; }

common=(-o job.epochs=0 -o job.test_freq=0 -o job.disp_freq=20 -o 'layer fc1.num_output=256'
        -o 'layer fc2.num_output=128' -o cluster.server_worker_separate=true -q)
run () {  # name [options ...]
  local name=$1
  shift
  "$build/shoal" run examples/fashion-mnist/mlp.conf "${common[@]}" "$@" --workspace "$dir/$name" \
    >"$dir/$name.out" 2>&1 || { tail -20 "$dir/$name.out"; fail "$name failed"; }
}
sent () {  # bytes the worker's rank sent (rank 0; the last process line)
  grep '"phase":"process"' "$1/metrics.jsonl" | grep '"rank":0' | tail -1 | sed 's/.*"bytes_sent":\([0-9]*\).*/\1/'
}
digest () { "$build/shoal" eval "$1/job.conf" --from "$1" | sed -n 's/^params: //p'; }

declare -A acc bytes
for codec in fp32 fp16 bf16 2bit 1bit; do
  run "g-$codec" -o job.train_steps=400 -o cluster.shared_memory=off -o cluster.wire_grads=$codec
  acc[$codec]=$(sed -n 's/^final test accuracy: //p' "$dir/g-$codec.out")
  bytes[$codec]=$(sent "$dir/g-$codec")
  echo "wire_grads=$codec: accuracy ${acc[$codec]}, worker sent ${bytes[$codec]} bytes"
  awk -v a="${acc[$codec]}" 'BEGIN { exit !(a >= 0.78) }' || fail "wire_grads=$codec: accuracy below 0.78"
done
run v-fp16 -o job.train_steps=400 -o cluster.shared_memory=off -o cluster.wire_values=fp16
acc16=$(sed -n 's/^final test accuracy: //p' "$dir/v-fp16.out")
echo "wire_values=fp16: accuracy $acc16"
awk -v a="$acc16" 'BEGIN { exit !(a >= 0.78) }' || fail "wire_values=fp16: accuracy below 0.78"
# bytes: 16-bit codecs about half, 2bit about 1/14, 1bit about 1/24 (headers and calls on top)
awk -v f="${bytes[fp32]}" -v h="${bytes[fp16]}" -v b="${bytes[bf16]}" -v t="${bytes[2bit]}" -v o="${bytes[1bit]}" \
  'BEGIN { exit !(h < 0.52 * f && b < 0.52 * f && t < 0.09 * f && o < 0.06 * f) }' \
  || fail "the codecs do not shrink the gradients' bytes as they should"

# exact resume with error feedback
q=(-o cluster.shared_memory=off -o cluster.wire_grads=1bit -o job.checkpoint_freq=15)
run whole "${q[@]}" -o job.train_steps=70
run part "${q[@]}" -o job.train_steps=45
run part "${q[@]}" -o job.train_steps=70 --resume
whole=$(digest "$dir/whole")
part=$(digest "$dir/part")
echo "1bit, uninterrupted: $whole"
echo "1bit, resumed at 45: $part"
[ "$whole" = "$part" ] || fail "a resumed 1-bit run ends with other params: the residuals were not restored"

# through shared memory nothing is encoded
run shm16 -o job.train_steps=30 -o cluster.wire_values=fp16 -o cluster.wire_grads=1bit
run shm32 -o job.train_steps=30
[ "$(digest "$dir/shm16")" = "$(digest "$dir/shm32")" ] || fail "codecs changed slices that moved through shared memory"
echo "wire_codecs: ok"
