#!/usr/bin/env bash
# A short libFuzzer run of every target in fuzz/ (10 s each, from the seed
# corpus plus what earlier runs found): fails on any crash, leak, hang,
# UBSan report or fatal GLib log.  `make test` builds the targets into
# build-fuzz/ first; `make fuzz` runs them longer.
# The fuzz build is its own (ASan and UBSan): plain make test runs it.
# suite: plain
# Usage: fuzz_smoke.sh BUILD (BUILD is unused: the fuzz build is separate)
set -euo pipefail
cd "$(dirname "$0")/../.."
fuzz_build=${SHOAL_FUZZ_BUILD:-build-fuzz}
ls "$fuzz_build"/fuzz/fuzz_* >/dev/null 2>&1 || { echo "no fuzz targets in $fuzz_build: run make fuzz-build"; exit 1; }
fuzz/run.sh "$fuzz_build" "${SHOAL_FUZZ_SECONDS:-10}"
