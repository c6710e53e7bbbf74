#!/usr/bin/env bash
# A layer too big for memory: `shoal run` exits 1 with a message naming
# the layer, its largest param and the bytes, never SIGTRAP/SIGABRT from an
# allocator that aborts.  The job's address space is capped at 4 GiB
# (ulimit -v) and its fc1 needs 5.9 GiB of values, so this holds on any
# machine; a sanitizer build caps ASan's or TSan's allocations instead
# (they reserve terabytes of shadow memory, which ulimit -v cannot allow).  The job's
# memory budget is off (job.memory_limit=0) so that malloc itself fails:
# the budget's refusal is memory_budget.sh.
set -uo pipefail
build=${1:-build}
source test/e2e/lib/time_scale.sh "$build"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

data="$build/data/fashion-mnist"
[ -f "$data/train/data.mdb" ] || data=build/data/fashion-mnist   # sanitizer builds read the plain build's
cat >"$dir/huge.conf" <<EOF
[job]
name = huge
train_steps = 2
test_freq = 0
seed = 1

[updater]
type = sgd
lr = 0.01

[layer data]
type = lmdb_input
train = $data/train
test = $data/test
batch_size = 1

[layer fc1]
type = dense
src = data
num_output = 2000000

[layer fc2]
type = dense
src = fc1
num_output = 10

[layer loss]
type = softmax_loss
src = fc2, data
EOF
# the file is huge.conf, or the workspace's job.conf in a process the launcher started
want=".conf:17: [layer fc1] values of 4 params (largest: fc1/weight 2000000x784, 5.8 GiB): out of memory allocating 6360000064 bytes (5.9 GiB)"

if [[ "${SHOAL_SANITIZE:-}" == *address* ]]; then
  export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}allocator_may_return_null=1:max_allocation_size_mb=4096"
  cap=()
elif [[ "${SHOAL_SANITIZE:-}" == *thread* ]]; then
  # TSan's allocator reserves its heap's address range at start, which
  # ulimit -v refuses (a CHECK failure, SIGSEGV): cap its allocations
  export TSAN_OPTIONS="${TSAN_OPTIONS:+$TSAN_OPTIONS:}allocator_may_return_null=1:max_allocation_size_mb=4096"
  cap=()
else
  cap=(ulimit -v $((4 << 20)))   # KiB
fi

for sep in false true; do
  rc=0
  ( [ "${#cap[@]}" -eq 0 ] || "${cap[@]}"
    exec timeout -k 5 "$(scaled 120)" "$build/shoal" run "$dir/huge.conf" -o "cluster.server_worker_separate=$sep" -o job.memory_limit=0 \
      --workspace "$dir/ws-$sep" ) >"$dir/out" 2>"$dir/err" || rc=$?
  cat "$dir/out" "$dir/err"
  [ "$rc" -eq 1 ] || fail "server_worker_separate=$sep: exit $rc, expected 1"
  grep -qF -- "$want" "$dir/err" || fail "server_worker_separate=$sep: no '$want'"
  grep -qiE 'signal|trap|abort|core dumped' "$dir/out" "$dir/err" && fail "server_worker_separate=$sep: a process died on a signal"
  echo "ok: server_worker_separate=$sep"
done
