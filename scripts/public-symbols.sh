#!/usr/bin/env bash
# The symbols libshoal.so exports, one a line, sorted: every function and
# variable the public headers (include/shoal/*.h) declare, then the
# documented private set (src/libshoal.private: what the shoal command
# itself calls, with no promise to anyone else).  The Makefile makes the
# linker's version script from this list; e2e/abi checks `nm -D` against it.
#
# Usage: scripts/public-symbols.sh [--public | --private]   (both by default)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
what=${1:-all}

public() {
  # the headers without comments (the preprocessor's view, macros kept
  # unexpanded by not including GLib): declarations of shoal_* names
  local f
  for f in "$root"/include/shoal/*.h; do
    sed -e 's@//.*@@' "$f"
  done | cpp -P -fpreprocessed -w 2>/dev/null \
    | tr '\n' ' ' | sed 's/;/;\n/g' \
    | grep -v '^ *#' \
    | grep -v '^ *typedef' \
    | grep -oE '\b(shoal_[a-z0-9_]+) *(\(|\[)' | sed -E 's/ *(\(|\[)$//' \
    | grep -vx 'shoal_plugin_info' | sort -u
}

private() {
  sed -e 's/#.*//' -e 's/[[:space:]]//g' "$root/src/libshoal.private" | grep -v '^$' | sort -u
}

case "$what" in
  --public) public ;;
  --private) private ;;
  all) { public; private; } | sort -u ;;
  *) echo "usage: $0 [--public | --private]" >&2; exit 2 ;;
esac
