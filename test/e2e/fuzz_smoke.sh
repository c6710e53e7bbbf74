#!/usr/bin/env bash
# A short libFuzzer run of every target in fuzz/ (10 s of one core each,
# from the seed corpus plus what earlier runs found): fails on any crash,
# leak, hang, UBSan report or fatal GLib log.  `make test` builds the
# targets into build-fuzz/ first; `make fuzz` runs them longer.
# The targets run at once, each for 10 s x targets / cores, so that each
# still gets its 10 s of a core while the suite waits a half (two cores,
# three targets: 15 s instead of 30).
# The fuzz build is its own (ASan and UBSan): plain make test runs it.
# suite: plain
# Usage: fuzz_smoke.sh BUILD (BUILD is unused: the fuzz build is separate)
set -euo pipefail
cd "$(dirname "$0")/../.."
fuzz_build=${SHOAL_FUZZ_BUILD:-build-fuzz}
ls "$fuzz_build"/fuzz/fuzz_* >/dev/null 2>&1 || { echo "no fuzz targets in $fuzz_build: run make fuzz-build"; exit 1; }
targets=()
for bin in "$fuzz_build"/fuzz/fuzz_*; do
  [ -x "$bin" ] && targets+=("$(basename "$bin")")
done
cores=$(nproc)
secs=${SHOAL_FUZZ_SECONDS:-10}
[ "${#targets[@]}" -gt "$cores" ] && secs=$(( (secs * ${#targets[@]} + cores - 1) / cores ))
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
pids=()
for t in "${targets[@]}"; do
  fuzz/run.sh "$fuzz_build" "$secs" "$t" >"$out/$t" 2>&1 &
  pids+=("$!")
done
failed=0
for i in "${!targets[@]}"; do
  wait "${pids[$i]}" || failed=1
  cat "$out/${targets[$i]}"
done
exit "$failed"
