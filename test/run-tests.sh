#!/usr/bin/env bash
# Runs every GTest binary in BUILD/test and every end-to-end script in
# test/e2e, each under a time limit, and ends with "N passed, N failed".
# A binary that crashes or times out counts its unfinished tests as failed.
set -u
build=${1:-build}
filter=${2:-}
passed=0
failed=0
failed_names=()
limit=${SHOAL_TEST_TIMEOUT:-300}
log_dir="$build/test-logs"
elapsed() { local ms=$(( ($(date +%s%N) - $1) / 1000000 )); printf '%d.%d' $((ms / 1000)) $(((ms % 1000) / 100)); }
mkdir -p "$log_dir"

for bin in "$build"/test/test_*; do
  [ -x "$bin" ] || continue
  name=$(basename "$bin")
  [ -n "$filter" ] && [[ "$name" != *"$filter"* ]] && continue
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
  [ -n "$filter" ] && [[ "$name" != *"$filter"* ]] && continue
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
