#!/usr/bin/env bash
# A thread that cannot start is an error naming it, never GLib's abort
# (exit 133 from a trap): a one-process run under ulimit -u n, for
# n = 2, 3, ... until it trains, must end each time with exit 1, no
# signal, and a message naming the first thread that did not start.
# ulimit -u counts a user's threads and processes, so the run gets a
# count of its own: as root under an unused uid (root itself is not
# limited), else in a user namespace (unshare -Ur).  OPENBLAS_NUM_THREADS
# and job.threads = 1 keep OpenBLAS from starting threads of its own
# (which raises SIGINT when it cannot) and make the count the same on
# any number of cores: each n then stops the run at the same thread.
# Two layouts between them start every kind of thread of a one-process
# run: prefetch, process report, group helpers, comm threads, workers.
# may-skip-in-ci: a container may forbid both user namespaces and setuid (no package gives either)
# suite: plain undefined
set -uo pipefail
build=${1:-build}
source test/e2e/lib/time_scale.sh "$build"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

if [[ "${SHOAL_SANITIZE:-}" == *address* || "${SHOAL_SANITIZE:-}" == *thread* ]]; then
  echo "SKIP: the sanitizer's runtime starts threads of its own (LSan's at exit), which the limit stops"; exit 77
fi
data="$build/data/fashion-mnist"
[ -f "$data/train/data.mdb" ] || { echo "SKIP: no $data (make data)"; exit 77; }
chmod 755 "$dir"

# as_limited N CMD...: CMD under ulimit -u N, with a thread count of its own
if [ "$(id -u)" -eq 0 ]; then
  uid=
  for u in $(seq 61000 61099); do
    if ! getent passwd "$u" >/dev/null && ! pgrep -U "$u" >/dev/null; then uid=$u; break; fi
  done
  [ -n "$uid" ] || { echo "SKIP: no unused uid in 61000-61099"; exit 77; }
  as_limited() { local n=$1; shift; setpriv --reuid="$uid" --regid="$uid" --clear-groups \
                   bash -c 'ulimit -u "$0" && exec "$@"' "$n" "$@"; }
  as_limited 8 test -x "$build/shoal" -a -r "$data/train/data.mdb" 2>/dev/null \
    || { echo "SKIP: uid $uid (setpriv) cannot run $build/shoal on $data"; exit 77; }
else
  as_limited() { local n=$1; shift; unshare -Ur bash -c 'ulimit -u "$0" && exec "$@"' "$n" "$@"; }
  as_limited 8 true 2>/dev/null || { echo "SKIP: no user namespace (unshare -Ur)"; exit 77; }
fi

printf '[cluster]\nnworker_groups = 1\n' >"$dir/one.conf"
cat >"$dir/groups.conf" <<'EOF'
[cluster]
nworker_groups = 2
nworkers_per_group = 2
nworkers_per_procs = 4
nserver_groups = 1
nservers_per_group = 1
nservers_per_procs = 1
EOF

export OPENBLAS_NUM_THREADS=1
seen="$dir/seen"
: >"$seen"
# sweep LAYOUT: n = 2 (timeout and shoal are the first two) up to a run that trains
sweep() {
  local layout=$1 n rc ws
  for ((n = 2; n <= 40; n++)); do
    ws="$dir/ws-$layout-$n"
    mkdir -m 777 "$ws"
    rc=0
    as_limited "$n" timeout -k 5 "$(scaled 60)" "$build/shoal" run examples/fashion-mnist/mlp.conf \
      --topology "$dir/$layout.conf" -o job.threads=1 -o job.epochs=0 -o job.train_steps=20 \
      -o job.test_freq=0 -o job.test_steps=2 -q --workspace "$ws/run" >"$dir/out" 2>"$dir/err" || rc=$?
    grep -qiE 'signal|trap|abort|core dumped|GLib-ERROR' "$dir/out" "$dir/err" \
      && { cat "$dir/err"; fail "$layout, ulimit -u $n: a signal or an abort"; }
    if [ "$rc" -eq 0 ]; then
      grep -q '^final test accuracy: ' "$dir/out" || { cat "$dir/out"; fail "$layout, ulimit -u $n: no accuracy"; }
      echo "ok: $layout: trains from ulimit -u $n"
      return
    fi
    [ "$rc" -eq 1 ] || { cat "$dir/err"; fail "$layout, ulimit -u $n: exit $rc (124/137: it hung)"; }
    local why
    why=$(grep -E '^shoal run: .*cannot start (worker )?thread ' "$dir/err") \
      || { cat "$dir/err"; fail "$layout, ulimit -u $n: exit 1 without naming the thread"; }
    echo "ok: $layout, ulimit -u $n: exit 1: $why"
    echo "$why" >>"$seen"
  done
  fail "$layout: did not train at ulimit -u 40"
}
sweep one
sweep groups

hint="(no room for its stack under ulimit -v, or too many threads: ulimit -u)"
for want in "[layer data] prefetch: cannot start thread shoal-prefetch: " \
            "shoal run: rank 0: process report: cannot start thread process-report: " \
            "shoal run: group 0 of 2 workers: cannot start thread group-0-worker-1: " \
            "shoal run: group 1 of 2 workers: cannot start thread group-1-worker-1: " \
            "shoal run: unit 0: cannot start thread comm: " \
            "shoal run: rank 0: cannot start worker thread worker-0-0: " \
            "shoal run: rank 0: cannot start worker thread worker-1-0: "; do
  grep -qF -- "$want" "$seen" || fail "no run stopped at '$want'"
done
grep -F -- ": cannot start thread " "$seen" | grep -vqF -- "$hint" && fail "a message without '$hint'"
echo "ok: every kind of thread stopped a run with a message naming it"
