#!/usr/bin/env bash
# A disk that fills up during a checkpoint: the run stops with exit 1 and
# "No space left on device" naming the store's data.mdb and the step whose
# checkpoint is kept, and --resume (with room again) continues from that
# step.  The workspace lies on a 6 MiB tmpfs mounted in a mount namespace
# of this test's own (unshare -m as root, unshare -rm or sudo -n unshare -m
# otherwise), so nothing outside the test sees it.  Exit 77 (skip, with
# the reason) only where no namespace can be made.
# may-skip-in-ci: a container without CAP_SYS_ADMIN cannot mount; no package gives that
set -uo pipefail
build=${1:-build}
source test/e2e/lib/time_scale.sh "$build"

if [ "${SHOAL_FULL_DISK_INNER:-}" != 1 ]; then
  dir=$(mktemp -d)
  trap 'rm -rf "$dir"' EXIT
  mkdir "$dir/mnt"
  how=()
  for u in "unshare -m" "unshare -rm" "sudo -n unshare -m"; do
    if $u sh -c "mount -t tmpfs -o size=1m tmpfs '$dir/mnt'" 2>"$dir/why"; then
      read -ra how <<<"$u"
      break
    fi
  done
  if [ "${#how[@]}" -eq 0 ]; then
    echo "SKIP: cannot mount a size-limited tmpfs in a mount namespace: $(cat "$dir/why")"
    exit 77
  fi
  echo "mount namespace: ${how[*]}"
  timeout -k 5 "$(scaled 120)" "${how[@]}" env SHOAL_FULL_DISK_INNER=1 "SHOAL_FULL_DISK_DIR=$dir" bash "$0" "$build"
  exit $?
fi

# ---- inside the mount namespace ----------------------------------------
dir=$SHOAL_FULL_DISK_DIR
mount -t tmpfs -o size=6m tmpfs "$dir/mnt" || { echo "FAIL: mount"; exit 1; }
small=(-o job.epochs=0 -o job.train_steps=40 -o job.test_freq=0 -o job.test_steps=2
       -o job.checkpoint_freq=5 -o 'layer fc1.num_output=256' -o 'layer fc2.num_output=256' -q)
fail() { echo "FAIL: $*"; exit 1; }

check_full() {  # check_full WS NAME ERRFILE RC: the message and the kept step
  local ws=$1 store=$2 err=$3 rc=$4
  cat "$err"
  [ "$rc" -eq 1 ] || fail "exit $rc, expected 1"
  grep -q 'Input/output error' "$err" && fail "a full disk reads 'Input/output error'"
  local re="$ws/checkpoint/$store/data.mdb: checkpoint of step ([0-9]+): needs [0-9.]+ (KiB|MiB) more on disk: No space left on device \(the checkpoint of step ([0-9]+) is kept\)"
  [[ "$(cat "$err")" =~ $re ]] || fail "no 'No space left on device' message naming $store"
  failed_step=${BASH_REMATCH[1]}
  kept=${BASH_REMATCH[3]}
  [ "$kept" -gt 0 ] && [ "$kept" -lt "$failed_step" ] || fail "kept step $kept, failed step $failed_step"
}

# 1. one process: the worker's store
ws="$dir/mnt/ws"
rc=0
"$build/shoal" run examples/fashion-mnist/mlp.conf "${small[@]}" --workspace "$ws" 2>"$dir/err" >/dev/null || rc=$?
check_full "$ws" rank-0 "$dir/err" "$rc"
echo "ok: one process: checkpoint of step $failed_step refused, step $kept kept"

# --resume on the disk still full fails at that save again, naming as kept
# the step it resumed from, not the failed step whose server slices alone
# were saved (it said "the checkpoint of step 10 is kept" for step 10's
# failed save)
first_kept=$kept
rc=0
"$build/shoal" run examples/fashion-mnist/mlp.conf "${small[@]}" --workspace "$ws" --resume 2>"$dir/err" >/dev/null \
  || rc=$?
check_full "$ws" rank-0 "$dir/err" "$rc"
[ "$kept" -eq "$first_kept" ] || fail "the resume on a full disk names step $kept as kept, not $first_kept"
echo "ok: resumed on the full disk: checkpoint of step $failed_step refused again, step $kept kept"

# the kept checkpoint is whole: copied out to a disk with room, it resumes
cp -a "$ws" "$dir/ws-copy"
umount "$dir/mnt"
rc=0
"$build/shoal" run examples/fashion-mnist/mlp.conf "${small[@]}" --workspace "$dir/ws-copy" --resume \
  >"$dir/out" 2>"$dir/err" || rc=$?
[ "$rc" -eq 0 ] || { cat "$dir/err"; fail "--resume of the kept checkpoint: exit $rc"; }
grep -q "rank 0: resuming at step $kept\$" "$dir/err" || { cat "$dir/err"; fail "did not resume at step $kept"; }
grep -q "^trained 40 steps" "$dir/out" || { cat "$dir/out"; fail "the resumed run did not reach step 40"; }
echo "ok: resumed at step $kept"

# 2. the server in a process of its own: its store fills up, the worker says so
mount -t tmpfs -o size=8m tmpfs "$dir/mnt" || fail "mount"
rc=0
"$build/shoal" run examples/fashion-mnist/mlp.conf "${small[@]}" -o cluster.server_worker_separate=true \
  --workspace "$ws" 2>"$dir/err" >/dev/null || rc=$?
check_full "$ws" rank-1 "$dir/err" "$rc"
echo "ok: separate server: checkpoint of step $failed_step refused, step $kept kept"

# 3. the first checkpoint fails midway: the servers' slices were saved, the
#    unit's state (with the params by name) was not.  --resume must not
#    claim that step: it says what is missing, exit 1 (it once said
#    "resuming at step 5" and failed with MDB_NOTFOUND)
umount "$dir/mnt"
rm -rf "$ws"
mount -t tmpfs -o size=3m tmpfs "$dir/mnt" || fail "mount"
rc=0
"$build/shoal" run examples/fashion-mnist/mlp.conf "${small[@]}" --workspace "$ws" 2>"$dir/err" >/dev/null || rc=$?
[ "$rc" -eq 1 ] && grep -q "checkpoint of step 5: .*No space left on device" "$dir/err" \
  || { cat "$dir/err"; fail "the first checkpoint: exit $rc without 'No space left on device'"; }
rm -rf "$dir/ws-first"
cp -a "$ws" "$dir/ws-first"
umount "$dir/mnt"
rc=0
"$build/shoal" run examples/fashion-mnist/mlp.conf "${small[@]}" --workspace "$dir/ws-first" --resume \
  >"$dir/out" 2>"$dir/err" || rc=$?
[ "$rc" -eq 1 ] || { cat "$dir/out" "$dir/err"; fail "--resume after a failed first checkpoint: exit $rc"; }
grep -q "resuming at step" "$dir/err" "$dir/out" && { cat "$dir/err"; fail "--resume claimed a step it cannot load"; }
grep -q "cannot resume: .*the checkpoint of step 5 holds no state of unit-0-0" "$dir/err" \
  || { cat "$dir/err"; fail "--resume did not say what the checkpoint lacks"; }
echo "ok: a failed first checkpoint: --resume refused, naming what is missing"
