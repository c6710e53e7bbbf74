#!/usr/bin/env bash
# Multi-process launch through Open MPI's mpirun, as on a cluster: mpirun
# starts one `shoal proc` per rank, each takes its rank from
# OMPI_COMM_WORLD_RANK and the endpoints from the same hostfile (all
# 127.0.0.1 here), and the Downpour layout (2 worker groups, a server
# process) trains the MLP subset to the bar; then a group spread over two
# ranks with a feature split does too.  Skipped (exit 77) without mpirun
# (Debian package openmpi-bin, which make deps installs).  Usage: mpirun.sh BUILD
set -euo pipefail
BUILD=$(cd "${1:-build}" && pwd)
cd "$(dirname "$0")/../.."
source test/e2e/lib/time_scale.sh "$BUILD"
source test/e2e/lib/topology.sh

if ! command -v mpirun >/dev/null; then
  echo "SKIP: mpirun not found (install the Debian package openmpi-bin)"
  exit 77
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
small_job_conf "$dir/job.conf" conf/downpour.conf
make_token "$dir/token"
printf '127.0.0.1\n127.0.0.1\n127.0.0.1\n' >"$dir/hosts"
# three consecutive free ports for ranks 0-2 (only rank 2 serves)
base=$(free_ports_base 3)

rc=0
timeout -k 10 "$(scaled 150)" mpirun --allow-run-as-root --oversubscribe -np 3 --hostfile "$dir/hosts" \
  "$BUILD/shoal" proc "$dir/job.conf" --hostfile "$dir/hosts" --base-port "$base" \
  --token-file "$dir/token" --workspace "$dir/ws" -q >"$dir/out" 2>"$dir/err" || rc=$?
cat "$dir/out"
tail -20 "$dir/err"
[ "$rc" -eq 0 ] || fail "mpirun exited with $rc"
grep -qx 'rank 2: servers done' "$dir/out" || fail "rank 2 (the servers) did not finish"
for g in 0 1; do
  line=$(grep -E "^rank $g: group $g worker 0: 600 steps at [0-9]+ samples/s, test accuracy " "$dir/out") \
    || fail "no result line of rank $g"
  acc=${line##* }
  awk -v a="$acc" 'BEGIN { exit !(a >= 0.80) }' || fail "group $g: accuracy $acc below 0.80"
  echo "group $g: $acc"
  grep -q "\"group\":$g,\"worker\":0,\"phase\":\"test\"" "$dir/ws/metrics.jsonl" \
    || fail "metrics.jsonl has no test line of group $g"
done

# a group spread over the two ranks with fc1 split by feature (AllReduce's
# layout: a worker and a server in each rank): bridges between the ranks,
# every rank listening on its hostfile port
small_job_conf "$dir/spread.conf" conf/allreduce.conf
sed -i 's/^\[layer fc1\]$/[layer fc1]\npartition_dim = 1/' "$dir/spread.conf"
grep -q '^partition_dim = 1$' "$dir/spread.conf" || fail "no [layer fc1] in the MLP example"
rc=0
timeout -k 10 "$(scaled 150)" mpirun --allow-run-as-root --oversubscribe -np 2 --hostfile "$dir/hosts" \
  "$BUILD/shoal" proc "$dir/spread.conf" --hostfile "$dir/hosts" --base-port "$base" \
  --token-file "$dir/token" --workspace "$dir/spread" -q >"$dir/out" 2>"$dir/err" || rc=$?
cat "$dir/out"
[ "$rc" -eq 0 ] || { tail -20 "$dir/err"; fail "mpirun (spread group) exited with $rc"; }
grep -q "^rank 1: group 0 from worker 1: ran its leader's steps$" "$dir/out" || fail "rank 1 did not follow"
line=$(grep -E "^rank 0: group 0 worker 0: 600 steps at [0-9]+ samples/s, test accuracy " "$dir/out") \
  || fail "no result line of rank 0"
acc=${line##* }
awk -v a="$acc" 'BEGIN { exit !(a >= 0.80) }' || fail "spread group: accuracy $acc below 0.80"
grep -q "BLAS threads: 1 (2 cores, 2 worker threads sharing them)" "$dir/err" \
  || [ "$(nproc)" -ne 2 ] || fail "the hostfile's ranks on one host did not share the cores"
echo "spread group: $acc"

# never without a token: the same command without one is refused up front
rc=0
OMPI_COMM_WORLD_RANK=0 "$BUILD/shoal" proc "$dir/job.conf" --hostfile "$dir/hosts" \
  >/dev/null 2>"$dir/err" || rc=$?
[ "$rc" -eq 2 ] && grep -qF "shoal proc (rank 0): no job token: give --token-file FILE or set SHOAL_TOKEN" "$dir/err" \
  || fail "a rank without a token was not refused: exit $rc, $(cat "$dir/err")"
echo "mpirun: ok"
