#!/usr/bin/env bash
# shoal's GPU workers on a GPU machine: test_gpu (every GPU layer against
# its CPU reference), then Fashion-MNIST MLP and CNN training throughput of
# shoal on the GPU against PyTorch on the same GPU, with the GPU's name
# beside every number.
#
# The GPU machine is bare (no GLib, Thrift, LMDB, OpenBLAS, no registry),
# so the work is split:
#   here:   bench/gpu.sh prepare
#           fetches the runtime Debian packages and Fashion-MNIST into
#           .debs/ (bench/gpu-env.sh; BENCH_GPU_FETCH=--dev adds what building
#           there needs, ~10 MB more), builds build-cuda/ (make CUDA=1) and
#           build-cuda/bench/gpu_train, and prints the command for the
#           device machine;
#   there:  bash bench/gpu.sh        (the repository root is the cwd)
#           with .debs, build-cuda/shoal and libshoal.so, test_gpu and
#           gpu_train carried along (~50 MB with the tree, under the device
#           tool's 64 MiB); where the binaries are missing it builds them
#           there from .debs (fetched with --dev) with the machine's nvcc.
# Results: build-cuda/bench/gpu/ (logs, summary.txt), copied to $OUT when set.
#
# What is compared (each a median of BENCH_GPU_REPEATS runs of
# BENCH_GPU_STEPS steps after a warm-up), for the MLP and CNN of
# examples/fashion-mnist and the char-RNN as GRU and LSTM (BENCH_GPU_MODELS):
#   shoal gpu          one worker with its server in-process as `shoal run`
#                      makes it (bench/gpu_train.c): params, optimiser state
#                      and update on the GPU ([job] device_update), the loss
#                      read a step late as the worker reads it
#   shoal gpu graph    the same with the step captured as a CUDA graph and
#                      replayed ([job] cuda_graph; mlp, cnn)
#   shoal gpu read-now the same as shoal gpu with each step's loss read at
#                      once (the host waits for its forward; mlp, cnn)
#   shoal gpu host-upd the same with the update on the host: gradients
#                      down, values up at every step
#   shoal gpu fwd+bwd  forward and backward only (gradients still go down)
#   shoal cpu          the same net on the machine's CPU cores (MLP, CNN)
#   torch gpu          PyTorch on the GPU: bench/gpu_torch.py (SGD+momentum),
#                      bench/rnn_torch.py --device (cuDNN GRU/LSTM, Adam)
# then whole `shoal run`s: the MLP with the update on the GPU (eager and
# as a CUDA graph) and on the host, and Downpour with two one-worker
# groups sharing the GPU, as it is and with 2-bit gradients and fp16
# values on the wire (the codecs on the GPU, then on the host: [job]
# device_codecs).
# FP32 on both sides (TF32 off) by default.  BENCH_GPU_PRECISION=tf32
# allows TF32 on both; =bf16 runs shoal's [job] precision = bf16 against
# torch.autocast(bfloat16) (mlp and cnn), and adds whole `shoal run`s of
# the CNN in fp32 and bf16 with their test accuracies.  BENCH_GPU_BATCH=N
# changes the batch of mlp and cnn on both sides (default the confs', 64).
#
# First run on an NVIDIA H200 on 2026-11-26 (docs/GPU.md, bench/README.md).
set -u -o pipefail
cd "$(dirname "$0")/.." || exit 1

B=build-cuda
PKGS="glib-2.0 gthread-2.0 gobject-2.0 gmodule-2.0 thrift_c_glib lmdb openblas zlib json-glib-1.0 openssl"
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
MODELS=${BENCH_GPU_MODELS:-mlp cnn gru lstm}
STEPS=${BENCH_GPU_STEPS:-300}
WARMUP=${BENCH_GPU_WARMUP:-30}
REPEATS=${BENCH_GPU_REPEATS:-3}
PRECISION=${BENCH_GPU_PRECISION:-fp32}
case $PRECISION in fp32|tf32|bf16) ;; *) echo "bench/gpu: BENCH_GPU_PRECISION is fp32, tf32 or bf16" >&2; exit 2 ;; esac
BATCH=${BENCH_GPU_BATCH:-}
# an extended regex of the sides to time (default all), e.g. 'shoal gpu$|torch'
SIDES=${BENCH_GPU_SIDES:-}
# 0: skip test_gpu, or the whole shoal runs (a second pass at another precision, say)
WITH_TESTS=${BENCH_GPU_TEST:-1}
WITH_RUNS=${BENCH_GPU_RUNS:-1}
# an extended regex of the whole runs to make (default all), e.g. 'downpour'
RUN_FILTER=${BENCH_GPU_RUN_FILTER:-}
# test_gpu's limit in seconds (a hang must not eat a lease)
TEST_TIMEOUT=${BENCH_GPU_TEST_TIMEOUT:-300}
RES=$B/bench/gpu
# the char-RNN's text: one file of Python sources cut by prepare, and its
# LMDB import (the device machine has neither Debian's sources nor room
# for all of them beside the packages)
TEXT_FILE=.gpudata/pytext.txt
TEXT_DATA=.gpudata/pytext

die () { echo "bench/gpu: $*" >&2; exit 1; }

# Links bench/gpu_train.c against build-cuda/libshoal.a; -u pulls in the
# object whose constructor plugs the CUDA backend in (nothing calls it, so
# a static link would leave it out and the device be "built without CUDA").
build_gpu_train () {
  mkdir -p "$B/bench" || return 1
  # shellcheck disable=SC2046,SC2086
  ${CC:-cc} -std=c11 -O2 -g -Wall -Wextra -Werror -D_GNU_SOURCE -Iinclude -Isrc -I"$B/gen" $(pkg-config --cflags $PKGS) \
    bench/gpu_train.c -o "$B/bench/gpu_train" "$B/libshoal.a" $(pkg-config --libs $PKGS) \
    -Wl,-u,shoal_gpu_register ${SHOAL_CUDA_LDFLAGS:-} -L"$CUDA_HOME/lib64" -Wl,-rpath,"$CUDA_HOME/lib64" -lcudnn -lcublas -lcudart \
    -lstdc++ -lm -lpthread
}

prepare () {
  [ -n "$(ls .debs/*.deb 2>/dev/null)" ] || bash bench/gpu-env.sh fetch ${BENCH_GPU_FETCH:-} || die "fetch failed"
  make --no-print-directory -j2 CUDA=1 BUILD=$B build-only || die "make CUDA=1 failed"
  build_gpu_train || die "building gpu_train failed"
  if [ ! -e "$TEXT_DATA/.done" ]; then
    # about 1.5 MB of Debian's Python sources, whole files in byte order
    mkdir -p .gpudata && : >"$TEXT_FILE" || die "cannot write $TEXT_FILE"
    local f
    for f in $(ls /usr/lib/python3.11/*.py | LC_ALL=C sort); do
      [ "$(stat -c %s "$TEXT_FILE")" -lt 1500000 ] || break
      cat "$f" >>"$TEXT_FILE"
    done
    rm -rf "$TEXT_DATA"
    # it says the vocabulary's size, which the net's embedding and logits take
    "$B/shoal" import text --out "$TEXT_DATA" --seq-len 100 "$TEXT_FILE" | sed -n 's/.*vocabulary of \([0-9]*\).*/\1/p' \
      >"$TEXT_DATA.vocab" && [ -s "$TEXT_DATA.vocab" ] && touch "$TEXT_DATA/.done" || die "shoal import text failed"
  fi
  cat <<EOF
bench/gpu: ready.  On the device machine (the device tool's run), from the repository root:
  command: bash bench/gpu.sh
  carry:   .debs  .gpudata  $B/shoal  $B/libshoal.so.0  $B/libshoal.so.0.2.0  $B/test/test_gpu  $B/bench/gpu_train
EOF
}

# "median" of the numbers on stdin, "-" for none.
median () {
  sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) { print "-"; exit }
    printf "%.1f\n", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

field () { tr ' ' '\n' <<<"$2" | sed -n "s/^$1=//p" | head -n 1; }

# a / b to 2 places, "-" when either is missing.
ratio () { awk -v a="${1:--}" -v b="${2:--}" 'BEGIN { if (a == "-" || b == "-" || b == 0) print "-"; else printf "%.2f\n", a / b }'; }

run () {
  # shellcheck disable=SC1091
  . bench/gpu-env.sh setup || die "bench/gpu-env.sh setup failed (are .debs carried?)"
  mkdir -p "$RES" || die "cannot create $RES"
  local gpu
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)
  [ -n "$gpu" ] || gpu=$(python3 -c 'import torch; print(torch.cuda.get_device_name(0))' 2>/dev/null)
  [ -n "$gpu" ] || gpu="unknown GPU"
  echo "bench/gpu: GPU: $gpu; driver $(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n 1)"

  if [ ! -x "$B/test/test_gpu" ] || [ ! -x "$B/shoal" ]; then
    echo "bench/gpu: no carried binaries: building with $(command -v nvcc || echo "$CUDA_HOME/bin/nvcc")"
    make --no-print-directory -j"$(nproc)" CUDA=1 BUILD=$B CUDA_HOME="$CUDA_HOME" \
      CFLAGS="${SHOAL_CUDA_CFLAGS:-} ${SHOAL_CUDA_LDFLAGS:-}" LDFLAGS="${SHOAL_CUDA_LDFLAGS:-}" build-only \
      >"$RES/build.log" 2>&1 || { tail -30 "$RES/build.log"; die "make CUDA=1 failed there"; }
  fi
  if [ ! -x "$B/bench/gpu_train" ]; then
    build_gpu_train >"$RES/gpu_train-build.log" 2>&1 || { cat "$RES/gpu_train-build.log"; die "gpu_train build failed"; }
  fi

  # 1. the GPU layers against the CPU ones
  local rc=0
  if [ "$WITH_TESTS" = 1 ]; then
    # --verbose: the bitwise comparisons' counts go into the log
    timeout "$TEST_TIMEOUT" "$B/test/test_gpu" --verbose >"$RES/test_gpu.log" 2>&1 || rc=$?
    echo "==== test_gpu on $gpu (exit $rc): $(grep -c '^ok' "$RES/test_gpu.log") ok, $(grep -c '^not ok' "$RES/test_gpu.log") failed"
    grep -E '^not ok|^# (GPU loss|cuda:)|^Bail|ERROR|CRITICAL' "$RES/test_gpu.log" | head -30
  fi

  # 2. data: the IDX files of the carried dataset-fashion-mnist package
  local data=$B/data/fashion-mnist
  if [ ! -e "$data/.done" ]; then
    mkdir -p "$data"
    "$B/shoal" import idx --images "$FMNIST_DIR/train-images-idx3-ubyte.gz" \
      --labels "$FMNIST_DIR/train-labels-idx1-ubyte.gz" --out "$data/train" --force >"$RES/import.log" 2>&1 &&
    "$B/shoal" import idx --images "$FMNIST_DIR/t10k-images-idx3-ubyte.gz" \
      --labels "$FMNIST_DIR/t10k-labels-idx1-ubyte.gz" --out "$data/test" --force >>"$RES/import.log" 2>&1 &&
    touch "$data/.done" || { cat "$RES/import.log"; die "import failed"; }
  fi

  # 3. throughput
  # the precision's options on each side
  local shoal_precision=(-o "job.precision=$PRECISION") torch_precision="" batch_opts=() torch_batch=()
  [ "$PRECISION" = fp32 ] || torch_precision=--$PRECISION
  [ -n "$BATCH" ] && batch_opts=(-o "layer data.batch_size=$BATCH") && torch_batch=(--batch "$BATCH")
  local summary=$RES/summary.txt
  local -A torch_med=() shoal_med=() graph_med=()
  {
    echo "Training throughput, precision $PRECISION: mlp, cnn: Fashion-MNIST, batch ${BATCH:-64};"
    echo "gru, lstm: the char-RNN (2 levels of 256, Adam, clip_norm 5), batch 32 x 100 bytes;"
    echo "median of $REPEATS runs of $STEPS steps after $WARMUP (samples/s)"
    printf '%-5s %-18s %12s %10s   %s\n' model side samples/s step_ms device
  } >"$summary"
  for m in $MODELS; do
    local conf=examples/fashion-mnist/$m.conf shoal_data=(--data "$data" "${batch_opts[@]}") torch_cmd=()
    local sides=("shoal gpu" "shoal gpu graph" "shoal gpu read-now" "shoal gpu host-upd" "shoal gpu fwd+bwd" "shoal cpu"
                 "torch gpu")
    case $m in
      mlp|cnn)
        torch_cmd=(python3 bench/gpu_torch.py --model "$m" --data "$FMNIST_DIR" $torch_precision "${torch_batch[@]}") ;;
      gru|lstm)
        # the char-RNN (examples/char-rnn) on the text prepare cut
        # (.gpudata): shoal's LMDB import of it against the same bytes
        # read by PyTorch's cuDNN GRU/LSTM (bench/rnn_torch.py)
        conf=examples/char-rnn/char_rnn.conf
        local vocab
        vocab=$(cat "$TEXT_DATA.vocab" 2>/dev/null) || die "no $TEXT_DATA.vocab: run bench/gpu.sh prepare"
        shoal_data=(-o "layer data.data=$TEXT_DATA" -o "layer gru.type=$m" -o "layer embed.vocab_size=$vocab"
                    -o "layer logits.num_output=$vocab")
        sides=("shoal gpu" "shoal gpu host-upd" "shoal gpu fwd+bwd" "torch gpu")
        [ "$PRECISION" = bf16 ] && die "BENCH_GPU_PRECISION=bf16 is for mlp and cnn (shoal's recurrent layers keep FP32)"
        torch_cmd=(python3 bench/rnn_torch.py --conf "$conf" --files "$TEXT_FILE" --cell "$m" --device cuda:0
                   --no-eval --window 25 $torch_precision) ;;
      *) die "unknown model $m (mlp, cnn, gru, lstm)" ;;
    esac
    for side in "${sides[@]}"; do
      [ -n "$SIDES" ] && ! [[ $side =~ $SIDES ]] && continue
      local rates="" ms="" dev="" line="" i
      for ((i = 0; i < REPEATS; i++)); do
        local log=$RES/${m}-${side// /_}-$i.log
        case $side in
          "shoal gpu") "$B/bench/gpu_train" --conf "$conf" "${shoal_data[@]}" "${shoal_precision[@]}" --device cuda:0 \
                         --steps "$STEPS" --warmup "$WARMUP" --update device >"$log" 2>&1 ;;
          "shoal gpu graph") "$B/bench/gpu_train" --conf "$conf" "${shoal_data[@]}" "${shoal_precision[@]}" --device cuda:0 \
                         --steps "$STEPS" --warmup "$WARMUP" --update device --graph >"$log" 2>&1 ;;
          "shoal gpu read-now") "$B/bench/gpu_train" --conf "$conf" "${shoal_data[@]}" "${shoal_precision[@]}" --device cuda:0 \
                         --steps "$STEPS" --warmup "$WARMUP" --update device --read-now >"$log" 2>&1 ;;
          "shoal gpu host-upd") "$B/bench/gpu_train" --conf "$conf" "${shoal_data[@]}" "${shoal_precision[@]}" --device cuda:0 \
                         --steps "$STEPS" --warmup "$WARMUP" --update host >"$log" 2>&1 ;;
          "shoal gpu fwd+bwd") "$B/bench/gpu_train" --conf "$conf" "${shoal_data[@]}" "${shoal_precision[@]}" --device cuda:0 \
                         --steps "$STEPS" --warmup "$WARMUP" --update none >"$log" 2>&1 ;;
          "shoal cpu") "$B/bench/gpu_train" --conf "$conf" "${shoal_data[@]}" --device cpu --threads "$(nproc)" \
                         --steps "$((STEPS / 3))" --warmup "$((WARMUP / 3))" >"$log" 2>&1 ;;
          "torch gpu") LD_LIBRARY_PATH=$SHOAL_SYSTEM_LD_LIBRARY_PATH "${torch_cmd[@]}" --steps "$STEPS" \
                         --warmup "$WARMUP" >"$log" 2>&1 ;;
        esac
        line=$(grep -E '^gpu_(train|torch) ' "$log" | tail -n 1)
        if [ -z "$line" ]; then
          echo "bench/gpu: $m $side run $i failed: $(tail -n 3 "$log" | tr '\n' ' ')" >&2
          continue
        fi
        # a graph that fell back timed eager steps: said, and not counted
        if [ "$(field graph "$line")" = fell-back ]; then
          echo "bench/gpu: $m $side run $i: the CUDA graph fell back: $(grep -m1 'CUDA graph off' "$log")" >&2
          continue
        fi
        rates="$rates $(field samples_per_sec "$line")"
        ms="$ms $(field step_ms "$line")"
        dev=$(sed -n 's/.*device="\([^"]*\)".*/\1/p' <<<"$line")
      done
      [ "$side" = "shoal cpu" ] && dev="$(nproc) CPU cores ($dev)" || dev="$gpu [$dev]"
      local med
      med=$(tr ' ' '\n' <<<"$rates" | grep . | median)
      [ "$side" = "torch gpu" ] && torch_med[$m]=$med
      [ "$side" = "shoal gpu" ] && shoal_med[$m]=$med
      [ "$side" = "shoal gpu graph" ] && graph_med[$m]=$med
      printf '%-5s %-18s %12s %10s   %s\n' "$m" "$side" "$med" \
        "$(tr ' ' '\n' <<<"$ms" | grep . | median)" "$dev" >>"$summary"
    done
    printf '%-5s %-18s %12s\n' "$m" "shoal gpu / torch" "$(ratio "${shoal_med[$m]:-}" "${torch_med[$m]:-}")" >>"$summary"
    if [ -n "${graph_med[$m]:-}" ]; then
      printf '%-5s %-18s %12s\n' "$m" "graph / torch" "$(ratio "${graph_med[$m]}" "${torch_med[$m]:-}")" >>"$summary"
      printf '%-5s %-18s %12s\n' "$m" "graph / eager" "$(ratio "${graph_med[$m]}" "${shoal_med[$m]:-}")" >>"$summary"
    fi
  done
  # whole runs through `shoal run` (test passes excluded from the rate):
  # the MLP as one worker with its server in-process (the update on the
  # GPU, then on the host), and Downpour with two one-worker groups
  # sharing the GPU, servers in a third process (no PyTorch peer: it has
  # no parameter-server scheme), also with 2-bit gradients and fp16
  # values, the codecs on the GPU and on the host.  The rate: the sum of
  # the groups' own.
  {
    echo
    if [ "$PRECISION" = bf16 ]; then
      echo "whole runs (shoal run of examples/fashion-mnist/cnn.conf, 3 epochs, samples/s of training):"
    else
      echo "whole runs (shoal run, $((STEPS * 4)) steps, samples/s of training summed over the groups):"
    fi
  } >>"$summary"
  local run_name conf_args runs=("mlp device update" "mlp cuda graph" "mlp host update" "downpour 2 groups"
                                 "downpour 2bit, codecs on gpu" "downpour 2bit, codecs on host")
  [ "$PRECISION" = bf16 ] && runs=("cnn fp32" "cnn bf16")
  [ "$WITH_RUNS" = 1 ] || runs=()
  for run_name in "${runs[@]}"; do
    [ -n "$RUN_FILTER" ] && ! [[ $run_name =~ $RUN_FILTER ]] && continue
    case $run_name in
      "mlp device update") conf_args=(examples/fashion-mnist/mlp.conf -o job.device_update=true) ;;
      "mlp cuda graph") conf_args=(examples/fashion-mnist/mlp.conf -o job.device_update=true -o job.cuda_graph=true) ;;
      "mlp host update") conf_args=(examples/fashion-mnist/mlp.conf -o job.device_update=false) ;;
      # the CNN's whole schedule (3 epochs), the same seed, at each precision
      "cnn fp32"|"cnn bf16") conf_args=(examples/fashion-mnist/cnn.conf -o "job.precision=${run_name#cnn }") ;;
      *) conf_args=(examples/fashion-mnist/mlp.conf --topology conf/downpour.conf -o cluster.nworkers_per_group=1
                    -o cluster.nworkers_per_procs=1) ;;
    esac
    # the same Downpour with 2-bit gradients and fp16 values on the wire,
    # encoded and decoded on the GPU ([job] device_codecs) or on the host
    [[ $run_name == "downpour 2bit"* ]] &&
      conf_args+=(-o cluster.wire_grads=2bit -o cluster.wire_values=fp16 -o "job.device_codecs=$([[ $run_name == *gpu ]] && echo true || echo false)")
    local log=$RES/run-${run_name// /_}.log ws=$RES/ws-${run_name// /_}
    rm -rf "$ws"
    local length=(-o job.epochs=0 -o "job.train_steps=$((STEPS * 4))") precision=("${shoal_precision[@]}")
    [[ $run_name == cnn* ]] && length=() && precision=()
    timeout 300 "$B/shoal" run "${conf_args[@]}" "${precision[@]}" -o cluster.gpus=0 "${length[@]}" \
      -o "layer data.train=$data/train" -o "layer data.test=$data/test" --workspace "$ws" >"$log" 2>&1
    local runs_rc=$?
    printf '%-30s %12s   %s\n' "$run_name" \
      "$(sed -n 's/.*worker [0-9]*: [0-9]* steps at \([0-9.]*\) samples\/s.*/\1/p; s/^trained [0-9]* steps at \([0-9.]*\) samples\/s.*/\1/p' "$log" |
         awk '{ s += $1 } END { if (NR) printf "%.0f\n", s; else print "-" }')" \
      "exit $runs_rc, $(grep -m1 -o 'final test accuracy: [0-9.]*' "$log")$(grep -m1 -o 'CUDA graph off.*' "$log" | sed 's/^/; /')" \
      >>"$summary"
  done
  echo "==== throughput on $gpu"
  cat "$summary"
  if [ -n "${OUT:-}" ] && [ -d "${OUT:-}" ]; then
    cp "$summary" "$OUT/summary-$PRECISION${BATCH:+-b$BATCH}.txt" 2>/dev/null
    cp "$RES/test_gpu.log" "$OUT/" 2>/dev/null
    cp "$RES"/run-*.log "$OUT/" 2>/dev/null
  fi
  [ "$rc" -eq 0 ]
}

case "${1:-run}" in
  prepare) prepare ;;
  run) run ;;
  *) die "usage: bench/gpu.sh [prepare|run]" ;;
esac
