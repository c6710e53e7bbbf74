#!/usr/bin/env bash
# Builds examples/custom-layer against BUILD/libshoal.a the way a program
# outside the tree would, runs it, and checks that its own layer passed
# its gradient check and that the loss went down.  Usage: custom_layer.sh BUILD
set -euo pipefail
build=$(cd "${1:-build}" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"

[ -f "$build/libshoal.a" ] || { echo "no $build/libshoal.a: run make first"; exit 1; }
out="$build/examples/custom-layer"
mkdir -p "$out"
# a sanitizer build's library needs its runtime (run-tests.sh sets SHOAL_SANITIZE)
san=${SHOAL_SANITIZE:+-fsanitize=$SHOAL_SANITIZE}
# shellcheck disable=SC2046
cc -std=c11 -O2 -Wall -Wextra -Werror $san -Iinclude -Isrc -I"$build/gen" \
  examples/custom-layer/custom_layer.c -o "$out/custom_layer" "$build/libshoal.a" \
  $(pkg-config --cflags --libs glib-2.0 gthread-2.0 gobject-2.0 gmodule-2.0 thrift_c_glib lmdb openblas zlib) -lm

log="$out/run.log"
rc=0
"$out/custom_layer" >"$log" 2>&1 || rc=$?
cat "$log"
[ "$rc" -eq 0 ] || { echo "custom_layer exited with $rc"; exit 1; }

grep -q '^swish gradient check: ' "$log" || { echo "no gradient check line"; exit 1; }
line=$(grep '^first_loss=' "$log" | tail -1)
[ -n "$line" ] || { echo "no first_loss= line"; exit 1; }
first=$(sed 's/.*first_loss=\([^ ]*\).*/\1/' <<<"$line")
final=$(sed 's/.*final_loss=\([^ ]*\).*/\1/' <<<"$line")
acc=$(sed 's/.*final_accuracy=\([^ ]*\).*/\1/' <<<"$line")
# three balanced classes: the loss starts near ln 3; a trained net must
# have cut it at least in half and classify most points right
awk -v a="$first" -v b="$final" -v acc="$acc" 'BEGIN {
  if (!(b < 0.5 * a)) { printf "loss did not decrease enough: %s -> %s\n", a, b; exit 1 }
  if (!(acc > 0.8)) { printf "accuracy %s is too low\n", acc; exit 1 }
  printf "loss %s -> %s, accuracy %s\n", a, b, acc
}'

# a bad conf value reaches the program as a located error
if "$out/custom_layer" "layer act.beta=0" >"$log" 2>&1; then
  echo "beta=0 was accepted"; exit 1
fi
grep -q -- "-o layer act.beta: \[layer act\] beta: 0 is out of range \[0.01, 100\]" "$log" \
  || { cat "$log"; echo "unexpected error message"; exit 1; }
echo "custom layer example ok"
