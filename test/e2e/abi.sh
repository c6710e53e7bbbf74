#!/usr/bin/env bash
# libshoal.so's ABI line: `nm -D` of the library equals the functions and
# variables the public headers declare plus the documented private set
# (src/libshoal.private, scripts/public-symbols.sh); each private name is
# still called by the shoal command (src/tools), and none is public; and
# the public ABI is compatible with the baseline of its soname
# (test/abi/SONAME.abi, abidiff).
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

# the soname's promise (docs/LIBRARY.md): a build of libshoal.so.MAJOR is
# compatible with the public ABI that soname started with
# (test/abi/libshoal.so.MAJOR.abi, made by `make abi-baseline`): no public
# function or variable removed, no public type whose layout a program
# compiled against the older headers would get wrong.  Added functions are
# compatible (listed, not refused).
if ! command -v abidiff >/dev/null; then
  echo "SKIP: abidiff is not installed (Debian package abigail-tools; make deps)"
  exit 77
fi
soname=$(readelf -d "$so" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
baseline=test/abi/$soname.abi
[ -f "$baseline" ] || fail "no ABI baseline for $soname: a new soname starts one with make abi-baseline ($baseline)"
{ echo "[abi_whitelist]"; sed 's/^/  /' "$tmp/public"; } >"$tmp/public.list"
rc=0
abidiff --no-added-syms --headers-dir2 include/shoal -w "$tmp/public.list" "$baseline" "$so" >"$tmp/abidiff" 2>&1 || rc=$?
if (( rc & 3 )); then cat "$tmp/abidiff"; fail "abidiff could not compare $baseline with $so (exit $rc)"; fi
if (( rc & 12 )); then
  cat "$tmp/abidiff"
  fail "$soname is not compatible with its baseline $baseline: a program built against the older headers breaks; bump SHOAL_MAJOR_VERSION (a new soname) and make abi-baseline"
fi
added=$(abidiff --headers-dir2 include/shoal -w "$tmp/public.list" "$baseline" "$so" 2>&1 | grep -c '^  \[A\]' || true)
echo "abi: compatible with $baseline ($added public functions or variables added since)"
