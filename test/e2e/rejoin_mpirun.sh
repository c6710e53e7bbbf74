#!/usr/bin/env bash
# A rank of an mpirun-started Hogwild job ([cluster] all_groups_required
# = false) killed with SIGKILL while the other trains, restarted by hand
# with `shoal proc --rank 1 --rejoin` and the job's own arguments: it
# rejoins with the current values and both groups finish at the bar.
#
# mpirun cannot restart one rank of a running job, and by default it
# kills every rank when one dies; `--mca orte_enable_recovery 1` (Open
# MPI 4; `--enable-recovery` reads the same) keeps the others running,
# which is what a user does (README.md, "Checkpoints and faults").  The
# restart here is the command README.md gives, run on the rank's host.
# "With the current values": the rejoined group's first train line (step
# 20 again) has a lower loss than the killed process's step 20.  Both
# groups sleep at each step (a test hook), group 0 20 ms and group 1
# 10 ms, so that group 1 is killed mid-training (undelayed, it could end
# its 600 steps before its step-20 line was seen) and group 0 still
# trains when rank 1 is found lost 3 s later.  Skipped (exit 77) without mpirun (Debian package
# openmpi-bin, which make deps installs).  Every wait is bounded.
# Usage: rejoin_mpirun.sh BUILD
set -euo pipefail
BUILD=$(cd "${1:-build}" && pwd)
cd "$(dirname "$0")/../.."
source test/e2e/lib/time_scale.sh "$BUILD"
source test/e2e/lib/topology.sh   # small_job_conf, make_token, free_ports_base, fail
source test/e2e/lib/mpirun_job.sh  # the skip without mpirun, $dir, $mpi, the cleanup

small_job_conf "$dir/job.conf" conf/hogwild.conf
sed -i 's/^disp_freq = 100$/disp_freq = 20/' "$dir/job.conf"
printf 'all_groups_required = false\nheartbeat_interval = 0.5\nheartbeat_timeout = 3\n' >>"$dir/job.conf"
make_token "$dir/token"
printf '127.0.0.1\n127.0.0.1\n' >"$dir/hosts"
base=$(free_ports_base 2)
ws=$dir/ws
args=("$dir/job.conf" --hostfile "$dir/hosts" --base-port "$base" --token-file "$dir/token" --workspace "$ws" -q)

SHOAL_INJECT_STEP_DELAY=0:20,1:10 timeout -k 10 "$(scaled 150)" mpirun --allow-run-as-root --oversubscribe \
  --mca orte_enable_recovery 1 -x SHOAL_INJECT_STEP_DELAY -np 2 --hostfile "$dir/hosts" \
  "$BUILD/shoal" proc "${args[@]}" >"$dir/mpi.out" 2>"$dir/mpi.err" &
mpi=$!

# rank 1's process: the one whose environment says OMPI_COMM_WORLD_RANK=1
rank1_pid() {
  local p
  for p in $(pgrep -f -- "proc $dir/job.conf" || true); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx 'OMPI_COMM_WORLD_RANK=1' && { echo "$p"; return; }
  done
}
trained=0
for _ in $(seq "$(scaled 600)"); do   # group 1's first train line (bounded: 60 s)
  grep -q '"group":1,"worker":0,"phase":"train"' "$ws/metrics.jsonl" 2>/dev/null && { trained=1; break; }
  kill -0 "$mpi" 2>/dev/null || break
  sleep 0.1
done
[ "$trained" -eq 1 ] || { cat "$dir/mpi.err"; fail "group 1 never trained"; }
pid=$(rank1_pid)
[ -n "$pid" ] || fail "no rank 1 process"
kill -KILL "$pid"

# rank 0 finds it lost (heartbeat_timeout 3 s; bounded: 30 s), and goes on
lost=0
for _ in $(seq "$(scaled 300)"); do
  grep -q "rank 0: group 1 lost: " "$dir/mpi.err" && { lost=1; break; }
  kill -0 "$mpi" 2>/dev/null || break
  sleep 0.1
done
[ "$lost" -eq 1 ] || { cat "$dir/mpi.out" "$dir/mpi.err"; fail "rank 0 did not find rank 1 lost"; }

# the restart, by hand, as README.md says
rc=0
timeout -k 10 "$(scaled 150)" "$BUILD/shoal" proc "${args[@]}" --rank 1 --rejoin >"$dir/rejoin.out" 2>"$dir/rejoin.err" || rc=$?
cat "$dir/rejoin.out"
grep -v '^\*\*' "$dir/rejoin.err" | grep -v '^$' | tail -20 || true
[ "$rc" -ne 124 ] || fail "the rejoined rank hung (timeout)"
[ "$rc" -eq 0 ] || fail "the rejoined rank exited with $rc"
mrc=0
wait "$mpi" || mrc=$?
mpi=
cat "$dir/mpi.out"
grep -v '^\*\*' "$dir/mpi.err" | grep -v '^$' | tail -20 || true
[ "$mrc" -ne 124 ] || fail "mpirun hung (timeout)"
[ "$mrc" -eq 0 ] || fail "mpirun exited with $mrc"

grep -q "rank 1: rejoining at step " "$dir/rejoin.err" || fail "rank 1 did not rejoin"
grep -q "rank 0: .*rejoined the job (a restarted process)" "$dir/mpi.err" || fail "rank 0 did not take rank 1 back"
grep -qE "^rank 1: group 1 worker 0: 600 steps at [0-9]+ samples/s, test accuracy " "$dir/rejoin.out" \
  || fail "no result line of the rejoined rank"
grep -qE "^rank 0: group 0 worker 0: 600 steps at [0-9]+ samples/s, test accuracy " "$dir/mpi.out" \
  || fail "no result line of rank 0"
! grep -q "worker groups lost and dropped" "$dir/mpi.out" "$dir/rejoin.out" \
  || fail "a rank still counts the rejoined group as lost"
/usr/bin/python3 test/e2e/lib/rejoined_metrics.py "$ws/metrics.jsonl" || fail "metrics"
if pgrep -f -- "$dir/" >/dev/null; then pgrep -fa -- "$dir/"; fail "processes left behind"; fi
echo "rejoin_mpirun: ok"
