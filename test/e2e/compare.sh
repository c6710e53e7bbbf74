#!/usr/bin/env bash
# shoal compare on a small subset: a tiny MLP, 12800 samples per run,
# every scheme of conf/.  It must write report.md (a row per scheme and a
# paragraph per figure), results.csv (a row per scheme and repeat, each
# run exit 0) and every PNG - accuracy vs time and vs samples, loss vs
# time, throughput, a staleness histogram per asynchronous scheme - each
# a real PNG (8-byte signature, a sane size).  Then shoal plot draws two
# of the runs.  A net without an accuracy layer (an RBM) is compared by
# its test loss.  No timing is asserted.
# Usage: compare.sh BUILD
set -euo pipefail
BUILD=$(cd "${1:-build}" && pwd)
cd "$(dirname "$0")/../.."
source test/e2e/lib/time_scale.sh "$BUILD"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

schemes=$(cd conf && ls *.conf | sed 's/\.conf$//' | sort)
nschemes=$(echo "$schemes" | wc -l)
timeout -k 10 "$(scaled 240)" "$BUILD/shoal" compare examples/fashion-mnist/mlp.conf --out "$dir/cmp" --quiet \
  --budget samples=12800 --points 5 -o 'layer fc1.num_output=64' -o 'layer fc2.num_output=64' \
  -o job.test_steps=20 -o 'updater.step_list=0, 150' >"$dir/out" 2>"$dir/err" \
  || { rc=$?; tail -30 "$dir/err"; fail "shoal compare exited with $rc"; }
tail -12 "$dir/out"
grep -q "^shoal compare: $dir/cmp/report.md, results.csv and the figures; target test accuracy 0\.[0-9]*$" "$dir/out" \
  || fail "no closing line"
# the report says how each run was made, its overrides quoted for a shell
grep -qF -- "--topology SCHEME.conf -o 'layer fc1.num_output=64' -o 'layer fc2.num_output=64' -o job.test_steps=20 -o 'updater.step_list=0, 150'" \
  "$dir/cmp/report.md" || { sed -n 3p "$dir/cmp/report.md"; fail "report.md does not give the runs' overrides"; }

png_ok() {  # FILE: the PNG signature and more than a header
  [ -f "$1" ] || fail "$1 missing"
  [ "$(head -c 8 "$1" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] || fail "$1 is not a PNG"
  local size
  size=$(stat -c %s "$1")
  [ "$size" -gt 5000 ] && [ "$size" -lt 5000000 ] || fail "$1 has $size bytes"
}
for f in accuracy-time accuracy-samples loss-time throughput; do
  png_ok "$dir/cmp/$f.png"
  grep -q "^!\[$f.png\]($f.png)$" "$dir/cmp/report.md" || fail "report.md does not show $f.png"
done
[ "$(grep -c '^\*\*What this shows\.\*\* ' "$dir/cmp/report.md")" -eq "$(ls "$dir/cmp"/*.png | wc -l)" ] \
  || fail "not one paragraph per figure"

/usr/bin/python3 - "$dir/cmp" "$schemes" <<'PY' || fail "report.md / results.csv"
import csv, os, sys
out, schemes = sys.argv[1], sys.argv[2].split()
rows = list(csv.DictReader(open(os.path.join(out, "results.csv"))))
assert sorted(r["scheme"] for r in rows) == sorted(schemes), [r["scheme"] for r in rows]
report = open(os.path.join(out, "report.md")).read()
for r in rows:
    s = r["scheme"]
    assert r["status"] == "0" and r["repeat"] == "1", r
    acc = float(r["final_accuracy"])
    assert 0.5 < acc <= 1, r
    # the budget, all workers together; a backup worker that catches up
    # skips the steps it missed and never reads their rows
    assert float(r["samples"]) >= (12800 if s != "backup" else 6400), r
    assert float(r["samples_per_sec"]) > 0 and float(r["bytes_per_sample"]) > 0, r
    assert float(r["compute_s"]) > 0, r
    assert ("| %s | 1 of 1 | " % s) in report, s
    asyn = s not in ("sandblaster", "allreduce", "backup")
    if asyn:
        png = os.path.join(out, "staleness-%s.png" % s)
        assert os.path.exists(png), png
        assert "![staleness-%s.png](staleness-%s.png)" % (s, s) in report, s
    else:
        assert float(r["staleness_max"]) == 0, r     # a synchronous update is never stale
    if s == "ssp":
        assert float(r["staleness_max"]) <= 5, r     # s = 2, 2 groups: 2s + 1
    if s == "backup":
        assert float(r["dropped"]) > 0, r
print("%d schemes in results.csv and report.md" % len(rows))
PY
for s in $schemes; do
  [ -f "$dir/cmp/staleness-$s.png" ] && png_ok "$dir/cmp/staleness-$s.png"
done
echo "compare: $nschemes schemes, $(ls "$dir/cmp"/*.png | wc -l) figures"

# shoal plot: the same curves for any finished runs
"$BUILD/shoal" plot "$dir/cmp/runs/sandblaster-r1" "$dir/cmp/runs/downpour-r1/metrics.jsonl" \
  --out "$dir/plot.png" --x samples --y loss >"$dir/out" 2>&1 || { cat "$dir/out"; fail "shoal plot"; }
png_ok "$dir/plot.png"
grep -q 'title "sandblaster-r1"' "$dir/plot.png.gp" && grep -q 'title "downpour-r1"' "$dir/plot.png.gp" \
  || fail "plot titles"
"$BUILD/shoal" plot "$dir/cmp/runs/ssp-r1" --out "$dir/acc.png" >/dev/null || fail "shoal plot defaults"
png_ok "$dir/acc.png"
# a net without an accuracy layer (an RBM: its test loss is the
# reconstruction error): the measure is the test loss, lower better; the
# default target 5 % above the best final loss, reached by that scheme;
# a --target above 1 is a loss there (refused for the MLP above: its
# measure is an accuracy)
timeout -k 10 "$(scaled 240)" "$BUILD/shoal" compare examples/dbn/rbm1.conf --schemes sandblaster,downpour \
  --out "$dir/rbm" --quiet --budget samples=4000 --points 4 -o 'layer h1.num_output=64' -o job.test_steps=5 \
  -o emulate.clock=virtual -o emulate.step_ms=5 >"$dir/out" 2>"$dir/err" || { tail -5 "$dir/err"; fail "the RBM compare"; }
grep -q "; target test loss [0-9.]*$" "$dir/out" || { cat "$dir/out"; fail "the RBM compare's target is not a test loss"; }
/usr/bin/python3 - "$dir/rbm" <<'PY' || fail "the RBM compare's measure"
import csv, os, sys
rows = list(csv.DictReader(open(os.path.join(sys.argv[1], "results.csv"))))
assert "final_test_loss" in rows[0] and "final_accuracy" not in rows[0], list(rows[0])
best = min(float(r["final_test_loss"]) for r in rows)
target = float(rows[0]["target"])
assert abs(target - 1.05 * best) < 1e-3, (target, best)
for r in rows:
    # the loss falls: whoever ends at the best reached the target on the way down
    if float(r["final_test_loss"]) == best:
        assert r["time_to_target_s"] != "", r
report = open(os.path.join(sys.argv[1], "report.md")).read()
assert "target test loss" in report and "| final test loss |" in report, "report.md words"
for png in ("test-loss-time.png", "test-loss-samples.png"):
    assert os.path.exists(os.path.join(sys.argv[1], png)), png
print("RBM: target %.4f (best final test loss %.4f)" % (target, best))
PY
"$BUILD/shoal" compare examples/dbn/rbm1.conf --schemes sandblaster --out "$dir/rbm-target" --quiet \
  --budget samples=400 --points 1 -o 'layer h1.num_output=16' -o job.test_steps=2 -o emulate.clock=virtual \
  -o emulate.step_ms=5 --target 500 >"$dir/out" 2>"$dir/err" || { tail -5 "$dir/err"; fail "--target 500 on an RBM"; }
grep -q "; target test loss 500.0000$" "$dir/out" || { cat "$dir/out"; fail "--target 500 on an RBM"; }
echo "compare: ok"
