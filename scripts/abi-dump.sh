#!/usr/bin/env bash
# The public ABI of BUILD's libshoal.so as libabigail's abidw writes it:
# the functions and variables of include/shoal/*.h (scripts/public-symbols.sh
# --public; the private set of src/libshoal.private promises nothing) and
# the types they reach that the public headers define.  `make abi-baseline`
# keeps it as test/abi/SONAME.abi, what e2e/abi compares every later build
# of that soname with (docs/LIBRARY.md).
# Usage: scripts/abi-dump.sh BUILD OUT.abi
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:?usage: abi-dump.sh BUILD OUT.abi}
out=${2:?usage: abi-dump.sh BUILD OUT.abi}
command -v abidw >/dev/null || { echo "abidw is missing (Debian package abigail-tools; make deps)" >&2; exit 1; }
list=$(mktemp)
trap 'rm -f "$list"' EXIT
scripts_dir=$root/scripts
{ echo "[abi_whitelist]"; "$scripts_dir/public-symbols.sh" --public | sed 's/^/  /'; } >"$list"
# run from the source root: DWARF names the headers include/shoal/*.h, relative to it
cd "$root"
abidw --headers-dir include/shoal --drop-private-types --no-corpus-path -w "$list" \
  "$(readlink -f "$build/libshoal.so")" --out-file "$out"
