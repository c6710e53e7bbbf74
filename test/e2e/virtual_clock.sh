#!/usr/bin/env bash
# The virtual clock ([emulate] clock = virtual, emulate/emulator.h): every
# unit in one process on a discrete-event scheduler.
#  1. repeatable: the same conf and seed give the same metrics.jsonl, line
#     for line, but for the wall-clock "time" - here with a slowed group,
#     seeded random delays, limited links and Hogwild's elastic group sync;
#  2. more emulated workers than cores: 8 groups on this machine's cores,
#     each group's curve in virtual time, the slowed one behind;
#  3. a lost group: Downpour goes on without it when all_groups_required
#     is false, fails when it is true; SSP's survivors wait for it;
#  4. backup workers drop the straggler's gradients in virtual time.
# Usage: virtual_clock.sh BUILD
set -euo pipefail
BUILD=$(cd "${1:-build}" && pwd)
cd "$(dirname "$0")/../.."
source test/e2e/lib/time_scale.sh "$BUILD"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

SMALL=(-o job.epochs=0 -o job.test_steps=10 -o job.disp_freq=10 -o 'layer fc1.num_output=64'
       -o 'layer fc2.num_output=64' -o job.threads=1 -o emulate.clock=virtual -o emulate.step_ms=8)
run() {  # NAME ARGS...: a virtual run; its exit status in $dir/NAME.rc
  local name=$1 rc=0
  shift
  timeout -k 5 "$(scaled 120)" "$BUILD/shoal" run examples/fashion-mnist/mlp.conf "${SMALL[@]}" --workspace "$dir/$name" "$@" \
    >"$dir/$name.out" 2>"$dir/$name.err" || rc=$?
  echo "$rc" >"$dir/$name.rc"
}

# 1. the same run twice
EMU=(--topology conf/elastic.conf -o job.train_steps=120 -o job.test_freq=40 -o emulate.slow_groups=1
     -o emulate.slow_factor=2 -o 'emulate.slow_delay=normal(5, 2)' -o emulate.bandwidth_mbit=1000
     -o emulate.latency_ms=0.2 -o job.metrics_interval=0.2)
run a "${EMU[@]}"
run b "${EMU[@]}"
[ "$(cat "$dir/a.rc")" = 0 ] && [ "$(cat "$dir/b.rc")" = 0 ] || { tail "$dir/a.err"; fail "the elastic run failed"; }
strip() { sed 's/"time":[0-9.]*,//' "$1"; }
diff <(strip "$dir/a/metrics.jsonl") <(strip "$dir/b/metrics.jsonl") >/dev/null \
  || { diff <(strip "$dir/a/metrics.jsonl") <(strip "$dir/b/metrics.jsonl") | head; fail "two runs of one seed differ"; }
# another seed draws other delays: other times
run c "${EMU[@]}" -o job.seed=2
diff -q <(strip "$dir/a/metrics.jsonl") <(strip "$dir/c/metrics.jsonl") >/dev/null && fail "seed 2 repeated seed 1"
/usr/bin/python3 - "$dir/a/metrics.jsonl" <<'PY' || fail "metrics of the virtual run"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
assert all("vtime" in r and "time" in r for r in lines), "a line without vtime"
train = [r for r in lines if r["phase"] == "train"]
test = [r for r in lines if r["phase"] == "test"]
proc = [r for r in lines if r["phase"] == "process"]
for g in (0, 1):
    t = [r for r in train if r["group"] == g]
    assert t[-1]["step"] == 120, t[-1]
    assert all(a["vtime"] < b["vtime"] for a, b in zip(t, t[1:])), "vtime goes back"
# group 1, twice as slow and delayed, ends later in virtual time
end = {g: max(r["vtime"] for r in train if r["group"] == g) for g in (0, 1)}
assert end[1] > 1.8 * end[0], end
assert max(r["accuracy"] for r in test if r["group"] == 0) > 0.6, test
# the elastic group sync crossed the links: bytes between the two processes
assert max(r["bytes_sent"] for r in proc) > 0, proc
print("virtual run: group ends at %.3f and %.3f virtual s" % (end[0], end[1]))
PY
"$BUILD/shoal" plot "$dir/a" "$dir/c" --out "$dir/plot.png" >/dev/null 2>&1 || fail "shoal plot of virtual runs"
grep -q 'set xlabel "virtual time (s)"' "$dir/plot.png.gp" || fail "shoal plot's axis is not virtual time"
echo "1. repeatable: ok"

# 2. eight groups of one worker on this machine's cores
run eight --topology conf/downpour.conf -o cluster.nworker_groups=8 -o cluster.nworkers_per_group=1 \
  -o cluster.nworkers_per_procs=1 -o job.train_steps=40 -o job.test_freq=0 -o emulate.slow_workers=7 \
  -o emulate.slow_factor=4
[ "$(cat "$dir/eight.rc")" = 0 ] || { tail "$dir/eight.err"; fail "8 groups"; }
grep -q "on the virtual clock: 8 units" "$dir/eight.err" || fail "not 8 units"
/usr/bin/python3 - "$dir/eight/metrics.jsonl" <<'PY' || fail "8 groups' metrics"
import json, sys
train = [json.loads(l) for l in open(sys.argv[1])]
train = [r for r in train if r["phase"] == "train"]
end = {g: max(r["vtime"] for r in train if r["group"] == g) for g in range(8)}
assert sorted(end) == list(range(8)), end
assert all(max(r["step"] for r in train if r["group"] == g) == 40 for g in range(8))
# the slowed group ends last, 4x the compute of the others
assert end[7] > 2.5 * max(end[g] for g in range(7)), end
print("8 groups: ends " + " ".join("%.3f" % end[g] for g in range(8)))
PY
echo "2. eight groups: ok"

# 3. a lost group
LOST=(--topology conf/downpour.conf -o job.train_steps=200 -o job.test_freq=0 -o emulate.fault_group=1
      -o emulate.fault_at=0.5)
run lost "${LOST[@]}" -o cluster.all_groups_required=false
[ "$(cat "$dir/lost.rc")" = 0 ] || { tail "$dir/lost.err"; fail "Downpour without its lost group"; }
grep -q "\[emulate\] fault: group 1 is lost at virtual 0.500 s" "$dir/lost.err" || fail "no fault line"
/usr/bin/python3 - "$dir/lost/metrics.jsonl" <<'PY' || fail "the lost group's metrics"
import json, sys
train = [json.loads(l) for l in open(sys.argv[1])]
train = [r for r in train if r["phase"] == "train"]
last = {g: max(r["step"] for r in train if r["group"] == g) for g in (0, 1)}
assert last[0] == 200 and last[1] < 200, last
assert max(r["vtime"] for r in train if r["group"] == 1) <= 0.5, "group 1 trained after its loss"
PY
run required "${LOST[@]}"
[ "$(cat "$dir/required.rc")" = 1 ] || fail "all_groups_required: exit $(cat "$dir/required.rc")"
grep -qF "shoal run: [emulate] group 1 was lost at virtual 0.500 s and [cluster] all_groups_required = true: the job fails (false: the other groups finish it)" \
  "$dir/required.err" || { tail -3 "$dir/required.err"; fail "all_groups_required message"; }
run ssp --topology conf/ssp.conf -o job.train_steps=200 -o job.test_freq=0 -o emulate.fault_group=1 \
  -o emulate.fault_at=0.5 -o cluster.all_groups_required=false
[ "$(cat "$dir/ssp.rc")" = 1 ] || fail "SSP with a lost group: exit $(cat "$dir/ssp.rc")"
grep -q "wait for pushes that never come (SSP: the lost group's clock never moves on" "$dir/ssp.err" \
  || { tail -3 "$dir/ssp.err"; fail "SSP's survivors"; }
echo "3. lost group: ok"

# 4. Sandblaster with a backup worker, worker 1 three times slower
run backup --topology conf/two-workers/backup.conf -o job.train_steps=60 -o job.test_freq=0 \
  -o emulate.slow_workers=1 -o emulate.slow_factor=3
[ "$(cat "$dir/backup.rc")" = 0 ] || { tail "$dir/backup.err"; fail "backup"; }
/usr/bin/python3 - "$dir/backup/metrics.jsonl" <<'PY' || fail "backup's drops"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
dropped = sum(r.get("dropped", 0) for r in lines if r["phase"] == "process")
assert dropped > 0, "no late gradient dropped"
print("backup: %d late gradients dropped" % dropped)
PY
echo "virtual_clock: ok"
