#!/usr/bin/env bash
# Bad input to shoal compare, shoal plot and the consistency keys: each
# gets an exact message naming the option or conf key, and a non-zero
# exit before anything runs.
# Usage: compare_errors.sh BUILD
set -uo pipefail
BUILD=$(cd "${1:-build}" && pwd)
cd "$(dirname "$0")/../.."
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
shoal="$BUILD/shoal"
job=examples/fashion-mnist/mlp.conf
failures=0

expect() {  # STATUS MESSAGE ARGS...
  local want_status=$1 want_msg=$2
  shift 2
  "$shoal" "$@" >"$dir/out" 2>"$dir/err"
  local status=$?
  if [ "$status" -ne "$want_status" ] || ! grep -qxF -- "$want_msg" "$dir/err"; then
    echo "FAIL: shoal $*"
    echo "  want exit $want_status and: $want_msg"
    echo "  got exit $status and: $(cat "$dir/err")"
    failures=$((failures + 1))
  else
    echo "ok: $want_msg"
  fi
}

known=$(cd conf && for s in sandblaster allreduce downpour hogwild ssp backup stale-lr downpour-dean elastic; do
          [ -f "$s.conf" ] && printf '%s, ' "$s"; done; ls *.conf | sed 's/\.conf$//' | sort \
          | grep -vxE 'sandblaster|allreduce|downpour|hogwild|ssp|backup|stale-lr|downpour-dean|elastic' | sed 's/$/, /' | tr -d '\n')
known=${known%, }
expect 2 "shoal compare: --schemes: unknown scheme 'nosuch' (conf has: $known; or give a topology file's path)" \
  compare "$job" --schemes sandblaster,nosuch --out "$dir/c"
expect 2 "shoal compare: --schemes: $dir/none.conf: no such topology file" \
  compare "$job" --schemes "$dir/none.conf" --out "$dir/c"
expect 2 "shoal compare: --schemes: 'downpour' is named twice" compare "$job" --schemes downpour,downpour --out "$dir/c"
expect 2 "shoal compare: --target 1.5: a test accuracy is above 0 and at most 1" compare "$job" --target 1.5 --out "$dir/c"
expect 2 "shoal compare: --target -0.2: a test accuracy is above 0 and at most 1" compare "$job" --target -0.2 --out "$dir/c"
expect 2 "shoal compare: --budget samples=0: the budget must be above 0 (and at most 1e15 samples)" \
  compare "$job" --budget samples=0 --out "$dir/c"
expect 2 "shoal compare: --budget seconds=-3: the budget must be above 0" compare "$job" --budget seconds=-3 --out "$dir/c"
expect 2 "shoal compare: --budget: 'steps' is neither samples nor seconds" compare "$job" --budget steps=5 --out "$dir/c"
expect 2 "shoal compare: --budget: 'samples=abc' is not samples=N or seconds=S" \
  compare "$job" --budget samples=abc --out "$dir/c"
expect 2 "shoal compare: --repeats 0: give 1 to 1000 runs per scheme" compare "$job" --repeats 0 --out "$dir/c"
expect 2 "shoal compare: expected one JOB.conf" compare --out "$dir/c"
expect 1 "shoal compare: -o cluster.staleness: [cluster] staleness: -5 is out of range [-1, 1000000]" \
  compare "$job" --schemes downpour -o cluster.staleness=-5 --out "$dir/c"
expect 1 "shoal compare: -o cluster.staleness: [cluster] staleness: SSP bounds how far worker groups run apart; one worker group trains synchronously (nworker_groups = 1)" \
  compare "$job" --schemes downpour,sandblaster -o cluster.staleness=1 --out "$dir/c"
[ -e "$dir/c" ] && { echo "FAIL: a refused compare made its output directory"; failures=$((failures + 1)); }

expect 2 "shoal plot: --x: 'steps' is not time or samples" plot "$dir" --out "$dir/p.png" --x steps
expect 2 "shoal plot: --y: 'speed' is not accuracy or loss" plot "$dir" --out "$dir/p.png" --y speed
expect 2 "shoal plot: --out FILE.png is required" plot "$dir"
expect 2 "shoal plot: expected at least one WORKSPACE (or its metrics.jsonl)" plot --out "$dir/p.png"
expect 1 "shoal plot: $dir/none: no metrics.jsonl (not the workspace of a run)" plot "$dir/none" --out "$dir/p.png"
printf '{"time":1,"phase":"test","group":0}\n' >"$dir/metrics.jsonl"
expect 1 "shoal plot: $dir/metrics.jsonl:1: a test line needs group, worker, step, loss and samples (metrics of an older shoal?)" \
  plot "$dir" --out "$dir/p.png"
printf 'not json\n' >"$dir/metrics.jsonl"
"$shoal" plot "$dir" --out "$dir/p.png" 2>"$dir/err" >/dev/null
grep -q "^shoal plot: $dir/metrics.jsonl:1: not a JSON object" "$dir/err" \
  && echo "ok: a line that is not JSON names its place" \
  || { echo "FAIL: not JSON: $(cat "$dir/err")"; failures=$((failures + 1)); }

# the consistency keys, each only where its scheme is
expect 1 "shoal run: -o cluster.staleness: [cluster] staleness: SSP bounds groups that share one server group; with nserver_groups = 2 each group updates a replica of its own (Hogwild)" \
  run "$job" --topology conf/hogwild.conf -o cluster.staleness=1
expect 1 "shoal run: -o cluster.backup_workers: [cluster] backup_workers: a group whose 2 workers share a process pushes one summed gradient; backup workers need each worker pushing its own (nworkers_per_procs < nworkers_per_group)" \
  run "$job" --topology conf/sandblaster.conf -o cluster.backup_workers=1
expect 1 "shoal run: -o cluster.backup_workers: [cluster] backup_workers: 4 of the 4 workers of the group: a step needs at least one gradient" \
  run "$job" --topology conf/backup.conf -o cluster.backup_workers=4
expect 1 "shoal run: -o cluster.backup_workers: [cluster] backup_workers: backup workers are a synchronous scheme's (nworker_groups = 1); 2 worker groups train asynchronously" \
  run "$job" --topology conf/downpour.conf -o cluster.backup_workers=1
expect 1 "shoal run: -o cluster.async_lr: [cluster] async_lr: 'fast' is not one of none|groups|staleness" \
  run "$job" --topology conf/downpour.conf -o cluster.async_lr=fast
expect 1 "shoal run: -o cluster.async_lr: [cluster] async_lr: sets the lr of asynchronous updates; one worker group trains synchronously" \
  run "$job" -o cluster.async_lr=none
expect 1 "shoal run: -o job.max_seconds: [job] max_seconds: -1 is out of range [0, 1000000000]" \
  run "$job" -o job.max_seconds=-1
# issue 23: --target 0 is refused (it once meant the default); an earlier
# comparison's report is not overwritten without --force; cd_k does
# nothing under alg = bp; --seq-len 0 is out of range, not missing
expect 2 "shoal compare: --target 0: a test accuracy is above 0 and at most 1" compare "$job" --target 0 --out "$dir/c"
mkdir -p "$dir/old" && echo "earlier" >"$dir/old/report.md"
expect 1 "shoal compare: --out $dir/old holds an earlier comparison (report.md): give another --out, or --force to replace it" \
  compare "$job" --schemes downpour --out "$dir/old"
[ "$(cat "$dir/old/report.md")" = earlier ] || { echo "FAIL: the earlier report was overwritten"; failures=$((failures + 1)); }
expect 1 "shoal run: -o job.cd_k: [job] cd_k: cd_k sets the Gibbs steps of alg = cd; this job trains with alg = bp (remove cd_k, or set alg = cd)" \
  run "$job" -o job.cd_k=3
"$shoal" import text --in README.md --out "$dir/t" --seq-len 0 >"$dir/out" 2>"$dir/err"
grep -q "^shoal import text: --seq-len must be 1 to 1048576" "$dir/err" \
  || { echo "FAIL: --seq-len 0: $(head -1 "$dir/err")"; failures=$((failures + 1)); }
# a live run's metrics.jsonl may end in a line still being written: plot
# leaves that line out and draws the rest; a broken line elsewhere is an error
mkdir -p "$dir/live"
cat >"$dir/live/metrics.jsonl" <<'JSON'
{"time":1.0,"step":10,"group":0,"worker":0,"phase":"train","loss":1.5,"accuracy":0.5,"samples":640}
{"time":1.5,"step":10,"group":0,"worker":0,"phase":"test","loss":1.4,"accuracy":0.55,"samples":640}
{"time":2.0,"step":20,"group":0,"worker":0,"phase":"train","loss":1.1,"accuracy":0.6,"samples":1280}
{"time":2.5,"step":20,"group":0,"worker":0,"phase":"test","loss":1.0,"accuracy":0.65,"samples":1280}
JSON
printf '{"time":3.0,"step":30,"gro' >>"$dir/live/metrics.jsonl"
if "$shoal" plot "$dir/live" --out "$dir/live.png" >"$dir/out" 2>"$dir/err" \
   && grep -q "metrics.jsonl:5: the last line is cut short (a run still writing it?): left out" "$dir/err"; then
  echo "ok: plot of a metrics file whose last line is cut short"
else
  echo "FAIL: plot of a metrics file whose last line is cut short: $(cat "$dir/err")"
  failures=$((failures + 1))
fi
sed -i '2s/.*/{"time":1.5,"st/' "$dir/live/metrics.jsonl"
"$shoal" plot "$dir/live" --out "$dir/live.png" >"$dir/out" 2>"$dir/err" && { echo "FAIL: a broken line inside was accepted"; failures=$((failures + 1)); }
grep -q "metrics.jsonl:2: not a JSON object" "$dir/err" || { echo "FAIL: the broken line: $(cat "$dir/err")"; failures=$((failures + 1)); }

# --jobs: a count in range; real-clock runs one at a time
expect 1 "shoal compare: --jobs 2: real-clock runs measure their own speed on this machine, so they run one at a time (-o emulate.clock=virtual runs several at once)" \
  compare "$job" --schemes downpour --jobs 2 --out "$dir/c"
expect 1 "shoal compare: --jobs -1: give 1 to 1024 runs at once (0: the default)" \
  compare "$job" --schemes downpour --jobs -1 -o emulate.clock=virtual -o emulate.step_ms=5 --out "$dir/c"

[ "$failures" -eq 0 ] || { echo "$failures failures"; exit 1; }
echo "compare_errors: ok"
