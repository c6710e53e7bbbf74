#!/usr/bin/env bash
# An endless input (issue 23: SIGTRAP, "adding 1048576 to array would
# overflow"): `shoal import text --in /dev/zero` stops at its bound, a
# quarter of the memory it may use (here the address space, ulimit -v),
# with an error and exit 1, and leaves no dataset behind.
# The case needs ulimit -v, under which ASan's and TSan's runtimes cannot
# start (they reserve terabytes of shadow address space at start: a CHECK
# failure, SIGSEGV); without the limit the bound is 4 GiB of zeros held
# in memory, which a sanitizer multiplies.  Hence only in the plain suite;
# the rest of the import's bad input is text_errors.sh, in every suite.
# suite: plain
set -euo pipefail
build=${1:-build}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
status=0
bash -c "ulimit -v 800000; exec '$build/shoal' import text --in /dev/zero --out '$dir/zero' --seq-len 10" \
  >/dev/null 2>"$dir/err" || status=$?
if [ "$status" -ne 1 ] || ! grep -qF -- "/dev/zero: the text passes " "$dir/err"; then
  echo "expected exit 1 and '/dev/zero: the text passes ' from the endless import, got exit $status:"
  cat "$dir/err"
  exit 1
fi
[ ! -e "$dir/zero" ] || { echo "the endless import left $dir/zero"; exit 1; }
echo "the endless import stopped at its bound: $(cat "$dir/err")"
