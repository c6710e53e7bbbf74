#!/usr/bin/env bash
# `shoal proc --resume` under mpirun (issue 23): a Downpour job started by
# mpirun, its ranks sent SIGINT as a scheduler would, stops each group at
# its own step (group 0 sleeps 20 ms a step, group 1 10 ms: a test hook,
# so they are far apart); the same mpirun command with --resume goes on
# with each rank at its own group's step - the resume plan's, as
# `shoal run --resume` gives its ranks (workspace/resume_plan.h) - and not at
# one step common to all (which such a stop does not have, or which sends
# a group back over steps it wrote).  metrics.jsonl then holds every
# group's train lines once, every disp_freq steps up to the last, with
# the samples counter at step x batch: the lines the stopped run wrote
# past its checkpoints were dropped by their own ranks and none twice.
# Before it, a --resume of another model is refused by every rank with
# metrics.jsonl as it was.
# Skipped (exit 77) without mpirun (Debian package openmpi-bin, which make
# deps installs).  Every wait is bounded.  Usage: resume_mpirun.sh BUILD
set -euo pipefail
BUILD=$(cd "${1:-build}" && pwd)
cd "$(dirname "$0")/../.."
source test/e2e/lib/time_scale.sh "$BUILD"
source test/e2e/lib/topology.sh   # small_job_conf, make_token, free_ports_base, fail
source test/e2e/lib/mpirun_job.sh  # the skip without mpirun, $dir, $mpi, the cleanup

small_job_conf "$dir/job.conf" conf/downpour.conf
sed -i -e 's/^disp_freq = 100$/disp_freq = 10/' -e 's/^train_steps = 600$/train_steps = 300/' "$dir/job.conf"
make_token "$dir/token"
printf '127.0.0.1\n127.0.0.1\n127.0.0.1\n' >"$dir/hosts"
base=$(free_ports_base 3)
ws=$dir/ws
args=("$dir/job.conf" --hostfile "$dir/hosts" --base-port "$base" --token-file "$dir/token" --workspace "$ws")
mpirun_cmd=(mpirun --allow-run-as-root --oversubscribe -np 3 --hostfile "$dir/hosts")

# orte_enable_recovery (Open MPI 4): by default mpirun kills every rank
# once one exits non-zero, which a rank stopped by SIGINT does (130)
# while the others may still be saving their stop checkpoints
SHOAL_INJECT_STEP_DELAY=0:20,1:10 timeout -k 10 "$(scaled 150)" "${mpirun_cmd[@]}" --mca orte_enable_recovery 1 \
  -x SHOAL_INJECT_STEP_DELAY \
  "$BUILD/shoal" proc "${args[@]}" >"$dir/stop.out" 2>"$dir/stop.err" &
mpi=$!
trained=0
for _ in $(seq "$(scaled 600)"); do   # group 0's fourth train line (bounded: 60 s)
  lines=$(grep -c '"group":0,"worker":0,"phase":"train"' "$ws/metrics.jsonl" 2>/dev/null || true)
  [ "${lines:-0}" -ge 4 ] && { trained=1; break; }
  kill -0 "$mpi" 2>/dev/null || break
  sleep 0.1
done
[ "$trained" -eq 1 ] || { tail -20 "$dir/stop.err"; fail "group 0 never trained"; }
pids=$(pgrep -f -- "^$BUILD/shoal proc $dir/job.conf" || true)
[ "$(echo $pids | wc -w)" -eq 3 ] || fail "not 3 ranks: $pids"
kill -INT $pids
rc=0
wait "$mpi" || rc=$?
mpi=
[ "$rc" -ne 124 ] || fail "the stop hung (timeout)"
cat "$dir/stop.out"
for g in 0 1; do
  grep -qE "^rank $g: group $g worker 0: stopped at step [0-9]+ with a checkpoint$" "$dir/stop.out" \
    || { grep -v '^\*\*' "$dir/stop.err" | tail -20; fail "rank $g did not stop with a checkpoint"; }
done
stop0=$(sed -n 's/^rank 0: group 0 worker 0: stopped at step \([0-9]*\) .*/\1/p' "$dir/stop.out")
stop1=$(sed -n 's/^rank 1: group 1 worker 0: stopped at step \([0-9]*\) .*/\1/p' "$dir/stop.out")
[ "$stop0" -ne "$stop1" ] || fail "both groups stopped at step $stop0: nothing to tell apart"

# --resume of another model (no job.conf under mpirun: the conf the
# units saved with their checkpoints): refused by every rank before any
# drops its metrics lines past the checkpoints (the worker ranks used
# to, before the server rank's restore refused it)
sed '0,/^num_output = 256$/s//num_output = 128/' "$dir/job.conf" >"$dir/other.conf"
cp "$ws/metrics.jsonl" "$dir/metrics.kept"
rc=0
timeout -k 10 "$(scaled 150)" "${mpirun_cmd[@]}" "$BUILD/shoal" proc "$dir/other.conf" "${args[@]:1}" --resume \
  >"$dir/other.out" 2>"$dir/other.err" || rc=$?
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "--resume of another model: exit $rc"
# (mpirun ends the other ranks once one exits non-zero: one says why)
grep -q "^shoal proc (rank [012]): $ws: cannot resume: its checkpoints belong to another model: \[layer fc1\] num_output is 256 in the checkpoint of step [0-9]* ($ws/checkpoint/rank-[01]), 128 in this job" \
  "$dir/other.err" || { grep -v '^\*\*' "$dir/other.err" | tail; fail "no rank refused another model"; }
cmp -s "$ws/metrics.jsonl" "$dir/metrics.kept" || fail "the refused --resume changed metrics.jsonl"
if pgrep -f -- "$dir/" >/dev/null; then pgrep -fa -- "$dir/"; fail "processes left behind by the refused --resume"; fi

rc=0
timeout -k 10 "$(scaled 150)" "${mpirun_cmd[@]}" "$BUILD/shoal" proc "${args[@]}" --resume \
  >"$dir/resume.out" 2>"$dir/resume.err" || rc=$?
cat "$dir/resume.out"
[ "$rc" -eq 0 ] || { grep -v '^\*\*' "$dir/resume.err" | tail -20; fail "mpirun --resume exited with $rc"; }
for r in 0 1 2; do
  grep -oE "rank $r: resuming at step [0-9]+" "$dir/resume.err" || fail "rank $r did not say where it resumed"
done
grep -q "rank 0: resuming at step $stop0 " "$dir/resume.err" || fail "rank 0 did not resume at its stop ($stop0)"
grep -q "rank 1: resuming at step $stop1 " "$dir/resume.err" || fail "rank 1 did not resume at its stop ($stop1)"
for g in 0 1; do
  grep -qE "^rank $g: group $g worker 0: 300 steps at [0-9]+ samples/s, test accuracy " "$dir/resume.out" \
    || fail "no result line of rank $g"
done
/usr/bin/python3 - "$ws/metrics.jsonl" <<'PY' || fail "metrics.jsonl is not that of one run"
import collections, json, sys
steps = collections.defaultdict(list)
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r["phase"] == "train":
        steps[(r["group"], r["worker"])].append((r["step"], r["samples"]))
ok = sorted(steps) == [(0, 0), (1, 0)]   # one unit (a group net of 2 workers) per group
for unit, got in sorted(steps.items()):
    want = list(range(10, 301, 10))
    seen = sorted(s for s, _ in got)
    per_step = {n / s for s, n in got}
    if seen != want or len(per_step) != 1:
        ok = False
        print(f"group {unit[0]} worker {unit[1]}: train steps {seen[:5]}... ({len(seen)} lines, "
              f"{len(want)} due), samples per step {sorted(per_step)}")
print(f"metrics: both groups' train lines once each up to step 300" if ok else f"metrics: wrong (units {sorted(steps)})")
sys.exit(0 if ok else 1)
PY
if pgrep -f -- "$dir/" >/dev/null; then pgrep -fa -- "$dir/"; fail "processes left behind"; fi
echo "resume_mpirun: groups stopped at $stop0 and $stop1, resumed there: ok"
