#!/usr/bin/env bash
# The command line wins over the conf file: -o job.train_steps on a conf
# that gives epochs (and -o job.epochs on one that gives train_steps)
# replaces the file's other key; both on the command line is an error at
# the -o.  --topology replaces the scheme keys of the job's [cluster] and
# keeps its placement keys (gpus, partition_dim).
set -uo pipefail
build=${1:-build}
source test/e2e/lib/time_scale.sh "$build"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
shoal="$build/shoal"
fail() { echo "FAIL: $*"; exit 1; }
quick=(-o job.test_freq=0 -o job.test_steps=2 -o 'layer fc1.num_output=32' -o 'layer fc2.num_output=32' -q)

# 1. the example gives epochs = 3; -o job.train_steps=5 trains 5 steps
grep -q '^epochs = 3$' examples/fashion-mnist/mlp.conf || fail "examples/fashion-mnist/mlp.conf changed"
timeout -k 5 "$(scaled 120)" "$shoal" run examples/fashion-mnist/mlp.conf -o job.train_steps=5 "${quick[@]}" \
  --workspace "$dir/steps" >"$dir/out" 2>"$dir/err" || { cat "$dir/err"; fail "-o job.train_steps=5 on a conf with epochs"; }
grep -q '^trained 5 steps ' "$dir/out" || { cat "$dir/out"; fail "did not train 5 steps"; }
grep -qx 'train_steps=5' "$dir/steps/job.conf" || fail "job.conf lacks train_steps=5"
grep -q '^epochs=' "$dir/steps/job.conf" && fail "job.conf keeps the file's epochs"
echo "ok: -o job.train_steps replaces the file's epochs"

# 2. the other way round: 0.005 epochs of 60000 records in batches of 64 = 5 steps
sed 's/^epochs = 3$/train_steps = 700/' examples/fashion-mnist/mlp.conf >"$dir/steps.conf"
timeout -k 5 "$(scaled 120)" "$shoal" run "$dir/steps.conf" -o job.epochs=0.005 "${quick[@]}" \
  --workspace "$dir/epochs" >"$dir/out" 2>"$dir/err" || { cat "$dir/err"; fail "-o job.epochs on a conf with train_steps"; }
grep -q '^trained 5 steps ' "$dir/out" || { cat "$dir/out"; fail "did not train 0.005 epochs (5 steps)"; }
echo "ok: -o job.epochs replaces the file's train_steps"

# 3. both on the command line: the -o is to blame
rc=0
"$shoal" run examples/fashion-mnist/mlp.conf -o job.train_steps=5 -o job.epochs=1 "${quick[@]}" \
  --workspace "$dir/both" >/dev/null 2>"$dir/err" || rc=$?
[ "$rc" -eq 1 ] || fail "train_steps and epochs both given with -o: exit $rc"
grep -qxF "shoal run: -o job.epochs: [job] epochs: give train_steps or epochs, not both" "$dir/err" \
  || fail "both: $(cat "$dir/err")"
echo "ok: both with -o is an error naming the -o"

# 4. --topology keeps the job's placement keys: partition_dim = 1 makes the
#    dense layers feature-split in the topology's groups of 2 workers
cat examples/fashion-mnist/mlp.conf - >"$dir/placed.conf" <<'EOF'
[cluster]
nworker_groups = 3
partition_dim = 1
gpus = -1
EOF
"$shoal" inspect "$dir/placed.conf" --topology conf/downpour.conf >"$dir/out" 2>"$dir/err" \
  || { cat "$dir/err"; fail "shoal inspect --topology"; }
grep -q '^2 workers per group' "$dir/out" || fail "the topology's nworkers_per_group was not taken"
grep -qE '^fc1 +dense +feature ' "$dir/out" || { cat "$dir/out"; fail "the job's partition_dim = 1 was dropped"; }
timeout -k 5 "$(scaled 150)" "$shoal" run "$dir/placed.conf" --topology conf/downpour.conf -o job.epochs=0 \
  -o job.train_steps=4 "${quick[@]}" --workspace "$dir/topo" >"$dir/out" 2>"$dir/err" \
  || { cat "$dir/out" "$dir/err"; fail "shoal run --topology"; }
for kv in nworker_groups=2 nworkers_per_group=2 server_worker_separate=true partition_dim=1 gpus=-1; do
  grep -qx "$kv" "$dir/topo/job.conf" || { cat "$dir/topo/job.conf"; fail "job.conf lacks $kv"; }
done
grep -qx 'nworker_groups=3' "$dir/topo/job.conf" && fail "the job's nworker_groups survived the topology"
echo "ok: --topology keeps gpus and partition_dim"
