#!/usr/bin/env bash
# Runs every GTest binary in BUILD/test and every end-to-end script in
# test/e2e, each under a time limit, and ends with "N passed, N failed".
# A binary that crashes or times out counts its unfinished tests as failed.
# Usage: run-tests.sh [BUILD [FILTER]]; FILTER is an extended regex matched
# against "test_NAME" and "e2e_NAME".
set -u
build=${1:-build}
filter=${2:-}
passed=0
failed=0
failed_names=()
limit=${SHOAL_TEST_TIMEOUT:-300}
log_dir="$build/test-logs"
# A sanitizer build (its Makefile wrote BUILD/sanitize): every finding fails
# its test, leaks included, with a stack.  GLib's slice allocator would
# hide heap errors and leaks behind its magazines.
sanitize=$(cat "$build/sanitize" 2>/dev/null || true)
export SHOAL_SANITIZE=$sanitize
if [ -n "$sanitize" ]; then
  export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:print_stacktrace=1:detect_stack_use_after_return=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
  export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
  export LSAN_OPTIONS="print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
  export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1${TSAN_OPTIONS:+:$TSAN_OPTIONS}"
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
  ok=$(grep -c '^ok ' "$log")
  bad=$(grep -c '^not ok ' "$log")
  plan=$(sed -n 's/^1\.\.\([0-9]*\).*/\1/p' "$log" | head -1)
  if [ "$rc" -ne 0 ] && [ "$bad" -eq 0 ]; then
    # crashed or timed out: whatever did not report ok failed
    missing=$(( ${plan:-0} - ok ))
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
    echo "ok   $name ($ok tests, ${secs}s)"
  fi
done

for script in test/e2e/*.sh; do
  [ -f "$script" ] || continue
  name=$(basename "$script" .sh)
  [ -n "$filter" ] && ! [[ "e2e_$name" =~ $filter ]] && continue
  log="$log_dir/e2e-$name.log"
  start=$(date +%s%N)
  timeout "$limit" bash "$script" "$build" >"$log" 2>&1
  rc=$?
  secs=$(elapsed "$start")
  if [ "$rc" -eq 0 ]; then
    passed=$((passed + 1))
    echo "ok   e2e/$name (${secs}s)"
  else
    failed=$((failed + 1))
    failed_names+=("e2e/$name")
    echo "FAIL e2e/$name (exit $rc, ${secs}s) - log: $log"
    tail -15 "$log" | sed 's/^/    /'
  fi
done

[ "${#failed_names[@]}" -gt 0 ] && echo "failed: ${failed_names[*]}"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
