#!/usr/bin/env bash
# libshoal.so's ABI line: `nm -D` of the library equals the functions and
# variables the public headers declare plus the documented private set
# (src/libshoal.private, scripts/public-symbols.sh); each private name is
# still called by the shoal command (src/tools), and none is public.
# Usage: abi.sh BUILD
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-build}" && pwd)
cd "$root"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

so=$(readlink -f "$build/libshoal.so")
nm -D --defined-only "$so" | awk '{ print $3 }' | sed 's/@.*//' | sort -u >"$tmp/exported"
scripts/public-symbols.sh >"$tmp/expected"
if ! diff "$tmp/expected" "$tmp/exported" >"$tmp/diff"; then
  echo "nm -D $so differs from the public headers and src/libshoal.private (< expected, > exported):"
  cat "$tmp/diff"
  fail "the exported symbols are not the documented ones"
fi
scripts/public-symbols.sh --public >"$tmp/public"
scripts/public-symbols.sh --private >"$tmp/private"
both=$(comm -12 "$tmp/public" "$tmp/private")
[ -z "$both" ] || fail "src/libshoal.private lists public names: $both"

# the private set is what the shoal command needs, no more
nm -u "$build"/obj/src/tools/*.o | awk '{ print $2 }' | sort -u >"$tmp/tools_use"
unused=$(comm -23 "$tmp/private" "$tmp/tools_use")
[ -z "$unused" ] || fail "src/libshoal.private lists names src/tools no longer calls: $unused"
# and the command links against the library with nothing missing
ldd -r "$build/shoal" 2>&1 | grep -i 'undefined symbol' && fail "the shoal command misses symbols of libshoal.so"

echo "abi: libshoal.so exports $(wc -l <"$tmp/exported") symbols: $(wc -l <"$tmp/public") public," \
  "$(wc -l <"$tmp/private") private (src/libshoal.private)"
