#!/usr/bin/env bash
# The library's error paths as a program meets them (test/e2e/lib/api_errors.c,
# <shoal/shoal.h> only, linked with BUILD's libshoal.so): every call fails
# with the code its header lists, and under valgrind memcheck, freeing what
# the headers say the caller frees, nothing is definitely lost and there is
# no invalid access or use of an uninitialised value.  Two plugins that
# break the contract come from test/e2e/lib/api_plugins.c.
# Valgrind cannot run a sanitizer build: plain builds only.
# suite: plain
# Usage: valgrind_api.sh BUILD
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-build}" && pwd)
if ! command -v valgrind >/dev/null; then
  echo "SKIP: valgrind is not installed (make deps installs it)"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
export G_SLICE=always-malloc

flags=(-std=c11 -O1 -g -Wall -Wextra -Werror -I"$root/include" $(pkg-config --cflags glib-2.0 gmodule-2.0))
libs=(-L"$build" -Wl,-rpath,"$build" -lshoal $(pkg-config --libs glib-2.0 gmodule-2.0))
cc "${flags[@]}" "$root/test/e2e/lib/api_errors.c" -o "$tmp/api_errors" "${libs[@]}" || fail "building api_errors.c"
cc "${flags[@]}" -fPIC -shared -DINIT_FAILS_SILENTLY "$root/test/e2e/lib/api_plugins.c" -o "$tmp/libsilent.so" "${libs[@]}" \
  || fail "building libsilent.so"
cc "${flags[@]}" -fPIC -shared "$root/test/e2e/lib/api_plugins.c" -o "$tmp/libnoinit.so" "${libs[@]}" \
  || fail "building libnoinit.so"

rc=0
valgrind --leak-check=full --errors-for-leak-kinds=definite --error-exitcode=99 --num-callers=30 \
  "$tmp/api_errors" "$tmp" >"$tmp/out" 2>"$tmp/valgrind.log" || rc=$?
cat "$tmp/out"
grep -E 'definitely lost|ERROR SUMMARY' "$tmp/valgrind.log"
[ "$rc" -ne 99 ] || { grep -vE '^\*\* Message' "$tmp/valgrind.log" | tail -60; fail "valgrind found errors or leaks"; }
[ "$rc" -eq 0 ] || fail "api_errors exited with $rc"
grep -qx '0 failures' "$tmp/out" || fail "a call did not fail as its header says"
grep -q 'definitely lost: 0 bytes in 0 blocks' "$tmp/valgrind.log" || fail "memory definitely lost"
[ ! -e "$tmp/a" ] || fail "a refused shoal_job_train left the folders it made for its workspace"
echo "valgrind_api: every error path as documented, nothing lost"
