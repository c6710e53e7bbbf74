#!/usr/bin/env bash
# Bad [emulate] input through the command line: each is refused before
# anything runs, with a non-zero exit and a message naming the key (and
# the -o or the file line it came from).
# Usage: emulate_errors.sh BUILD
set -euo pipefail
BUILD=$(cd "${1:-build}" && pwd)
cd "$(dirname "$0")/../.."
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

JOB=examples/fashion-mnist/mlp.conf
# expect_run MESSAGE ARGS...: shoal run fails with exactly MESSAGE on stderr
expect_run() {
  local want=$1 rc=0
  shift
  "$BUILD/shoal" run "$JOB" --workspace "$dir/ws" "$@" >"$dir/out" 2>"$dir/err" || rc=$?
  [ "$rc" -ne 0 ] || fail "shoal run $* succeeded"
  grep -qxF "shoal run: $want" "$dir/err" || { cat "$dir/err"; fail "expected: shoal run: $want"; }
  [ ! -e "$dir/ws/metrics.jsonl" ] || fail "shoal run $* started training"
}

expect_run "-o emulate.slow_factor: [emulate] slow_factor: 0.5 is below 1 (a factor makes a step take factor x its measured compute time; 1 = no slowdown)" \
  --topology conf/downpour.conf -o emulate.slow_groups=1 -o emulate.slow_factor=0.5
expect_run "-o emulate.slow_delay: [emulate] slow_delay: unknown distribution 'gamma' (known: exponential(MEAN_MS), uniform(LOW_MS, HIGH_MS), normal(MEAN_MS, SD_MS), lognormal(MU, SIGMA), pareto(SCALE_MS, SHAPE) or none)" \
  --topology conf/downpour.conf -o emulate.slow_groups=1 -o 'emulate.slow_delay=gamma(2, 3)'
expect_run "-o emulate.bandwidth_mbit: [emulate] bandwidth_mbit: 0 is not a bandwidth: give Mbit/s above 0 and at most 1e7 (leave the key out for no limit)" \
  -o emulate.bandwidth_mbit=0
expect_run "-o emulate.slow_groups: [emulate] slow_groups: group 2 does not exist: the layout has 2 worker groups, 0 .. 1" \
  --topology conf/downpour.conf -o emulate.slow_groups=2 -o emulate.slow_factor=3
expect_run "-o emulate.fault_group: [emulate] fault_group: group 3 does not exist: the layout has 1 worker group, 0 .. 0" \
  --topology conf/sandblaster.conf -o emulate.fault_group=3 -o emulate.fault_at=5
expect_run "-o emulate.clock: [emulate] clock: 'wall' is not one of real|virtual" -o emulate.clock=wall
expect_run "-o cluster.elastic_alpha: [cluster] elastic_alpha: 1.5 is not in (0, 1]: the replica and the center move alpha of the way toward each other" \
  --topology conf/elastic.conf -o cluster.elastic_alpha=1.5
expect_run "-o cluster.hogwild_sync: [cluster] hogwild_sync: is how Hogwild's server groups meet; with nserver_groups = 1 there is one replica" \
  --topology conf/downpour.conf -o cluster.hogwild_sync=elastic
# the virtual clock cannot resume: it keeps no checkpoint
expect_run "examples/fashion-mnist/mlp.conf: a virtual-clock run keeps no checkpoint to resume from; run it again: it repeats exactly" \
  -o emulate.clock=virtual --resume

# shoal compare: the same checks before any run, and an emulation file's own lines
expect_compare() {
  local want=$1 rc=0
  shift
  "$BUILD/shoal" compare "$JOB" --out "$dir/cmp" -q "$@" >"$dir/out" 2>"$dir/err" || rc=$?
  [ "$rc" -ne 0 ] || fail "shoal compare $* succeeded"
  grep -qxF "shoal compare: $want" "$dir/err" || { cat "$dir/err"; fail "expected: shoal compare: $want"; }
  [ ! -d "$dir/cmp/runs" ] || fail "shoal compare $* ran something"
}
expect_compare "-o emulate.slow_factor: [emulate] slow_factor: 0.9 is below 1 (a factor makes a step take factor x its measured compute time; 1 = no slowdown)" \
  --schemes downpour -o emulate.slow_workers=1 -o emulate.slow_factor=0.9
printf '[emulate]\nclock = virtual\nslow_workers = 1\nslow_delay = weibull(1, 2)\n' >"$dir/bad.conf"
expect_compare "--emulate: $dir/bad.conf:4: [emulate] slow_delay: unknown distribution 'weibull' (known: exponential(MEAN_MS), uniform(LOW_MS, HIGH_MS), normal(MEAN_MS, SD_MS), lognormal(MU, SIGMA), pareto(SCALE_MS, SHAPE) or none)" \
  --emulate "$dir/bad.conf"
printf '[emulate]\nbandwidth_mbit = 0\n' >"$dir/bw.conf"
expect_compare "--emulate: $dir/bw.conf:2: [emulate] bandwidth_mbit: 0 is not a bandwidth: give Mbit/s above 0 and at most 1e7 (leave the key out for no limit)" \
  --emulate "$dir/bw.conf"
printf '[cluster]\nnworker_groups = 2\n' >"$dir/topo.conf"
expect_compare "--emulate: $dir/topo.conf:1: [cluster] an emulation file holds only an [emulate] section" \
  --emulate "$dir/topo.conf"
# a worker that exists in one scheme's layout and not in another's
expect_compare "-o emulate.slow_workers: [emulate] slow_workers: worker 3 does not exist: the layout has 2 workers (1 group of 2), 0 .. 1" \
  --schemes downpour,sandblaster -o emulate.slow_workers=3 -o emulate.slow_factor=2
echo "emulate_errors: ok"
