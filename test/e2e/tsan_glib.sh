#!/usr/bin/env bash
# marks: threads
# ThreadSanitizer sees GLib's locks through test/sanitizers/tsan_glib.c:
# correct hand-overs by GMutex, GCond, GAsyncQueue and g_once give no
# report, a missing lock gives a data race and two lock orders give a
# lock-order inversion.  It builds its own TSan program (cc and GCC's TSan
# runtime, libtsan2), so it runs in every build.
# Usage: tsan_glib.sh BUILD
set -euo pipefail
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
bin="$dir/tsan_selftest"
# shellcheck disable=SC2046
cc -std=c11 -O1 -g -Wall -Wextra -Werror -fsanitize=thread -o "$bin" test/sanitizers/tsan_selftest.c \
  test/sanitizers/tsan_glib.c $(pkg-config --cflags --libs glib-2.0) -ldl
failures=0
for case in locked cond queue once race inversion; do
  rc=0
  TSAN_OPTIONS="halt_on_error=0:exitcode=66" "$bin" "$case" >"$dir/$case.log" 2>&1 || rc=$?
  case $case in
    race) want="WARNING: ThreadSanitizer: data race" ;;
    inversion) want="WARNING: ThreadSanitizer: lock-order-inversion" ;;
    *) want="" ;;
  esac
  if [ -z "$want" ]; then
    if [ "$rc" -eq 0 ] && ! grep -q ThreadSanitizer "$dir/$case.log"; then
      echo "ok: $case: no report"
    else
      echo "FAIL: $case: exit $rc"; cat "$dir/$case.log"; failures=$((failures + 1))
    fi
  elif [ "$rc" -eq 66 ] && grep -q "$want" "$dir/$case.log"; then
    echo "ok: $case: $want"
  else
    echo "FAIL: $case: want '$want' and exit 66, got exit $rc"; cat "$dir/$case.log"
    failures=$((failures + 1))
  fi
done
[ "$failures" -eq 0 ]
