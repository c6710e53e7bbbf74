#!/usr/bin/env bash
# shoal compare's figures are a rendering of its data: on a machine
# without gnuplot (a PATH holding everything of this one's but gnuplot) a
# tiny scale sweep on the virtual clock still writes results.csv,
# scale.csv, data/, figures.gp, scale.gp and report.md, warns once naming
# the folder and the command that draws the figures, says in report.md
# how to draw them, and exits 0; that command, run later where gnuplot
# is, draws every PNG report.md links; a comparison replaced (--force)
# without gnuplot leaves none of them behind.  A gnuplot that fails on one
# script: the data and the report are written, the other script's
# figures drawn, and compare exits 1 naming the script and gnuplot's
# complaint.  shoal plot, whose only product is the figure, still fails
# without gnuplot.  No timing is asserted.
# Usage: compare_no_gnuplot.sh BUILD
set -euo pipefail
BUILD=$(cd "${1:-build}" && pwd)
cd "$(dirname "$0")/../.."
source test/e2e/lib/time_scale.sh "$BUILD"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# every program of PATH but gnuplot, the first of each name as PATH finds it
mkdir "$dir/bin"
IFS=: read -r -a path_dirs <<<"$PATH"
for p in "${path_dirs[@]}"; do
  [ -d "$p" ] && ln -s -t "$dir/bin" "$p"/* 2>/dev/null || true
done
rm -f "$dir/bin"/gnuplot*
PATH="$dir/bin" command -v gnuplot >/dev/null && fail "gnuplot is still in the trimmed PATH"

TINY=(-o 'layer fc1.num_output=32' -o 'layer fc2.num_output=32' -o job.threads=1 -o emulate.clock=virtual
      -o emulate.step_ms=10 -o emulate.nic_mbit=1000 -o emulate.latency_ms=0.05)
sweep() {  # OUT PATH [ARGS...]
  local out=$1 path=$2
  shift 2
  timeout -k 5 "$(scaled 120)" env PATH="$path" "$BUILD/shoal" compare examples/fashion-mnist/mlp.conf \
    --schemes sandblaster,downpour --workers 1,2 --budget samples=1280 --points 1 --out "$out" --quiet "${TINY[@]}" "$@"
}

rc=0
sweep "$dir/sweep" "$dir/bin" >"$dir/out" 2>"$dir/err" || rc=$?
[ "$rc" = 0 ] || { tail -5 "$dir/err"; fail "compare without gnuplot exited $rc"; }
for f in results.csv scale.csv figures.gp scale.gp report.md data/scale-downpour.dat; do
  [ -s "$dir/sweep/$f" ] || fail "no $f"
done
ls "$dir/sweep"/*.png >/dev/null 2>&1 && fail "PNGs without gnuplot?"
[ "$(grep -c 'gnuplot is not installed' "$dir/err")" = 1 ] || { cat "$dir/err"; fail "not one warning"; }
cmd="cd $dir/sweep && gnuplot figures.gp && gnuplot scale.gp"
grep -qF "WARNING **" "$dir/err" && grep -qF "the figures are not drawn ($dir/sweep has results.csv" "$dir/err" \
  && grep -qF "draw them later with \`$cmd\`" "$dir/err" || { cat "$dir/err"; fail "the warning"; }
grep -qF "the figures' data and scripts (not drawn: no gnuplot)" "$dir/out" || { cat "$dir/out"; fail "the summary"; }
grep -qF '**The figures are not drawn**' "$dir/sweep/report.md" \
  && grep -qF '`gnuplot figures.gp && gnuplot scale.gp` here draws them' "$dir/sweep/report.md" \
  && grep -q '^## Scaling' "$dir/sweep/report.md" || fail "report.md does not say how to draw the figures"
[ "$(grep -c '^\(sandblaster\|downpour\),[12],1,' "$dir/sweep/scale.csv")" = 4 ] || fail "scale.csv's rows"
echo "without gnuplot: data, scripts, report.md, one warning, exit 0: ok"

if ! command -v gnuplot >/dev/null; then
  echo "gnuplot is not installed here (make deps): drawing later and a failing gnuplot are not tried"
else
  # the warning's command draws every figure report.md links
  (eval "$cmd") >"$dir/draw.log" 2>&1 || { cat "$dir/draw.log"; fail "the warning's command: $cmd"; }
  links=$(sed -n 's/^!\[[^]]*\](\([^)]*\.png\))$/\1/p' "$dir/sweep/report.md")
  [ "$(echo "$links" | wc -l)" -ge 8 ] || fail "report.md links $(echo "$links" | wc -l) figures"
  for png in $links; do
    [ "$(head -c 8 "$dir/sweep/$png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] || fail "$png not drawn"
  done
  echo "drawn later: $(echo "$links" | wc -l) figures: ok"

  # replaced (--force) without gnuplot: no earlier PNG shows under a link
  sweep "$dir/sweep" "$dir/bin" --force >"$dir/out" 2>"$dir/err" || { tail -5 "$dir/err"; fail "the --force sweep"; }
  for png in $links; do
    [ ! -e "$dir/sweep/$png" ] || fail "the earlier comparison's $png is left under report.md's link"
  done
  echo "replaced without gnuplot: no earlier figure left: ok"

  # a gnuplot that fails on figures.gp and draws scale.gp
  real=$(command -v gnuplot)
  mkdir "$dir/failing"
  printf '#!/bin/sh\n[ "$1" = figures.gp ] || exec %s "$@"\necho "\\"$1\\" line 3: the test refuses this script" >&2\nexit 1\n' \
    "$real" >"$dir/failing/gnuplot"
  chmod +x "$dir/failing/gnuplot"
  rc=0
  sweep "$dir/failed" "$dir/failing:$PATH" >"$dir/out" 2>"$dir/err" || rc=$?
  [ "$rc" = 1 ] || { tail -5 "$dir/err"; fail "compare with a failing gnuplot exited $rc, not 1"; }
  grep -qF "shoal compare: gnuplot $dir/failed/figures.gp failed (" "$dir/err" \
    && grep -qF '"figures.gp" line 3: the test refuses this script' "$dir/err" \
    && grep -qF "(results.csv, report.md and the figures' data are written)" "$dir/err" \
    || { cat "$dir/err"; fail "the failing script's error"; }
  for f in results.csv scale.csv report.md scale-speedup.png; do
    [ -s "$dir/failed/$f" ] || fail "a failing figures.gp: no $f"
  done
  grep -q '^## Scaling' "$dir/failed/report.md" || fail "a failing figures.gp: report.md has no Scaling"
  [ -e "$dir/failed/accuracy-time.png" ] && fail "the failing script drew?"
  echo "a failing figures.gp: data, report, scale figures, exit 1 naming it: ok"
fi

# shoal plot's product is the figure: without gnuplot it fails as before
rc=0
env PATH="$dir/bin" "$BUILD/shoal" plot "$dir/sweep/runs/downpour-w1-r1" --out "$dir/plot.png" >"$dir/out" 2>&1 \
  || rc=$?
[ "$rc" != 0 ] && grep -qF 'gnuplot is not installed: `make deps` (or apt-get install gnuplot-nox) installs it' \
  "$dir/out" || { cat "$dir/out"; fail "shoal plot without gnuplot: rc $rc"; }
echo "shoal plot without gnuplot: refused: ok"
echo "compare_no_gnuplot: ok"
