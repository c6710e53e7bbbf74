#!/usr/bin/env bash
# make check-layers: the folders of src/ form layers, and every include and
# every call points down them (or stays in its folder).  An include or a
# call that runs upward fails, naming the file, the line or symbol, and
# the two folders.  A cycle between folders needs an upward edge, so this
# also rules out cycles.
#
# Usage: scripts/check-layers.sh BUILD   (BUILD holds the objects of `make`)
set -u
build=${1:-build}

# Lowest first.  docs/ARCHITECTURE.md draws the same order.
LAYERS=(core rpc layers gpu data net partition server comm cluster worker dashboard tools)
declare -A level
for i in "${!LAYERS[@]}"; do level[${LAYERS[$i]}]=$i; done
level[gen]=${level[rpc]}   # generated Thrift code: the rpc layer and above use it

bad=0
complain() { echo "check-layers: $*"; bad=1; }

# ---- includes --------------------------------------------------------------
for f in $(find src -name '*.[ch]' -o -name '*.cu' | sort); do
  from=$(echo "$f" | cut -d/ -f2)
  [ -n "${level[$from]:-}" ] || { complain "$f: folder '$from' is not in the layer list"; continue; }
  while IFS=: read -r line inc; do
    to=${inc%%/*}
    [ "$to" = "$inc" ] && continue                  # generated header or same-folder name
    [ -n "${level[$to]:-}" ] || continue             # not one of ours
    if [ "${level[$to]}" -gt "${level[$from]}" ]; then
      complain "$f:$line: includes \"$inc\": $from may not include $to (a higher layer)"
    fi
  done < <(grep -n '^#include "' "$f" | sed 's/^\([0-9]*\):#include "\([^"]*\)".*/\1:\2/')
done

# ---- calls (and data references) between objects --------------------------
objdir="$build/obj/src"
# the objects of today's sources only (a moved file leaves its old object)
objects=()
for f in $(find src -name '*.c' | sort); do
  [ -f "$build/obj/${f%.c}.o" ] && objects+=("$build/obj/${f%.c}.o")
done
if [ "${#objects[@]}" -gt 0 ]; then
  declare -A owner
  while read -r obj sym; do
    folder=$(echo "${obj#$objdir/}" | cut -d/ -f1)
    owner[$sym]=$folder
  done < <(nm -A --defined-only -g "${objects[@]}" 2>/dev/null \
           | awk '{ split($1, a, ":"); print a[1], $3 }')
  while read -r obj sym; do
    from=$(echo "${obj#$objdir/}" | cut -d/ -f1)
    to=${owner[$sym]:-}
    [ -n "$to" ] && [ -n "${level[$from]:-}" ] && [ -n "${level[$to]:-}" ] || continue
    if [ "${level[$to]}" -gt "${level[$from]}" ]; then
      complain "${obj#$build/obj/}: uses $sym from $to: $from may not call into $to (a higher layer)"
    fi
  done < <(nm -A -u "${objects[@]}" 2>/dev/null \
           | awk '{ split($1, a, ":"); print a[1], $NF }')
else
  complain "$objdir: no objects (run make first)"
fi

[ "$bad" -eq 0 ] && echo "check-layers: ok (${LAYERS[*]})"
exit "$bad"
