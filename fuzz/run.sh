#!/usr/bin/env bash
# Runs every libFuzzer target of a fuzz build for SECONDS each (or until
# SHOAL_FUZZ_RUNS executions, when set and reached first) and prints one
# line per target: executions, rate, corpus size, and whether it crashed.
# Usage: fuzz/run.sh FUZZ_BUILD SECONDS [TARGET...]
# Seeds come from fuzz/corpus/TARGET (read only); inputs the fuzzer finds
# go to FUZZ_BUILD/corpus/TARGET and crashes to FUZZ_BUILD/crashes/.
# Exits non-zero when a target crashed, leaked, timed out or ran out of
# memory; its log is FUZZ_BUILD/logs/TARGET.log.
set -u
build=${1:?usage: fuzz/run.sh FUZZ_BUILD SECONDS [TARGET...]}
secs=${2:?usage: fuzz/run.sh FUZZ_BUILD SECONDS [TARGET...]}
shift 2
root=$(cd "$(dirname "$0")/.." && pwd)
targets=("$@")
if [ "${#targets[@]}" -eq 0 ]; then
  for bin in "$build"/fuzz/fuzz_*; do
    [ -x "$bin" ] && targets+=("$(basename "$bin")")
  done
fi
[ "${#targets[@]}" -gt 0 ] || { echo "no fuzz targets in $build/fuzz: run make fuzz-build"; exit 1; }
mkdir -p "$build/logs" "$build/crashes"
export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:print_stacktrace=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
# print_suppressions: the log says when (and how often) fuzz/lsan.supp
# was used, so a suppressed report is never silent
export LSAN_OPTIONS="suppressions=$root/fuzz/lsan.supp:print_suppressions=1${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
export G_SLICE=always-malloc
failed=0
for t in "${targets[@]}"; do
  bin="$build/fuzz/$t"
  [ -x "$bin" ] || { echo "FAIL $t: no $bin"; failed=1; continue; }
  work="$build/corpus/$t"
  seeds="$root/fuzz/corpus/$t"
  mkdir -p "$work"
  log="$build/logs/$t.log"
  start=$(date +%s)
  # fuzz/lsan.supp names a frame under GLib, which has no frame pointers:
  # only the slow unwinder sees past it (about 15 % fewer executions)
  unwind=
  [ "$t" = fuzz_param_handler ] && unwind=fast_unwind_on_malloc=0
  # -timeout: one input taking 10 s is a hang; -rss_limit_mb: 2 GiB is a leak or a blow-up
  ASAN_OPTIONS="$ASAN_OPTIONS${unwind:+:$unwind}" "$bin" "$work" $([ -d "$seeds" ] && echo "$seeds") -max_total_time="$secs" -timeout=10 \
    ${SHOAL_FUZZ_RUNS:+-runs=$SHOAL_FUZZ_RUNS} \
    -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$build/crashes/$t-" >"$log" 2>&1
  rc=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  cov=$(grep -a -o 'cov: [0-9]*' "$log" | tail -1)
  corpus=$(find "$work" -type f | wc -l)
  # libFuzzer stops checking for leaks after each input once 1000 checks
  # found none; the check at exit still runs
  note=""
  grep -a -q 'disabled leak detection' "$log" && note=" (leak checks per input stopped after 1000; one at exit)"
  # LeakSanitizer prints its table at every check that used one: the last counts all
  used=$(awk '/^Suppressions used:/ { t = "" } /^ +[0-9]+ +[0-9]+ / { t = t sprintf("%s: %s blocks, %s bytes; ", $3, $1, $2) }
              END { print t }' "$log")
  [ -n "$used" ] && note="$note (fuzz/lsan.supp used: $used)"
  if [ "$rc" -eq 0 ]; then
    echo "ok   $t: ${runs:-?} runs in $(( $(date +%s) - start )) s (${rate:-?}/s), $cov, corpus $corpus$note"
  else
    failed=1
    echo "FAIL $t (exit $rc): log $log"
    grep -a -E 'ERROR|SUMMARY|runtime error|Test unit written|fatal log|ERROR:' "$log" | head -10 | sed 's/^/    /'
  fi
done
exit "$failed"
