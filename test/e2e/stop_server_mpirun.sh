#!/usr/bin/env bash
# A stop signal sent to the server rank alone of a job that mpirun
# started (no shoal launcher to pass the stop on): the rank answers its
# peers' heartbeats STOPPING, every worker rank stops at its next step
# with a checkpoint, and every rank exits 130 (the servers' saying
# 'servers stopped with the job'); the same mpirun command with --resume
# finishes the job.  The server rank used to serve on for 5 s, exit 0,
# and leave its workers failing on its closed port ('cannot connect:
# Connection refused', exit 1).  Skipped (exit 77) without mpirun (Debian
# package openmpi-bin, which make deps installs).  Every wait is bounded.
# Usage: stop_server_mpirun.sh BUILD
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
# each rank's exit status, as mpirun reports only the first
cat >"$dir/rank.sh" <<SH
"$BUILD/shoal" proc "$dir/job.conf" --hostfile "$dir/hosts" --base-port $base --token-file "$dir/token" \
  --workspace "$ws" "\$@"
echo "rank \$OMPI_COMM_WORLD_RANK: exit \$?" >>"$dir/exits"
SH
# orte_enable_recovery (Open MPI 4): mpirun would end every rank once one
# exits non-zero, which a stopped one does (130)
mpirun_cmd=(mpirun --allow-run-as-root --oversubscribe -np 3 --hostfile "$dir/hosts" --mca orte_enable_recovery 1)

# paced (20 ms a step) so that the signal finds both groups training
SHOAL_INJECT_STEP_DELAY=0:20,1:20 timeout -k 10 "$(scaled 150)" "${mpirun_cmd[@]}" -x SHOAL_INJECT_STEP_DELAY \
  bash "$dir/rank.sh" >"$dir/stop.out" 2>"$dir/stop.err" &
mpi=$!
trained=0
for _ in $(seq "$(scaled 600)"); do   # both groups' train lines (bounded: 60 s)
  lines=$(grep -c '"worker":0,"phase":"train"' "$ws/metrics.jsonl" 2>/dev/null || true)
  [ "${lines:-0}" -ge 4 ] && { trained=1; break; }
  kill -0 "$mpi" 2>/dev/null || break
  sleep 0.1
done
[ "$trained" -eq 1 ] || { tail -20 "$dir/stop.err"; fail "the groups never trained"; }
server=
for pid in $(pgrep -f -- "^$BUILD/shoal proc $dir/job.conf" || true); do
  tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx 'OMPI_COMM_WORLD_RANK=2' && server=$pid
done
[ -n "$server" ] || fail "no server rank (rank 2) to signal"
kill -TERM "$server"
rc=0
wait "$mpi" || rc=$?
mpi=
[ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] || fail "the stop hung (timeout)"
cat "$dir/stop.out" "$dir/exits"
if grep -q "cannot connect" "$dir/stop.err"; then
  grep -v '^\*\*' "$dir/stop.err" | tail -20
  fail "a worker rank failed on the server rank's closed port"
fi
for g in 0 1; do
  grep -qE "^rank $g: group $g worker 0: stopped at step [0-9]+ with a checkpoint$" "$dir/stop.out" \
    || fail "rank $g did not stop with a checkpoint"
  grep -qF "rank $g: rank 2 (2 servers) on 127.0.0.1 was sent a stop signal; stopping with a checkpoint" \
    "$dir/stop.err" || fail "rank $g did not say why it stopped"
done
grep -qx "rank 2: servers stopped with the job (a stop request)" "$dir/stop.out" || fail "rank 2 did not say it stopped"
for r in 0 1 2; do
  grep -qx "rank $r: exit 130" "$dir/exits" || fail "rank $r did not exit 130 (stopped)"
done
echo "ok: SIGTERM to the server rank under mpirun stopped every rank with a checkpoint (exit 130)"

rc=0
timeout -k 10 "$(scaled 150)" "${mpirun_cmd[@]}" bash "$dir/rank.sh" --resume >"$dir/resume.out" 2>"$dir/resume.err" \
  || rc=$?
cat "$dir/resume.out"
[ "$rc" -eq 0 ] || { grep -v '^\*\*' "$dir/resume.err" | tail -20; fail "mpirun --resume exited with $rc"; }
for g in 0 1; do
  grep -qE "^rank $g: group $g worker 0: 300 steps at [0-9]+ samples/s, test accuracy " "$dir/resume.out" \
    || fail "no result line of rank $g after --resume"
  [ "$(grep -c "\"step\":300,\"group\":$g,\"worker\":0,\"phase\":\"train\"" "$ws/metrics.jsonl")" -eq 1 ] \
    || fail "group $g's last train line is not there once"
done
if pgrep -f -- "$dir/" >/dev/null; then pgrep -fa -- "$dir/"; fail "processes left behind"; fi
echo "stop_server_mpirun: ok"
