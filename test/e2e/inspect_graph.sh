#!/usr/bin/env bash
# shoal inspect: the hybrid LeNet split among 2 workers as Graphviz DOT,
# one cluster per worker and bridges as dashed cross edges; --png renders
# it when Debian's graphviz is installed, and says so clearly when not.
set -euo pipefail
build=${1:-build}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$build/shoal" inspect examples/fashion-mnist/hybrid.conf -k 2 --graph "$dir/net.dot" >"$dir/out"
grep -q "^digraph shoal {" "$dir/net.dot"
test "$(grep -c "subgraph cluster_w" "$dir/net.dot")" -eq 2
grep -q "style=dashed" "$dir/net.dot"
grep -q "graph written to $dir/net.dot" "$dir/out"
if command -v dot >/dev/null; then
  "$build/shoal" inspect examples/fashion-mnist/hybrid.conf -k 2 --graph "$dir/net.dot" --png "$dir/net.png" >/dev/null
  head -c 8 "$dir/net.png" | od -An -c | grep -q "P   N   G"
else
  status=0
  "$build/shoal" inspect examples/fashion-mnist/hybrid.conf -k 2 --graph "$dir/net.dot" --png "$dir/net.png" \
    >/dev/null 2>"$dir/err" || status=$?
  [ "$status" -ne 0 ] && grep -qi "graphviz" "$dir/err"
fi
# an impossible split names the layer and the dim
status=0
"$build/shoal" inspect examples/fashion-mnist/hybrid.conf -k 2 -o 'layer loss.partition_dim=1' \
  >/dev/null 2>"$dir/err" || status=$?
[ "$status" -ne 0 ] && grep -q "\[layer loss\] partition_dim" "$dir/err" || { cat "$dir/err"; exit 1; }
