#!/usr/bin/env bash
# make check-layers: each folder of src/ may include and call only its own
# files and the folders ALLOWED lists for it below (the whiteboard's
# edges, not merely "anything lower"), and the folders form layers: every
# allowed folder is lower in LAYERS, so there is no cycle.  An include or
# a call outside the list fails, naming the file, the line or symbol,
# and the two folders.  docs/ARCHITECTURE.md's diagram is made from the
# same lists (`scripts/check-layers.sh --diagram`; e2e/check_layers
# checks that the document holds what it prints).
#
# Usage: scripts/check-layers.sh BUILD   (BUILD holds the objects of `make`)
#        scripts/check-layers.sh --diagram
set -u

# Lowest first.
LAYERS=(core rpc layers gpu data net partition server comm cluster metrics workspace job worker emulate run dashboard tools)
# What each folder may use besides itself (and core, which every folder may use).
declare -A ALLOWED=(
  [core]=""
  [rpc]=""
  [layers]=""
  [gpu]="layers"
  [data]="rpc layers"
  [net]="layers"
  [partition]="layers net"
  [server]="rpc data"
  [comm]="rpc server partition"   # the param client moves ranges of the store, never a layer
  [cluster]="rpc partition server"   # rpc: [tls] makes the TLS context the links use
  [metrics]="rpc net server cluster"   # rpc: a process's report goes over a Thrift socket
  [workspace]="rpc data cluster metrics"   # rpc: the lock's shared memory; metrics: trimmed on resume
  [job]="layers data net partition cluster workspace"   # workspace: trained models and params by name are read from one
  [worker]="layers net partition server comm cluster metrics job"   # layers: the push hook asks a finished layer where its params begin
  [emulate]="rpc data partition server comm cluster metrics workspace job worker"
  [run]="rpc data net partition server comm cluster metrics workspace job worker emulate"
  [dashboard]=""
  [tools]="rpc layers data net partition server cluster metrics workspace job worker emulate run dashboard"   # rpc: shoal certs makes the TLS credentials
)
declare -A level
for i in "${!LAYERS[@]}"; do level[${LAYERS[$i]}]=$i; done

# may FROM TO: whether folder FROM may include or call folder TO
may() {
  [ "$1" = "$2" ] || [ "$2" = core ] && return 0
  [ "$2" = gen ] && { may "$1" rpc; return; }   # generated Thrift code: whoever may use rpc
  [[ " ${ALLOWED[$1]} " == *" $2 "* ]]
}

if [ "${1:-}" = "--diagram" ]; then
  # one line per folder, highest first: what it may use
  for ((i = ${#LAYERS[@]} - 1; i >= 0; i--)); do
    f=${LAYERS[$i]}
    uses=${ALLOWED[$f]}
    printf '%-10s -> %s\n' "$f" "${uses:+$(echo "$uses" | sed 's/ /, /g'), }core"
  done | sed 's/^core       -> core$/core       (uses nothing of shoal)/'
  exit 0
fi
build=${1:-build}

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
    may "$from" "$to" || complain "$f:$line: includes \"$inc\": $from may not include $to (allowed: ${ALLOWED[$from]:+${ALLOWED[$from]} }core)"
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
    may "$from" "$to" || complain "${obj#$build/obj/}: uses $sym from $to: $from may not call into $to (allowed: ${ALLOWED[$from]:+${ALLOWED[$from]} }core)"
  done < <(nm -A -u "${objects[@]}" 2>/dev/null \
           | awk '{ split($1, a, ":"); print a[1], $NF }')
else
  complain "$objdir: no objects (run make first)"
fi

# the lists themselves: every allowed folder is a lower layer (no cycle)
for f in "${LAYERS[@]}"; do
  for t in ${ALLOWED[$f]}; do
    [ -n "${level[$t]:-}" ] || { complain "ALLOWED[$f] names '$t', not a folder of LAYERS"; continue; }
    [ "${level[$t]}" -lt "${level[$f]}" ] || complain "ALLOWED[$f] names '$t', which is not below $f"
  done
done

[ "$bad" -eq 0 ] && echo "check-layers: ok (${LAYERS[*]}, each folder's allowed list)"
exit "$bad"
