#!/usr/bin/env bash
# Every type the Thrift compiler generates is registered before any thread
# can make its first object (server/rpc_types.c, data/record.c): the
# generated get_type functions use an unlocked static, and two threads
# registering one type at once is a race (TSan found the heartbeat's
# arguments left out of the list: two ranks' first heartbeats raced in
# one server).  Checks the build's generated headers against the lists.
# Usage: rpc_types_listed.sh BUILD
set -euo pipefail
BUILD=$(cd "${1:-build}" && pwd)
cd "$(dirname "$0")/../.."
fail() { echo "FAIL: $*"; exit 1; }

check() {  # LIST_FILE HEADER...: every SHOAL_TYPE_ of the headers is named in the list
  local list=$1 missing=() n=0 t
  shift
  for h in "$@"; do [ -f "$BUILD/gen/$h" ] || fail "no $BUILD/gen/$h: build first"; done
  while read -r t; do
    n=$((n + 1))
    grep -qw "g_type_ensure ($t)" "$list" || missing+=("$t")
  done < <(cd "$BUILD/gen" && grep -ho '^#define SHOAL_TYPE_[A-Z0-9_]*' "$@" | awk '{ print $2 }' | sort -u)
  [ "$n" -gt 0 ] || fail "no SHOAL_TYPE_ in $*: the check would pass by checking nothing"
  [ "${#missing[@]}" -eq 0 ] || fail "$list does not register ${missing[*]} (generated in $*)"
  echo "$list: all $n generated types of $* registered"
}
check src/server/rpc_types.c shoal_param_types.h shoal_param_service.h
check src/data/record.c shoal_record_types.h

# the check catches a type left out
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
grep -v 'SHOAL_TYPE_PARAM_SERVICE_HEARTBEAT_ARGS' src/server/rpc_types.c >"$tmp"
if (check "$tmp" shoal_param_types.h shoal_param_service.h) >/dev/null; then
  fail "a list without the heartbeat's arguments passed"
fi
echo "rpc_types_listed: ok"
