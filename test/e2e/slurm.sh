#!/usr/bin/env bash
# shoal under a real Slurm (Debian's slurm-wlm 22.05 and munge): the test
# starts a one-node cluster of its own - munged, slurmctld and slurmd on
# private sockets and ports, 8 CPUs declared, every state, spool, log and
# pid file in a temporary directory, nothing outside it touched - then
# trains the four SINGA schemes through `srun -n N shoal proc JOB.conf`
# (no hostfile: ranks and hosts from Slurm's environment, the token from
# SHOAL_TOKEN) to their bars, submits examples/slurm/train.sbatch, requeues
# it while it trains and checks that it resumed from a checkpoint and
# ended exactly where an uninterrupted run of the same job ends, and
# stops the daemons.  Every wait is bounded.
# may-skip-in-ci: slurmd must run as root (it starts tasks as their user); a runner without root or password-less sudo cannot, and no package gives that
# Usage: slurm.sh BUILD
set -euo pipefail
source "$(dirname "$0")/lib/as_root.sh" "$@"
BUILD=$(cd "${1:-build}" && pwd)
cd "$(dirname "$0")/../.."
source test/e2e/lib/time_scale.sh "$BUILD"
source test/e2e/lib/topology.sh

if [ "$(id -u)" -ne 0 ]; then
  echo "SKIP: slurmd needs root (it starts each task as its user) and there is no password-less sudo"
  exit 77
fi
for c in munged munge slurmctld slurmd srun sbatch scontrol squeue; do
  command -v "$c" >/dev/null || { echo "SKIP: $c not found: make deps installs slurm-wlm and munge"; exit 77; }
done

dir=$(mktemp -d /tmp/shoal-slurm-XXXXXX)
chmod 711 "$dir"
cleanup() {
  set +e
  if [ -f "$dir/slurm.conf" ]; then
    scancel --full --quiet --user=root 2>/dev/null
    for p in slurmd slurmctld; do
      [ -f "$dir/$p.pid" ] && kill "$(cat "$dir/$p.pid")" 2>/dev/null
    done
    for _ in $(seq "$(scaled 50)"); do
      { [ -f "$dir/slurmd.pid" ] && kill -0 "$(cat "$dir/slurmd.pid")" 2>/dev/null; } \
        || { [ -f "$dir/slurmctld.pid" ] && kill -0 "$(cat "$dir/slurmctld.pid")" 2>/dev/null; } || break
      sleep 0.1
    done
  fi
  [ -S "$dir/munge/munge.sock" ] && munged --stop --socket="$dir/munge/munge.sock" >/dev/null 2>&1
  rm -rf "$dir"
}
trap cleanup EXIT

# ---- a one-node cluster ------------------------------------------------------
mkdir -p "$dir/munge" "$dir/state" "$dir/spool" "$dir/log"
chmod 711 "$dir/munge"
head -c 1024 /dev/urandom >"$dir/munge/munge.key"
chmod 400 "$dir/munge/munge.key"
munged --force --socket="$dir/munge/munge.sock" --key-file="$dir/munge/munge.key" \
  --log-file="$dir/log/munged.log" --pid-file="$dir/munge/munged.pid" --seed-file="$dir/munge/seed" \
  || { echo "SKIP: munged does not start here: $(tail -2 "$dir/log/munged.log" 2>/dev/null)"; exit 77; }

# two free ports for the daemons
read -r ctld_port slurmd_port < <(/usr/bin/python3 -c '
import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])')
node=$(hostname -s)
cat >"$dir/slurm.conf" <<EOF
ClusterName=shoaltest
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# a requeued job waits cred_expire + 1 s before it may start again (120 s by default, 5 at least)
AuthInfo=socket=$dir/munge/munge.sock,cred_expire=5
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
PlugStackConfig=$dir/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
JobRequeue=1
KillWait=20
InactiveLimit=0
NodeName=$node NodeAddr=127.0.0.1 CPUs=8 RealMemory=1000 State=UNKNOWN
PartitionName=test Nodes=ALL Default=YES MaxTime=60 State=UP
EOF
: >"$dir/plugstack.conf"
export SLURM_CONF=$dir/slurm.conf
slurmctld -i -f "$SLURM_CONF" || { tail -5 "$dir/log/slurmctld.log"; fail "slurmctld did not start"; }
slurmd -f "$SLURM_CONF" || { tail -5 "$dir/log/slurmd.log"; fail "slurmd did not start"; }
state=
for _ in $(seq "$(scaled 100)"); do
  state=$(sinfo -h -o %T 2>/dev/null || true)
  [ "$state" = idle ] && break
  sleep 0.2
done
[ "$state" = idle ] || { tail -5 "$dir/log/slurmctld.log" "$dir/log/slurmd.log"; fail "the node is '$state', not idle"; }
echo "one-node Slurm up: $node, $(sinfo -h -o %c) CPUs, slurmctld port $ctld_port"

SHOAL_TOKEN=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
export SHOAL_TOKEN

# ---- the four SINGA schemes through srun ------------------------------------
# scheme, processes, groups
for spec in "sandblaster 2 1" "allreduce 2 1" "downpour 3 2" "hogwild 2 2"; do
  read -r scheme nprocs ngroups <<<"$spec"
  small_job_conf "$dir/$scheme.conf" "conf/$scheme.conf"
  rc=0
  timeout -k 10 "$(scaled 150)" srun -n "$nprocs" --kill-on-bad-exit=1 "$BUILD/shoal" proc "$dir/$scheme.conf" \
    --workspace "$dir/ws/$scheme" -q >"$dir/$scheme.out" 2>"$dir/$scheme.err" || rc=$?
  cat "$dir/$scheme.out"
  [ "$rc" -eq 0 ] || { tail -20 "$dir/$scheme.err"; fail "$scheme: srun exited with $rc"; }
  n=0
  while read -r acc; do
    awk -v a="$acc" 'BEGIN { exit !(a >= 0.80) }' || fail "$scheme: a group's accuracy $acc is below 0.80"
    n=$((n + 1))
  done < <(sed -n 's/^rank [0-9]*: group [0-9]* worker 0: 600 steps at [0-9]* samples\/s, test accuracy //p' \
             "$dir/$scheme.out")
  [ "$n" -eq "$ngroups" ] || fail "$scheme: $n groups reported, $ngroups expected"
  echo "$scheme through srun -n $nprocs: $ngroups groups at the bar, ok"
done

# ---- requeue: a batch job resumes exactly -----------------------------------
# Sandblaster is deterministic: a resumed run must end with the same test
# loss, to the last digit, as one that was never stopped.  Each step
# waits 15 ms more ([emulate]) so that the requeue comes mid-run.
small_job_conf "$dir/requeue.conf" conf/sandblaster.conf
sed -i 's/^\[job\]$/[job]\ncheckpoint_freq = 100/' "$dir/requeue.conf"
printf '\n[emulate]\nslow_groups = 0\nslow_extra_ms = 15\n' >>"$dir/requeue.conf"
final_loss() {
  /usr/bin/python3 -c '
import json, sys
t = [json.loads(l) for l in open(sys.argv[1])]
t = [r for r in t if r.get("phase") == "test" and r["worker"] == 0]
print(t[-1]["step"], repr(t[-1]["loss"]), t[-1]["accuracy"])' "$1"
}
# the uninterrupted run beside the batch job (Slurm gives each job its
# own ports; 4 of the 8 CPUs declared): the same steps, whatever the timing
timeout -k 10 "$(scaled 150)" srun -n 2 --kill-on-bad-exit=1 "$BUILD/shoal" proc "$dir/requeue.conf" \
  --workspace "$dir/ws/straight" -q >"$dir/straight.out" 2>"$dir/straight.err" &
straight=$!

job=$(SHOAL="$BUILD/shoal" sbatch --parsable --ntasks=2 --output="$dir/batch-%j.out" \
        examples/slurm/train.sbatch "$dir/requeue.conf" "$dir/ws/batch")
echo "submitted job $job"
# requeue it once it has trained past its first checkpoint
seen=0
for _ in $(seq "$(scaled 600)"); do
  if [ -f "$dir/ws/batch/metrics.jsonl" ] \
     && /usr/bin/python3 -c '
import json, sys
s = [json.loads(l).get("step", 0) for l in open(sys.argv[1]) if l.strip()]
sys.exit(0 if max(s, default=0) >= 200 else 1)' "$dir/ws/batch/metrics.jsonl" 2>/dev/null; then
    seen=1
    break
  fi
  sleep 0.1
done
[ "$seen" -eq 1 ] || { cat "$dir"/batch-*.out; fail "the batch job never reached step 200"; }
scontrol requeue "$job"
echo "requeued job $job at step >= 200"
# then it runs again and ends
state=
for _ in $(seq "$(scaled 1200)"); do
  state=$(scontrol show job "$job" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
  case $state in COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL) break ;; esac
  sleep 0.1
done
cat "$dir/batch-$job.out"
[ "$state" = COMPLETED ] || fail "the requeued job ended $state"
wait "$straight" || { tail -20 "$dir/straight.err"; fail "the uninterrupted run failed"; }
want=$(final_loss "$dir/ws/straight/metrics.jsonl")
restarts=$(scontrol show job "$job" | sed -n 's/.*Restarts=\([0-9]*\).*/\1/p')
[ "$restarts" = 1 ] || fail "the job restarted $restarts times, not once"
grep -q '^requeued (restart 1): resuming ' "$dir/batch-$job.out" || fail "the requeued script did not resume"
grep -qE 'rank [01]: resuming at step [1-9][0-9]*' "$dir/batch-$job.out" \
  || fail "no rank resumed from a checkpoint past step 0"
got=$(final_loss "$dir/ws/batch/metrics.jsonl")
[ "$got" = "$want" ] || fail "requeued run ended at '$got', the uninterrupted one at '$want'"
echo "requeued job: resumed at step $(grep -oE 'resuming at step [0-9]+' "$dir/batch-$job.out" | head -1 | \
  grep -oE '[0-9]+$'), ended at '$got' as the uninterrupted run, ok"
