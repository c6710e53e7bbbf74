#!/usr/bin/env bash
# shoal compare --workers: a scale sweep on the virtual clock (tiny MLP,
# two schemes, 1, 2 and 4 workers): scale.csv has a row per scheme and
# size with speedup 1 at the smallest, every scale figure is a PNG, the
# report has its Scaling section; the synchronous points ran one group of
# w workers with w batches, the asynchronous ones w groups; only group
# 0 tests (test_groups = 1), 2,048 rows a pass (test_steps 32).  Bad
# --workers (0, a non-number, a count named twice) are errors naming it.
# A sweep whose every run fails and one whose target no size reaches still
# write the report and every figure; elastic averaging's 1-worker point is
# left out with a line saying why.
# [cluster] sync_lr: with warm-up its first update is at lr, so the
# second step's loss equals a run without it, and the third differs.
# No timing is asserted.
# Usage: scale_sweep.sh BUILD
set -euo pipefail
BUILD=$(cd "${1:-build}" && pwd)
cd "$(dirname "$0")/../.."
source test/e2e/lib/time_scale.sh "$BUILD"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

TINY=(-o 'layer fc1.num_output=32' -o 'layer fc2.num_output=32' -o job.threads=1 -o emulate.clock=virtual
      -o emulate.step_ms=10 -o emulate.nic_mbit=1000 -o emulate.latency_ms=0.05)
timeout -k 5 "$(scaled 240)" "$BUILD/shoal" compare examples/fashion-mnist/mlp.conf --schemes sandblaster,downpour \
  --workers 4,1,2 --budget samples=6400 --points 3 --out "$dir/sweep" --quiet "${TINY[@]}" \
  -o cluster.sync_lr=linear >"$dir/out" 2>&1 || { tail -5 "$dir/out"; fail "the sweep"; }
/usr/bin/python3 - "$dir/sweep" <<'PY' || fail "the sweep's numbers"
import csv, json, os, sys
d = sys.argv[1]
rows = list(csv.DictReader(open(os.path.join(d, "scale.csv"))))
assert [(r["scheme"], int(r["workers"])) for r in rows] == [
    ("sandblaster", 1), ("sandblaster", 2), ("sandblaster", 4), ("downpour", 1), ("downpour", 2), ("downpour", 4)], rows
for r in rows:
    assert r["runs_ok"] == "1", r
    if r["workers"] == "1":
        assert float(r["speedup"]) == 1.0 and float(r["efficiency"]) == 1.0, r
    assert abs(float(r["efficiency"]) * int(r["workers"]) - float(r["speedup"])) < 1e-2, r
for png in ("scale-throughput.png", "scale-speedup.png", "scale-efficiency.png", "scale-time-to-target.png"):
    with open(os.path.join(d, png), "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n", png
report = open(os.path.join(d, "report.md")).read()
assert "## Scaling" in report and "| downpour | 4 |" in report, "no Scaling section"
# sandblaster at 4: one group of 4 workers, each pushing; downpour at 4: 4 groups
def units(run):
    lines = [json.loads(l) for l in open(os.path.join(d, "runs", run, "metrics.jsonl"))]
    return sorted({(r["group"], r["worker"]) for r in lines if r["phase"] == "train"})
assert units("sandblaster-w4-r1") == [(0, w) for w in range(4)], units("sandblaster-w4-r1")
assert units("downpour-w4-r1") == [(g, 0) for g in range(4)], units("downpour-w4-r1")
# a sweep's test passes: group 0's, of 2,048 rows (the job's batch 64 x 32)
tests = [json.loads(l) for l in open(os.path.join(d, "runs", "downpour-w4-r1", "metrics.jsonl"))]
tests = [r for r in tests if r["phase"] == "test"]
assert tests and {r["group"] for r in tests} == {0}, sorted({r["group"] for r in tests})
conf = open(os.path.join(d, "runs", "downpour-w4-r1", "job.conf")).read()
assert "\ntest_groups=1\n" in conf and "\ntest_steps=32\n" in conf, "no sweep test defaults in job.conf"
print("sweep: " + ", ".join("%s-w%s %.2fx" % (r["scheme"], r["workers"], float(r["speedup"])) for r in rows))
PY

# a sweep where nothing finishes (every run diverges) and one where no size
# reaches the target: the report and every figure still come, the first
# exits 1 naming the failures, each scheme's line says no run finished
pngs_and_report () {  # DIR WHAT
  for f in report.md scale.csv accuracy-time.png scale-throughput.png scale-speedup.png scale-efficiency.png \
    scale-time-to-target.png; do
    [ -s "$1/$f" ] || { tail -5 "$dir/out"; fail "$2: no $f"; }
  done
}
rc=0
timeout -k 5 "$(scaled 120)" "$BUILD/shoal" compare examples/fashion-mnist/mlp.conf --schemes sandblaster,downpour \
  --workers 1,2 --budget samples=1280 --points 1 --out "$dir/diverged" --quiet "${TINY[@]}" \
  -o updater.lr_policy=fixed -o updater.lr=1e5 >"$dir/out" 2>&1 || rc=$?
[ "$rc" = 1 ] || { tail -5 "$dir/out"; fail "a sweep of diverging runs exited $rc, not 1"; }
grep -q "4 runs failed" "$dir/out" && grep -q "downpour-w2    no run finished" "$dir/out" \
  || { cat "$dir/out"; fail "the diverged sweep's summary"; }
pngs_and_report "$dir/diverged" "a sweep of diverging runs"
timeout -k 5 "$(scaled 120)" "$BUILD/shoal" compare examples/fashion-mnist/mlp.conf --schemes downpour \
  --workers 1,2 --budget samples=1280 --points 1 --target 0.999 --out "$dir/unreached" --quiet "${TINY[@]}" \
  >"$dir/out" 2>&1 || { tail -5 "$dir/out"; fail "a sweep with an unreached target"; }
pngs_and_report "$dir/unreached" "a sweep with an unreached target"
echo "nothing finished, no target reached: the report and every figure: ok"

# elastic averaging needs 2 replicas: its 1-worker point is left out (a
# line says so), its curve starts at 2; a sweep of nothing else is refused
timeout -k 5 "$(scaled 120)" "$BUILD/shoal" compare examples/fashion-mnist/mlp.conf --schemes elastic,hogwild \
  --workers 1,2 --budget samples=1280 --points 1 --out "$dir/elastic" --quiet "${TINY[@]}" >"$dir/out" 2>&1 \
  || { tail -5 "$dir/out"; fail "a sweep with elastic averaging at 1 worker"; }
grep -q "elastic at 1 worker left out: its server groups meet by elastic averaging" "$dir/out" \
  && [ ! -e "$dir/elastic/runs/elastic-w1-r1" ] && [ -e "$dir/elastic/runs/hogwild-w1-r1" ] \
  && grep -q "elastic starts at 2 workers" "$dir/elastic/report.md" \
  && [ "$(grep -c '^elastic,' "$dir/elastic/scale.csv")" = 1 ] || { cat "$dir/out"; fail "elastic's 1-worker point"; }
rc=0
"$BUILD/shoal" compare examples/fashion-mnist/mlp.conf --schemes elastic --workers 1 --out "$dir/elastic1" \
  "${TINY[@]}" >"$dir/out" 2>&1 || rc=$?
[ "$rc" = 2 ] && grep -q "no scheme runs at these sizes" "$dir/out" || { cat "$dir/out"; fail "elastic at 1 worker alone: rc $rc"; }
echo "elastic at 1 worker left out: ok"

bad() {  # MESSAGE ARGS
  local want=$1 rc=0
  shift
  "$BUILD/shoal" compare examples/fashion-mnist/mlp.conf --schemes downpour --out "$dir/bad" "$@" \
    >"$dir/bad.out" 2>&1 || rc=$?
  [ "$rc" != 0 ] || fail "accepted: $*"
  grep -qF -- "$want" "$dir/bad.out" || { cat "$dir/bad.out"; fail "no '$want'"; }
}
bad "--workers: 0 is not a worker count (1 to 4096)" --workers 1,0
bad "--workers: 'four' is not a number of workers" --workers four
bad "--workers: '2x' is not a number of workers" --workers 1,2x
bad "--workers: 2 is named twice" --workers 2,1,2
echo "bad --workers: ok"

# sync_lr warm-up: step 2's loss as without it, step 3's not
SB=(examples/fashion-mnist/mlp.conf --topology conf/sandblaster.conf -o job.epochs=0 -o job.train_steps=3
    -o job.test_freq=0 -o job.disp_freq=1 "${TINY[@]}" -q)
"$BUILD/shoal" run "${SB[@]}" --workspace "$dir/plain" >/dev/null 2>&1 || fail "plain"
"$BUILD/shoal" run "${SB[@]}" -o cluster.sync_lr=linear -o cluster.sync_lr_warmup=100 --workspace "$dir/warm" \
  >/dev/null 2>&1 || fail "warm-up"
"$BUILD/shoal" run "${SB[@]}" -o cluster.sync_lr=sqrt --workspace "$dir/sqrt" >/dev/null 2>&1 || fail "sqrt"
losses() { grep '"phase":"train"' "$1/metrics.jsonl" | sed 's/.*"loss":\([^,]*\),.*/\1/' | tr '\n' ' '; }
read -r -a p <<<"$(losses "$dir/plain")"
read -r -a w <<<"$(losses "$dir/warm")"
read -r -a q <<<"$(losses "$dir/sqrt")"
[ "${p[0]}" = "${w[0]}" ] && [ "${p[1]}" = "${w[1]}" ] || fail "warm-up's first update is not at lr: ${p[*]} / ${w[*]}"
[ "${p[2]}" != "${w[2]}" ] || fail "warm-up's second update is at lr too: ${p[*]} / ${w[*]}"
[ "${p[1]}" != "${q[1]}" ] || fail "sqrt scaled nothing: ${p[*]} / ${q[*]}"
echo "sync_lr: plain ${p[*]}; warm-up ${w[*]}; sqrt ${q[*]}: ok"
echo "scale_sweep: ok"
