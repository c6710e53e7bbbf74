# Shared by the topology_*.sh end-to-end tests (sourced, not run: it is
# outside test/e2e/*.sh on purpose).  Trains the Fashion-MNIST MLP on a
# subset with a conf/ topology through `shoal run`, i.e. the real process
# layout over Thrift on loopback, and checks what a user would look at.

# A smaller MLP and a short run so that each scheme takes well under a
# minute on two cores (about 4 s each when the machine is idle).  The lr
# drops tenfold for the last third as in the example's schedule: without
# it the asynchronous schemes end anywhere in 0.79-0.87 from run to run.
# Each RPC server keeps a single call thread (rpc_threads = 1), so every
# scheme's calls that wait for one another (Sandblaster's and
# AllReduce's pulls, SSP's bound, Hogwild's sync) get through only if the
# pool grows for them (rpc/listener.h).
TOPOLOGY_ARGS=(-o job.epochs=0 -o job.train_steps=600 -o job.test_freq=0 -o job.test_steps=30
               -o job.disp_freq=100 -o 'layer fc1.num_output=256' -o 'layer fc2.num_output=256'
               -o 'updater.step_list=0, 400' -o cluster.rpc_threads=1)

source test/e2e/lib/time_scale.sh "${BUILD:-build}"

fail() { echo "FAIL: $*"; exit 1; }

# run_topology SCHEME BAR NGROUPS NPROCS: trains, checks exit status, the
# per-rank report, the accuracy bar, metrics per group and the workspace.
run_topology() {
  local scheme=$1 bar=$2 ngroups=$3 nprocs=$4
  local build=${BUILD:?} dir
  dir=$(mktemp -d)
  TOPOLOGY_DIR=$dir
  # the launcher forwards SIGTERM from timeout to its children; the trap
  # only removes files
  trap 'rm -rf "$TOPOLOGY_DIR"' EXIT
  local ws="$dir/ws" out="$dir/out"
  local start=$SECONDS rc=0
  timeout -k 10 "$(scaled 150)" "$build/shoal" run examples/fashion-mnist/mlp.conf --topology "conf/$scheme.conf" \
    "${TOPOLOGY_ARGS[@]}" --workspace "$ws" >"$out" 2>"$dir/err" || rc=$?
  cat "$out"
  tail -20 "$dir/err"
  [ "$rc" -eq 0 ] || fail "shoal run --topology conf/$scheme.conf exited with $rc"
  echo "$scheme: $((SECONDS - start)) s"

  # no process of this run may outlive it
  if pgrep -f -- "$ws" >/dev/null; then
    pgrep -fa -- "$ws"
    fail "processes of the run are still there"
  fi

  # one report line per rank, all exit 0
  for ((r = 0; r < nprocs; r++)); do
    grep -qE "^rank $r \(.*\): exit 0$" "$out" || fail "no 'rank $r (...): exit 0' line"
  done
  grep -qE "^rank $nprocs " "$out" && fail "more than $nprocs ranks"

  local acc
  acc=$(sed -n 's/^final test accuracy: //p' "$out")
  [ -n "$acc" ] || fail "no final test accuracy line"
  [ "$(tail -1 "$out")" = "final test accuracy: $acc" ] || fail "the last line is not the final accuracy"
  awk -v a="$acc" -v b="$bar" 'BEGIN { exit !(a >= b) }' || fail "accuracy $acc below the bar $bar"
  echo "$scheme: final test accuracy $acc (bar $bar)"

  # metrics.jsonl: valid JSON lines from every process, a train and a test
  # stream per worker group, every group at the bar
  /usr/bin/python3 - "$ws/metrics.jsonl" "$ngroups" "$bar" "$nprocs" <<'PY' || fail "metrics.jsonl"
import json, sys
path, ngroups, bar, nprocs = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
train, test = {}, {}
ranks = set()
layouts, states = [], {}
for n, line in enumerate(open(path), 1):
    r = json.loads(line)
    if r["phase"] == "process":
        # a process's traffic (and its server's staleness), no step
        for k in ("time", "rank", "bytes_sent", "bytes_received"):
            assert k in r, (path, n, k, r)
        ranks.add(r["rank"])
        continue
    if r["phase"] == "cluster":
        # the launcher's: the layout, then each rank's state as it changes
        if r["event"] == "layout":
            assert [x["rank"] for x in r["ranks"]] == list(range(nprocs)), (path, n, r)
            layouts.append(r)
        elif r["event"] == "rank":
            assert 0 <= r["rank"] < nprocs and r["pid"] > 0, (path, n, r)
            states.setdefault(r["rank"], []).append(r["state"])
        continue
    for k in ("time", "step", "group", "worker", "phase", "loss", "samples"):
        assert k in r, (path, n, k, r)
    (train if r["phase"] == "train" else test).setdefault(r["group"], []).append(r)
for g in range(ngroups):
    assert g in train, "no train lines of group %d" % g
    assert g in test, "no test lines of group %d" % g
    last = test[g][-1]
    assert last["step"] == 600, last
    assert last["accuracy"] >= bar, ("group %d below the bar" % g, last)
    print("group %d: %d train lines, test accuracy %.4f" % (g, len(train[g]), last["accuracy"]))
assert sorted(set(train) | set(test)) == list(range(ngroups)), (sorted(train), sorted(test))
assert ranks, "no process line"
assert len(layouts) == 1, "%d layout lines, expected one" % len(layouts)
assert sorted(states) == list(range(nprocs)) and all(s[-1] == "done" for s in states.values()), states
PY

  # the resolved conf has the topology's cluster, the token is private
  grep -q '^\[cluster\]' "$ws/job.conf" || fail "job.conf has no [cluster]"
  grep -q '^nworker_groups' "$ws/job.conf" || fail "job.conf lacks the topology's keys"
  grep -q '^train_steps=600' "$ws/job.conf" || fail "job.conf lacks the overrides"
  [ "$(stat -c %a "$ws/token")" = 600 ] || fail "token mode $(stat -c %a "$ws/token")"
  grep -qE '^[0-9a-f]{32}$' "$ws/token" || fail "token is not 32 hex characters"
  echo "$scheme: ok"
}

# small_job_conf OUT TOPOLOGY: the MLP example with TOPOLOGY_ARGS' values
# and the topology's [cluster] written into one conf, for `shoal proc`
# started by something other than `shoal run` (it takes no overrides).
small_job_conf() {
  local out=$1 topology=$2
  sed -e 's/^epochs = 3$/train_steps = 600/' \
      -e 's/^test_freq = 938$/test_freq = 0\ntest_steps = 30/' \
      -e 's/^disp_freq = 200$/disp_freq = 100/' \
      -e 's/^num_output = 1024$/num_output = 256/' \
      -e 's/^step_list = 0, 1876$/step_list = 0, 400/' examples/fashion-mnist/mlp.conf >"$out"
  [ "$(grep -c '^num_output = 256$' "$out")" -eq 2 ] && grep -q '^train_steps = 600$' "$out" \
    && grep -q '^test_steps = 30$' "$out" && grep -q '^step_list = 0, 400$' "$out" \
    || fail "examples/fashion-mnist/mlp.conf changed: update small_job_conf in $BASH_SOURCE"
  cat "$topology" >>"$out"
}

# make_token FILE: a 32-hex-character job token, readable only by us.
make_token() {
  (umask 077 && od -An -tx1 -N16 /dev/urandom | tr -d ' \n' >"$1")
}

# free_ports_base N: the first of N consecutive loopback ports that are
# free now (a random base, up to 200 tries), for ranks given a --base-port;
# below the kernel's ephemeral range where it leaves room, so that no
# client's outgoing connection takes one of them before the rank binds it
free_ports_base() {
  /usr/bin/python3 - "$1" <<'PY'
import random, socket, sys
n = int(sys.argv[1])
low, high = 20000, 60000
try:
    ephemeral = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
    if ephemeral - n > low + 1000:
        high = ephemeral - n
except (OSError, ValueError, IndexError):
    pass
for _ in range(200):
    base = random.randrange(low, high)
    socks = []
    try:
        for p in range(base, base + n):
            s = socket.socket(); s.bind(("127.0.0.1", p)); socks.append(s)
    except OSError:
        continue
    finally:
        for s in socks: s.close()
    print(base); break
PY
}
