#!/usr/bin/env bash
# [job] memory_limit counts what a run really holds (issue 23, item 5):
# the nets, the servers' slices and optimiser state, the checkpoint's
# copies, and the process itself (code, libraries, the datasets' pages).
# The count a run logs ("N counted against [job] memory_limit") is within
# 20 % of its peak resident size (the kernel's, ru_maxrss of the child:
# the high-water mark /proc/PID/status shows as VmHWM) for the example
# nets and for a 200,000-wide layer; and that layer under memory_limit =
# 1600M is refused before its servers' 1.2 GiB are allocated (it once ran
# at 4.68 GB resident, 2.9 times the limit).
# Not under TSan: its runtime's shadow and metadata pages are resident
# memory the process counts as its own (~450 MiB before the first layer)
# and that no plain run holds.  Under ASan or UBSan every case runs (the
# wide one is where ASan found LMDB's spill-list leak) and must log its
# count and be refused, but the count is not held to the peak, nor the
# refusal to the stage where a plain process reaches the limit: the
# sanitizer's own heap (redzones, a quarantine of freed blocks up to
# 256 MiB) is resident memory no plain run holds (mlp 0.80, deep 0.81).
# suite: plain address undefined
set -euo pipefail
BUILD=$(cd "${1:-build}" && pwd)
cd "$(dirname "$0")/../.."
source test/e2e/lib/time_scale.sh "$BUILD"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
short=(-o job.epochs=0 -o job.train_steps=20 -o job.test_steps=1 -o job.memory_limit=0)
sanitized=$(cat "$BUILD/sanitize" 2>/dev/null || true)
export SHOAL_MEMORY_ESTIMATE_SANITIZED=$sanitized

check() {  # NAME CONF ARGS...: the count against the peak
  local name=$1 conf=$2
  shift 2
  /usr/bin/python3 - "$BUILD/shoal" run "$conf" "${short[@]}" "$@" --workspace "$dir/$name" <<'PY' || fail "$name"
import os, re, resource, subprocess, sys
p = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                   timeout=280 * float(os.environ["SHOAL_TEST_TIME_SCALE"]))
if p.returncode != 0:
    print(p.stdout[-2000:]); sys.exit("exit %d" % p.returncode)
m = re.search(r"rank 0: ([0-9.]+) (KiB|MiB|GiB|bytes) counted against \[job\] memory_limit", p.stdout)
if m is None:
    print(p.stdout[-2000:]); sys.exit("no count logged")
unit = {"bytes": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}[m.group(2)]
counted = float(m.group(1)) * unit
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024.0
ratio = counted / peak
print("%-10s counted %7.1f MiB, peak resident %7.1f MiB: %.2f" % (sys.argv[3].split("/")[-1], counted / 2**20, peak / 2**20, ratio))
if not 0.8 <= ratio <= 1.2 and not os.environ["SHOAL_MEMORY_ESTIMATE_SANITIZED"]:
    sys.exit("the count is not within 20 %% of the peak (%.2f)" % ratio)
PY
}

check mlp examples/fashion-mnist/mlp.conf
check cnn examples/fashion-mnist/cnn.conf
check deep examples/fashion-mnist/deep.conf
check wide examples/fashion-mnist/mlp.conf -o 'layer fc1.num_output=200000' -o 'layer fc2.num_output=16' \
  -o job.train_steps=2

rc=0
"$BUILD/shoal" run examples/fashion-mnist/mlp.conf -o job.epochs=0 -o job.train_steps=2 -o job.test_steps=1 \
  -o 'layer fc1.num_output=200000' -o 'layer fc2.num_output=16' -o job.memory_limit=1600M -q \
  --workspace "$dir/refused" >"$dir/out" 2>"$dir/err" || rc=$?
stage="its servers' slices: .*needs 611.1 MiB"
[ -n "$sanitized" ] && stage="needs .*"
[ "$rc" -eq 1 ] && grep -q "$stage, which brings what the job holds in this process to .*; job.memory_limit is 1.6 GiB" "$dir/err" \
  || { cat "$dir/err"; fail "fc1 = 200000 under memory_limit = 1600M: exit $rc"; }
echo "ok: fc1 = 200000 under memory_limit = 1600M refused: $(grep -o 'needs .*' "$dir/err")"
echo "memory_estimate: ok"
