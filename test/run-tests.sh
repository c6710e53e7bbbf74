#!/usr/bin/env bash
# Runs every GTest binary in BUILD/test and every end-to-end script in
# test/e2e, each under a time limit, and ends with
# "N passed, N failed, N skipped".
# A binary that crashes or times out counts its unfinished tests as failed.
#
# Skips are counted apart and always say why:
# - GTest: "ok N /path # SKIP reason" (g_test_skip) is a skip, not a pass;
# - e2e: a script that cannot run here prints "SKIP: reason" and exits 77
#   (automake's convention).
# A skip without a reason fails.  Where every prerequisite was installed
# (CI, or SHOAL_TEST_STRICT=1), only the tests matching
# SHOAL_TEST_MAY_SKIP (default: the GPU ones) and scripts with a
# "# may-skip-in-ci: WHY" line (a privilege no package gives, such as
# making namespaces in a container) may skip; any other skip fails.
# A script made for one kind of build says so in a "# suite: KIND..."
# line (plain, address, undefined, thread): other builds do not run it
# and list it at the end as belonging to another suite.
# Every time bound (this script's per-test limit, the e2e scripts' and
# GTests' own) is multiplied by SHOAL_TEST_TIME_SCALE, by default 1 for a
# plain build and more for a sanitizer build (test/e2e/lib/time_scale.sh).
# Usage: run-tests.sh [BUILD [FILTER]]; FILTER is an extended regex matched
# against "test_NAME" and "e2e_NAME".
set -u
build=${1:-build}
filter=${2:-}
passed=0
failed=0
skipped=0
failed_names=()
source "$(dirname "$0")/e2e/lib/time_scale.sh" "$build"   # scaled, SHOAL_TEST_TIME_SCALE
limit=${SHOAL_TEST_TIMEOUT:-$(scaled 300)}
[ "$SHOAL_TEST_TIME_SCALE" = 1 ] || echo "time bounds scaled by $SHOAL_TEST_TIME_SCALE (SHOAL_TEST_TIME_SCALE), $limit s per test"
log_dir="$build/test-logs"
skip_lines=()
other_suite=()
may_skip=${SHOAL_TEST_MAY_SKIP:-'^(test_gpu|e2e/cuda_build)$'}
strict=${SHOAL_TEST_STRICT:-${CI:+1}}

# note_skip NAME WHAT REASON: counts a skip of WHAT (NAME or one test of
# it), or a failure where NAME may not skip
note_skip() {
  local name=$1 what=$2 reason=$3 script=${4:-}
  local allowed=0
  [[ "$name" =~ $may_skip ]] && allowed=1
  [ -n "$script" ] && grep -q '^# may-skip-in-ci:' "$script" && allowed=1
  if [ -z "$reason" ]; then
    failed=$((failed + 1))
    failed_names+=("$what")
    skip_lines+=("FAIL $what: skipped without saying why")
  elif [ -n "$strict" ] && [ "$allowed" -eq 0 ]; then
    failed=$((failed + 1))
    failed_names+=("$what")
    skip_lines+=("FAIL $what: skipped where every prerequisite should be installed: $reason")
  else
    skipped=$((skipped + 1))
    skip_lines+=("skip $what: $reason")
  fi
}
# A sanitizer build (its Makefile wrote BUILD/sanitize): every finding fails
# its test, leaks included, with a stack.  GLib's slice allocator would
# hide heap errors and leaks behind its magazines.
sanitize=$(cat "$build/sanitize" 2>/dev/null || true)
export SHOAL_SANITIZE=$sanitize
if [ -n "$sanitize" ]; then
  # allocator_may_return_null: a huge allocation returns NULL as glibc's
  # does, so out-of-memory paths (test_oom, test_preconditions) run as in
  # a plain build, under ASan and TSan alike
  export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:print_stacktrace=1:detect_stack_use_after_return=1:allocator_may_return_null=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
  export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
  export LSAN_OPTIONS="print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
  # suppressions: OpenBLAS's own thread hand-overs, which TSan cannot see
  # (test/sanitizers/tsan.supp says why; shoal's locks need none)
  export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:allocator_may_return_null=1:suppressions=$(cd "$(dirname "$0")" && pwd)/sanitizers/tsan.supp${TSAN_OPTIONS:+:$TSAN_OPTIONS}"
  export G_SLICE=always-malloc G_DEBUG=gc-friendly
fi
elapsed() { local ms=$(( ($(date +%s%N) - $1) / 1000000 )); printf '%d.%d' $((ms / 1000)) $(((ms % 1000) / 100)); }
mkdir -p "$log_dir"

for bin in "$build"/test/test_*; do
  [ -x "$bin" ] || continue
  name=$(basename "$bin")
  [ -n "$filter" ] && ! [[ "$name" =~ $filter ]] && continue
  log="$log_dir/$name.log"
  start=$(date +%s%N)
  timeout "$limit" "$bin" >"$log" 2>&1
  rc=$?
  secs=$(elapsed "$start")
  ok=$(grep '^ok ' "$log" | grep -vc ' # SKIP')
  bad=$(grep -c '^not ok ' "$log")
  plan=$(sed -n 's/^1\.\.\([0-9]*\).*/\1/p' "$log" | head -1)
  nskip=0
  while IFS= read -r line; do
    nskip=$((nskip + 1))
    path=$(sed -n 's/^ok [0-9]* \([^ ]*\) # SKIP.*/\1/p' <<<"$line")
    reason=$(sed -n 's/^ok [0-9]* [^ ]* # SKIP *//p' <<<"$line")
    note_skip "$name" "$name $path" "$reason"
  done < <(grep '^ok .* # SKIP' "$log")
  if [ "$rc" -ne 0 ] && [ "$bad" -eq 0 ]; then
    # crashed or timed out: whatever did not report ok failed
    missing=$(( ${plan:-0} - ok - nskip ))
    [ "$missing" -lt 1 ] && missing=1
    bad=$missing
  fi
  passed=$((passed + ok))
  failed=$((failed + bad))
  if [ "$bad" -gt 0 ]; then
    failed_names+=("$name")
    echo "FAIL $name ($ok ok, $bad failed, exit $rc, ${secs}s) - log: $log"
    grep -E '^not ok|^Bail out|ERROR|CRITICAL' "$log" | head -20 | sed 's/^/    /'
  else
    more=""
    [ "$nskip" -gt 0 ] && more=", $nskip skipped"
    echo "ok   $name ($ok tests$more, ${secs}s)"
  fi
done

kind=${sanitize:-plain}
for script in test/e2e/*.sh; do
  [ -f "$script" ] || continue
  name=$(basename "$script" .sh)
  [ -n "$filter" ] && ! [[ "e2e_$name" =~ $filter ]] && continue
  suite=$(sed -n 's/^# suite: *//p' "$script" | head -1)
  if [ -n "$suite" ]; then
    mine=0
    for k in $suite; do
      [[ ",$kind," == *",$k,"* ]] && mine=1
    done
    if [ "$mine" -eq 0 ]; then
      other_suite+=("e2e/$name ($suite)")
      continue
    fi
  fi
  log="$log_dir/e2e-$name.log"
  start=$(date +%s%N)
  timeout "$limit" bash "$script" "$build" >"$log" 2>&1
  rc=$?
  secs=$(elapsed "$start")
  if [ "$rc" -eq 0 ]; then
    passed=$((passed + 1))
    echo "ok   e2e/$name (${secs}s)"
  elif [ "$rc" -eq 77 ]; then
    reason=$(sed -n 's/^SKIP: *//p' "$log" | tail -1)
    note_skip "e2e/$name" "e2e/$name" "$reason" "$script"
    echo "skip e2e/$name (${secs}s): ${reason:-no reason given}"
  else
    failed=$((failed + 1))
    failed_names+=("e2e/$name")
    echo "FAIL e2e/$name (exit $rc, ${secs}s) - log: $log"
    tail -15 "$log" | sed 's/^/    /'
  fi
done

[ "${#other_suite[@]}" -gt 0 ] && echo "not in this suite ($kind): ${other_suite[*]}"
for line in "${skip_lines[@]}"; do
  echo "$line"
done
[ "${#failed_names[@]}" -gt 0 ] && echo "failed: ${failed_names[*]}"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
