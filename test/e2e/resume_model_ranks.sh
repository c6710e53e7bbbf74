#!/usr/bin/env bash
# `shoal proc --resume` as mpirun or srun starts it (the rank from
# OMPI_COMM_WORLD_RANK, no launcher, so no job.conf in the workspace):
# a model that keeps every param's size - relu1 a tanh, the updater
# nesterov (one state float a value, as sgd) - is refused by every rank
# from the conf the units saved with their checkpoint, naming the layer,
# both values and both model fingerprints, with a non-zero exit and the
# workspace as it was: metrics.jsonl (with a line past the checkpoint,
# as a killed run leaves one) and every checkpoint store's data
# byte for byte.  The same job with only its learning rate lowered
# resumes, drops that line and trains on.  Two ranks (a worker, a
# server) on loopback; every wait is bounded.  Usage: resume_model_ranks.sh BUILD
set -euo pipefail
BUILD=$(cd "${1:-build}" && pwd)
cd "$(dirname "$0")/../.."
source test/e2e/lib/time_scale.sh "$BUILD"
source test/e2e/lib/topology.sh   # small_job_conf, make_token, free_ports_base, fail
dir=$(mktemp -d)
# (every rank runs under timeout(1) and is waited for before any check)
trap 'rm -rf "$dir"' EXIT

cat >"$dir/topology.conf" <<'EOF'
[cluster]
nworker_groups = 1
nworkers_per_group = 1
nworkers_per_procs = 1
nserver_groups = 1
nservers_per_group = 1
nservers_per_procs = 1
server_worker_separate = true
EOF
small_job_conf "$dir/job.conf" "$dir/topology.conf"
sed -i -e 's/^train_steps = 600$/train_steps = 40\ncheckpoint_freq = 20/' -e 's/^disp_freq = 100$/disp_freq = 10/' \
  -e 's/^test_steps = 30$/test_steps = 2/' "$dir/job.conf"
grep -q '^checkpoint_freq = 20$' "$dir/job.conf" || fail "the small job has no checkpoint_freq"
make_token "$dir/token"
printf '127.0.0.1\n127.0.0.1\n' >"$dir/hosts"
base=$(free_ports_base 2)
ws=$dir/ws

# ranks CONF NAME [ARGS]: ranks 0 and 1 of CONF as mpirun starts them;
# their exits in $dir/NAME-R.rc, their output in $dir/NAME-R.out / .err
ranks() {
  local conf=$1 name=$2 r pids=()
  shift 2
  for r in 0 1; do
    (rc=0; OMPI_COMM_WORLD_RANK=$r timeout -k 5 "$(scaled 60)" "$BUILD/shoal" proc "$conf" --hostfile "$dir/hosts" \
       --base-port "$base" --token-file "$dir/token" --workspace "$ws" "$@" \
       >"$dir/$name-$r.out" 2>"$dir/$name-$r.err" || rc=$?; echo "$rc" >"$dir/$name-$r.rc") &
    pids+=($!)
  done
  wait "${pids[@]}"
}
# the workspace's bytes: metrics.jsonl and each store's data (lock.mdb
# is LMDB's reader table, which a read-only open writes)
snapshot() { (cd "$ws" && sha256sum metrics.jsonl checkpoint/*/data.mdb); }

ranks "$dir/job.conf" first
for r in 0 1; do
  [ "$(cat "$dir/first-$r.rc")" -eq 0 ] || { tail "$dir/first-$r.err"; fail "first run: rank $r exited $(cat "$dir/first-$r.rc")"; }
done
grep -q '"phase":"train","step":40,' "$ws/metrics.jsonl" || grep -q '"step":40,.*"phase":"train"' "$ws/metrics.jsonl" \
  || fail "the first run wrote no train line of step 40"
echo '{"time":9999.1,"phase":"train","step":45,"group":0,"worker":0,"loss":1}' >>"$ws/metrics.jsonl"
snapshot >"$dir/before.sha256"

# refused: another activation, another updater of the same state size
refused() {  # $1: the case, $2: the sed expression making its conf, $3: what every rank says
  sed -e "$2" "$dir/job.conf" >"$dir/$1.conf"
  ! cmp -s "$dir/job.conf" "$dir/$1.conf" || fail "$1: the conf did not change"
  ranks "$dir/$1.conf" "$1" --resume
  for r in 0 1; do
    [ "$(cat "$dir/$1-$r.rc")" -ne 0 ] && [ "$(cat "$dir/$1-$r.rc")" -ne 124 ] \
      || fail "$1: rank $r exited $(cat "$dir/$1-$r.rc")"
    grep -qF "shoal proc (rank $r): $ws: cannot resume: its checkpoints belong to another model: $3" "$dir/$1-$r.err" \
      || { cat "$dir/$1-$r.err"; fail "$1: rank $r did not say why"; }
  done
  snapshot | cmp -s - "$dir/before.sha256" || { snapshot | diff "$dir/before.sha256" - ; fail "$1: the workspace changed"; }
  echo "$1: refused by both ranks, the workspace as it was"
}
checkpoint="the checkpoint of step 40 ($ws/checkpoint/rank-0)"
refused tanh '0,/^type = relu$/s//type = tanh/' \
  "[layer relu1] type is relu in $checkpoint, tanh in this job (model fingerprint "
grep -qE "model fingerprint [0-9a-f]{16} there, [0-9a-f]{16} in this job; --resume continues only the same model, data and layout: put it back as it was, or start this job without --resume, or in another --workspace\)" \
  "$dir/tanh-0.err" || fail "tanh: the fingerprints or how to go on are not said"
refused nesterov 's/^type = sgd$/type = nesterov/' "[updater] type is sgd in $checkpoint, nesterov in this job"

# resumed: only the learning rate lowered (and trained longer)
sed -e 's/^lr_list = 0.02, 0.002$/lr_list = 0.01, 0.001/' -e 's/^train_steps = 40$/train_steps = 60/' \
  "$dir/job.conf" >"$dir/lr.conf"
grep -q '^lr_list = 0.01, 0.001$' "$dir/lr.conf" || fail "the small job's lr_list changed: update this script"
ranks "$dir/lr.conf" lr --resume
for r in 0 1; do
  [ "$(cat "$dir/lr-$r.rc")" -eq 0 ] || { tail "$dir/lr-$r.err"; fail "lr: rank $r exited $(cat "$dir/lr-$r.rc")"; }
  grep -q "rank $r: resuming at step 40" "$dir/lr-$r.err" || fail "lr: rank $r did not resume at step 40"
done
grep -qF '9999.1' "$ws/metrics.jsonl" && fail "lr: the line past the checkpoint is still there"
grep -q '"step":60,' "$ws/metrics.jsonl" || fail "lr: no line of step 60"
echo "resume_model_ranks: ok"
