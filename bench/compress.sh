#!/usr/bin/env bash
# Smaller messages against fp32: Sandblaster with its server in another
# process and the slices on the loopback socket (shared memory off, so
# that they cross a socket), each codec of [cluster] wire_values /
# wire_grads training the same conf for the same steps.  Prints, per model
# and codec, the bytes per step each way (from the worker rank's socket
# totals in metrics.jsonl), their ratio to fp32, the final test accuracy
# and its difference from fp32's (target: within 0.5 %).
#   bench/compress.sh [BUILD_DIR]
#   knobs: BENCH_COMPRESS_MODELS="mlp cnn" BENCH_COMPRESS_EPOCHS (default: the conf's, 3)
#          BENCH_COMPRESS_CODECS="fp32/fp32 fp16/fp32 bf16/fp32 fp32/fp16 fp32/bf16 fp32/2bit fp32/1bit bf16/1bit"
#          (values/grads)
set -u -o pipefail
cd "$(dirname "$0")/.." || exit 1
BUILD=${1:-build}
MODELS=${BENCH_COMPRESS_MODELS:-mlp cnn}
CODECS=${BENCH_COMPRESS_CODECS:-fp32/fp32 fp16/fp32 bf16/fp32 fp32/fp16 fp32/bf16 fp32/2bit fp32/1bit bf16/1bit}
OUT=$BUILD/bench/compress
mkdir -p "$OUT" || exit 1

epochs=()
[ -n "${BENCH_COMPRESS_EPOCHS:-}" ] && epochs=(-o "job.epochs=$BENCH_COMPRESS_EPOCHS")
printf "%-5s %-6s %-6s %14s %14s %8s %9s %10s\n" model values grads "sent B/step" "recv B/step" \
  "bytes" accuracy "vs fp32"
for model in $MODELS; do
  base_acc=""
  base_bytes=""
  for codec in $CODECS; do
    v=${codec%/*}
    g=${codec#*/}
    ws=$OUT/$model-$v-$g
    rm -rf "$ws"
    "$BUILD/shoal" run "examples/fashion-mnist/$model.conf" "${epochs[@]}" -o job.test_freq=0 -q \
      -o cluster.server_worker_separate=true -o cluster.shared_memory=off \
      -o "cluster.wire_values=$v" -o "cluster.wire_grads=$g" --workspace "$ws" >"$ws.log" 2>&1 \
      || { echo "bench: $model $v/$g failed, see $ws.log" >&2; exit 1; }
    /usr/bin/python3 - "$ws/metrics.jsonl" "$model" "$v" "$g" "${base_acc:-}" "${base_bytes:-}" >"$ws.row" <<'PY'
import json, sys
path, model, v, g, base_acc, base_bytes = sys.argv[1:7]
lines = [json.loads(l) for l in open(path)]
proc = [l for l in lines if l["phase"] == "process" and l.get("rank") == 0]
train = [l for l in lines if l["phase"] == "train" and l["worker"] == 0]
test = [l for l in lines if l["phase"] == "test" and l["worker"] == 0]
steps = train[-1]["step"] if train else 0
sent = proc[-1]["bytes_sent"] / steps if proc and steps else 0
recv = proc[-1]["bytes_received"] / steps if proc and steps else 0
acc = test[-1]["accuracy"] if test else float("nan")
ratio = (sent + recv) / float(base_bytes) if base_bytes else 1.0
diff = f"{(acc - float(base_acc)) * 100:+.2f} %" if base_acc else "-"
print(f"{model:5s} {v:6s} {g:6s} {sent:14.0f} {recv:14.0f} {ratio:8.3f} {acc:9.4f} {diff:>10s}")
print(f"#base {acc} {sent + recv}")
PY
    grep -v '^#' "$ws.row"
    if [ -z "$base_acc" ]; then
      read -r _ base_acc base_bytes < <(grep '^#base' "$ws.row")
    fi
  done
done
