#!/usr/bin/env bash
# What users get wrong about topologies and ranks: a --topology file with
# other sections, an impossible layout, a typo, no [cluster]; `shoal proc`
# without a token, rank or endpoints.  Each gets an exact message naming
# the place and a non-zero exit before anything starts.  A topology of
# one process runs in-process like a plain `shoal run`.
# Usage: topology_errors.sh BUILD
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

printf '[cluster]\nnworker_groups = 2\n\n[job]\nseed = 3\n' >"$dir/mixed.conf"
expect 1 "shoal run: $dir/mixed.conf:4: [job] a topology file holds only a [cluster] section (it replaces the job's)" \
  run "$job" --topology "$dir/mixed.conf"
printf '# Hogwild with separate servers\n[cluster]\nnworker_groups = 2\nnserver_groups = 2\nserver_worker_separate = true\n' \
  >"$dir/bad.conf"
expect 1 "shoal run: $dir/bad.conf:4: [cluster] nserver_groups: 2 server groups is Hogwild, where each server group lives in its worker group's processes; it cannot have server_worker_separate = true (use one server group for Downpour, or servers beside the workers)" \
  run "$job" --topology "$dir/bad.conf"
printf '[cluster]\nnworkers_per_grop = 2\n' >"$dir/typo.conf"
expect 1 "shoal run: $dir/typo.conf:2: [cluster] nworkers_per_grop: unknown key (did you mean 'nworkers_per_group'?)" \
  run "$job" --topology "$dir/typo.conf"
printf '# nothing\n' >"$dir/empty.conf"
expect 1 "shoal run: $dir/empty.conf: no [cluster] section" run "$job" --topology "$dir/empty.conf"
# an override applies after the topology and is named as such
expect 1 "shoal run: -o cluster.nworkers_per_procs: [cluster] nworkers_per_procs: 3 must divide nworkers_per_group (2) or be a multiple of it: a process holds an equal part of one group or whole groups of workers" \
  run "$job" --topology conf/sandblaster.conf -o cluster.nworkers_per_procs=3

# shoal proc: never without a token, a rank and endpoints
printf '%s\n' 0123456789abcdef0123456789abcdef >"$dir/token"
chmod 600 "$dir/token"
cat "$job" conf/sandblaster.conf >"$dir/job.conf"
expect 2 "shoal proc (rank 0): no job token: give --token-file FILE or set SHOAL_TOKEN" \
  proc "$dir/job.conf" --rank 0 --endpoints ,127.0.0.1:1
expect 2 "shoal proc: no rank: give --rank or start under mpirun / srun (OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID)" \
  proc "$dir/job.conf" --endpoints ,127.0.0.1:1 --token-file "$dir/token"
expect 2 "shoal proc (rank 0): give --endpoints or --hostfile (under srun Slurm gives the hosts)" proc "$dir/job.conf" --rank 0 --token-file "$dir/token"
expect 1 "shoal proc (rank 0): --endpoints has 3 entries, the layout has 2 processes" \
  proc "$dir/job.conf" --rank 0 --endpoints ,, --token-file "$dir/token"
expect 1 "shoal proc (rank 2): rank 2 does not exist: the layout has 2 processes" \
  proc "$dir/job.conf" --rank 2 --endpoints ,127.0.0.1:1 --token-file "$dir/token"
# every rank that listens needs an endpoint: servers, and the processes of
# a group spread over processes (they send each other bridge messages)
sed 's/^nworkers_per_procs = 2$/nworkers_per_procs = 1/' "$dir/job.conf" >"$dir/spread.conf"
expect 1 "shoal proc (rank 1): --endpoints: rank 0 has none, but it holds workers of a group spread over processes" \
  proc "$dir/spread.conf" --rank 1 --endpoints ,127.0.0.1:1,127.0.0.1:2 --token-file "$dir/token"
expect 1 "shoal proc (rank 0): --endpoints: rank 2 has none, but it serves slices" \
  proc "$dir/spread.conf" --rank 0 --endpoints 127.0.0.1:1,127.0.0.1:2, --token-file "$dir/token"
printf '127.0.0.1 slots=two\n' >"$dir/hosts"
expect 1 "shoal proc (rank 0): $dir/hosts:1: slots: expected a number from 1 to 4096, got 'two'" \
  proc "$dir/job.conf" --rank 0 --hostfile "$dir/hosts" --token-file "$dir/token"
: >"$dir/empty-token"
expect 2 "shoal proc (rank 0): $dir/empty-token: the token is empty" \
  proc "$dir/job.conf" --rank 0 --endpoints ,127.0.0.1:1 --token-file "$dir/empty-token"
# a token that can be guessed is refused, from a file or from SHOAL_TOKEN
printf 'abc\n' >"$dir/short-token"
chmod 600 "$dir/short-token"
expect 2 "shoal proc (rank 0): $dir/short-token: the token has 3 characters, at least 16 are needed (a short one can be guessed): make one with \`od -An -tx1 -N16 /dev/urandom | tr -d ' \\n'\`" \
  proc "$dir/job.conf" --rank 0 --endpoints ,127.0.0.1:1 --token-file "$dir/short-token"
SHOAL_TOKEN=0123456789abcde expect 2 "shoal proc (rank 0): SHOAL_TOKEN: the token has 15 characters, at least 16 are needed (a short one can be guessed): make one with \`od -An -tx1 -N16 /dev/urandom | tr -d ' \\n'\`" \
  proc "$dir/job.conf" --rank 0 --endpoints ,127.0.0.1:1
# srun -n 2 of a one-process conf: every task says how many srun should
# start and why (rank 1 said only that it does not exist)
for r in 0 1; do
  SLURM_PROCID=$r SLURM_NTASKS=2 SLURM_JOB_NODELIST=localhost expect 1 "shoal proc (rank $r): srun started 2 tasks (SLURM_NTASKS), the layout has 1 process: srun -n 1 (the conf has no [cluster] for several processes: append a topology, e.g. cat conf/sandblaster.conf >>JOB.conf)" \
    proc "$job" --token-file "$dir/token"
done

# a one-process topology trains in this process: no launcher, no token
printf '[cluster]\nnworkers_per_group = 2\nnworkers_per_procs = 2\nnservers_per_group = 2\nnservers_per_procs = 2\n' \
  >"$dir/one.conf"
if "$shoal" run "$job" --topology "$dir/one.conf" -o job.epochs=0 -o job.train_steps=20 -o job.test_steps=2 \
     -o 'layer fc1.num_output=32' -o 'layer fc2.num_output=32' -q --workspace "$dir/ws" >"$dir/out" 2>"$dir/err" \
   && grep -q '^final test accuracy: ' "$dir/out" && [ ! -e "$dir/ws/token" ] \
   && grep -q '^nworkers_per_group=2' "$dir/ws/job.conf"; then
  echo "ok: one-process topology ran in-process"
else
  echo "FAIL: one-process topology"; cat "$dir/out" "$dir/err"
  failures=$((failures + 1))
fi
[ "$failures" -eq 0 ]
