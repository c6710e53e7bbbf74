#!/usr/bin/env bash
# A layer type from a plugin in `shoal run`: the swish plugin of
# examples/custom-layer, built with its own Makefile against the build tree
# (pkg-config shoal), trains examples/custom-layer/swish.conf (a small
# subset, as the topology tests) under conf/downpour.conf - every process
# of the job loads it - and in one group whose two workers split every
# layer by features, the plugin's included, to one worker's loss; shoal
# eval of the trained model loads the plugin too.  Then bad
# plugins, each with its exact message and a failed exit: a missing file,
# a shared library that is no shoal plugin, a file that is no shared
# library, a plugin that registers a type that exists (a built-in one, or
# another plugin's), one built for another plugin ABI, and [job] plugins
# that cannot be found.  Usage: plugin_layer.sh BUILD
set -euo pipefail
BUILD=$(cd "${1:-build}" && pwd)
cd "$(dirname "$0")/../.."
source test/e2e/lib/time_scale.sh "$BUILD"
source test/e2e/lib/topology.sh   # TOPOLOGY_ARGS, fail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
san=${SHOAL_SANITIZE:+-fsanitize=$SHOAL_SANITIZE}
export PKG_CONFIG_PATH=$BUILD/pkgconfig
[ -f "$PKG_CONFIG_PATH/shoal.pc" ] || fail "no $PKG_CONFIG_PATH/shoal.pc: run make first"

# ---- the plugin, as its author builds it ---------------------------------------
plugins=$tmp/plugins
make --no-print-directory -C examples/custom-layer OUT="$plugins" CFLAGS="-O2 -g -Wall -Wextra -Werror $san" \
  LDFLAGS="$san" "$plugins/libswish.so" >"$tmp/make.log" 2>&1 || { cat "$tmp/make.log"; fail "building libswish.so"; }
readelf -d "$plugins/libswish.so" >"$tmp/swish.dynamic"
grep -q 'NEEDED.*\[libshoal.so' "$tmp/swish.dynamic" || fail "libswish.so does not link libshoal.so"
# swish.conf names it without a path: found in SHOAL_PLUGIN_PATH
export SHOAL_PLUGIN_PATH=$plugins

# `shoal layers --plugin` shows the type and its keys
"$BUILD/shoal" layers --plugin libswish.so >"$tmp/layers.txt" || fail "shoal layers --plugin libswish.so"
grep -qxF 'swish: x * sigmoid(beta * x) (plugin: examples/custom-layer)' "$tmp/layers.txt" || fail "shoal layers: no swish"
grep -qE '^  beta +sharpness' "$tmp/layers.txt" || fail "shoal layers: no beta key"

# ---- downpour: 3 processes, each loads the plugin --------------------------------
# the launcher and each rank say (g_debug, on stdout) that they loaded it
ws=$tmp/downpour
rc=0
G_MESSAGES_DEBUG=all timeout -k 10 "$(scaled 150)" "$BUILD/shoal" run examples/custom-layer/swish.conf \
  --topology conf/downpour.conf "${TOPOLOGY_ARGS[@]}" --workspace "$ws" >"$tmp/downpour.out" 2>"$tmp/downpour.err" || rc=$?
grep -v DEBUG "$tmp/downpour.out" || true
tail -5 "$tmp/downpour.err"
[ "$rc" -eq 0 ] || fail "swish.conf under conf/downpour.conf exited with $rc"
for r in 0 1 2; do
  grep -qE "^rank $r \(.*\): exit 0$" "$tmp/downpour.out" || fail "no 'rank $r (...): exit 0' line"
done
loads=$(grep -F "plugin $plugins/libswish.so (swish) loaded" "$tmp/downpour.out" \
        | sed -n 's/^\*\* (shoal:\([0-9]*\)): DEBUG.*/\1/p' | sort -u | wc -l)
[ "$loads" -eq 4 ] || fail "the plugin was loaded by $loads processes, expected 4 (the launcher and 3 ranks)"
grep -qx 'plugins=libswish.so' "$ws/job.conf" || fail "the conf as run does not name the plugin"
acc=$(sed -n 's/^final test accuracy: //p' "$tmp/downpour.out")
awk -v a="$acc" 'BEGIN { exit !(a >= 0.80) }' || fail "downpour: accuracy '$acc' below 0.80"
echo "downpour: the launcher and 3 ranks loaded the plugin; final test accuracy $acc (bar 0.80)"

# ---- one group of 2 workers in one process, every layer split by features -------
# --plugin names the same file as swish.conf's plugins: it is loaded once
ws=$tmp/feature
rc=0
timeout -k 10 "$(scaled 150)" "$BUILD/shoal" run examples/custom-layer/swish.conf --plugin "$plugins/libswish.so" \
  "${TOPOLOGY_ARGS[@]}" -o cluster.nworkers_per_group=2 -o cluster.nworkers_per_procs=2 \
  -o cluster.partition_dim=1 --workspace "$ws" >"$tmp/feature.out" 2>"$tmp/feature.err" || rc=$?
cat "$tmp/feature.out"
tail -5 "$tmp/feature.err"
[ "$rc" -eq 0 ] || fail "the feature-partitioned group exited with $rc"
grep -qE 'partition dims .* act1:1 .*act2:1 ' "$tmp/feature.err" || fail "swish layers were not split by features"
grep -qE 'group of 2 workers' "$tmp/feature.err" || fail "not a group of 2 workers"
acc=$(sed -n 's/^final test accuracy: //p' "$tmp/feature.out")
awk -v a="$acc" 'BEGIN { exit !(a >= 0.80) }' || fail "feature split: accuracy '$acc' below 0.80"
echo "feature split: act1 and act2 split by features; final test accuracy $acc (bar 0.80)"

# the split computes what one worker computes (up to float sums)
rc=0
timeout -k 10 "$(scaled 150)" "$BUILD/shoal" run examples/custom-layer/swish.conf "${TOPOLOGY_ARGS[@]}" \
  --workspace "$tmp/single" >"$tmp/single.out" 2>"$tmp/single.err" || rc=$?
[ "$rc" -eq 0 ] || { tail -5 "$tmp/single.err"; fail "one worker exited with $rc"; }
test_loss() { grep '"phase":"test"' "$1/metrics.jsonl" | tail -1 | sed 's/.*"loss":\([-0-9.e]*\).*/\1/'; }
split_loss=$(test_loss "$ws")
single_loss=$(test_loss "$tmp/single")
awk -v a="$split_loss" -v b="$single_loss" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && d <= 1e-3 * b) }' \
  || fail "feature split: final test loss $split_loss, one worker $single_loss"
echo "feature split: final test loss $split_loss, one worker $single_loss"

# a trained model with a plugin layer: shoal eval loads the conf's plugins
"$BUILD/shoal" eval "$tmp/single/job.conf" --from "$tmp/single" >"$tmp/eval.out" 2>"$tmp/eval.err" \
  || { cat "$tmp/eval.err"; fail "shoal eval of the swish model"; }
acc=$(sed -n 's/^test accuracy: //p' "$tmp/eval.out")
awk -v a="$acc" 'BEGIN { exit !(a >= 0.80) }' || { cat "$tmp/eval.out"; fail "shoal eval: accuracy '$acc' below 0.80"; }
echo "shoal eval of the swish model: test accuracy $acc"
# a conf that does not name the plugin: eval and predict take --plugin
grep -v '^plugins=' "$tmp/single/job.conf" >"$tmp/noplugins.conf"
if "$BUILD/shoal" eval "$tmp/noplugins.conf" --from "$tmp/single" >/dev/null 2>"$tmp/eval-np.err"; then
  fail "shoal eval of a swish model without its plugin succeeded"
fi
grep -q "unknown layer type 'swish'" "$tmp/eval-np.err" || { cat "$tmp/eval-np.err"; fail "eval without the plugin: message"; }
"$BUILD/shoal" eval "$tmp/noplugins.conf" --from "$tmp/single" --plugin "$plugins/libswish.so" >"$tmp/eval-p.out" \
  || fail "shoal eval --plugin"
grep -qx "test accuracy: $acc" "$tmp/eval-p.out" || { cat "$tmp/eval-p.out"; fail "eval --plugin: another accuracy"; }
"$BUILD/shoal" predict "$tmp/noplugins.conf" --from "$tmp/single" --plugin "$plugins/libswish.so" \
  --out "$tmp/pred-p.csv" >/dev/null || fail "shoal predict --plugin"
echo "eval and predict --plugin: ok"

# ---- bad plugins --------------------------------------------------------------
bad=$tmp/bad
mkdir -p "$bad"
cat >"$bad/plain.c" <<'EOF'
/* a shared library, but no shoal plugin */
int plain_answer (void);
int plain_answer (void) { return 42; }
EOF
cat >"$bad/relu_again.c" <<'EOF'
/* a plugin that registers a built-in type's name */
#include <shoal/shoal.h>
static gboolean
setup (ShoalLayer *layer, GError **error)
{
  (void) error;
  shoal_layer_set_out_shape (layer, shoal_tensor_shape (shoal_layer_src_out (layer, 0)));
  return TRUE;
}
static void forward (ShoalLayer *layer, ShoalPhase phase) { (void) layer; (void) phase; }
static const ShoalLayerOps ops = { .type = "relu", .min_srcs = 1, .max_srcs = 1, .setup = setup, .forward = forward };
static gboolean init (GError **error) { return shoal_layer_register (&ops, error); }
SHOAL_PLUGIN_DEFINE ("relu-again", "registers a type that exists", init);
EOF
cat >"$bad/abi999.c" <<'EOF'
/* what a plugin built with other headers looks like to this shoal */
#include <shoal/shoal.h>
static gboolean init (GError **error) { (void) error; return TRUE; }
G_MODULE_EXPORT const ShoalPluginInfo shoal_plugin_info = { 999, "abi999", "another plugin ABI", init };
EOF
cc $san -shared -fPIC -o "$bad/libplain.so" "$bad/plain.c" || fail "building libplain.so"
for f in relu_again abi999; do
  # shellcheck disable=SC2046
  cc -std=c11 -Wall -Wextra -Werror $san -shared -fPIC -o "$bad/lib$f.so" "$bad/$f.c" \
    $(pkg-config --cflags --libs shoal) || fail "building lib$f.so"
done
head -c 300 README.md >"$bad/libtext.so"   # not ELF, and longer than an ELF header
mkdir -p "$bad/copy"
cp "$plugins/libswish.so" "$bad/copy/libswish.so"   # another file that registers swish

expect_error() {  # PLUGIN MESSAGE: shoal run fails with exit 1 and exactly MESSAGE
  local rc=0
  "$BUILD/shoal" run examples/custom-layer/swish.conf --plugin "$1" --workspace "$tmp/ws-bad" \
    >"$tmp/bad.out" 2>"$tmp/bad.err" || rc=$?
  [ "$rc" -eq 1 ] || { cat "$tmp/bad.err"; fail "--plugin $1: exit $rc, expected 1"; }
  grep -qxF "$2" "$tmp/bad.err" || { cat "$tmp/bad.err"; fail "--plugin $1: expected '$2'"; }
  [ ! -e "$tmp/ws-bad" ] || fail "--plugin $1: a workspace was made"
  echo "ok: $2"
}
expect_error "$bad/nope.so" "shoal run: --plugin: plugin $bad/nope.so: no such file"
expect_error "$bad/libplain.so" \
  "shoal run: --plugin: plugin $bad/libplain.so: not a shoal plugin (it has no shoal_plugin_info: see shoal/plugin.h)"
expect_error "$bad/libtext.so" \
  "shoal run: --plugin: plugin $bad/libtext.so: cannot load: $bad/libtext.so: invalid ELF header"
expect_error "$bad/librelu_again.so" \
  "shoal run: --plugin: plugin $bad/librelu_again.so (relu-again): layer type 'relu' is already registered"
expect_error "$bad/copy/libswish.so" \
  "shoal run: --plugin: plugin $bad/copy/libswish.so (swish): layer type 'swish' is already registered"
expect_error "$bad/libabi999.so" \
  "shoal run: --plugin: plugin $bad/libabi999.so: built for plugin ABI 999, this shoal ($(pkg-config --modversion shoal)) has ABI 1: rebuild it"

# [job] plugins that cannot be found: the conf's line, where it looked
plugindir=$(pkg-config --variable=plugindir shoal)
line=$(grep -n '^plugins = libswish.so$' examples/custom-layer/swish.conf | cut -d: -f1)
rc=0
env -u SHOAL_PLUGIN_PATH "$BUILD/shoal" run examples/custom-layer/swish.conf --workspace "$tmp/ws-bad" \
  >"$tmp/bad.out" 2>"$tmp/bad.err" || rc=$?
[ "$rc" -eq 1 ] || { cat "$tmp/bad.err"; fail "a plugin not found: exit $rc"; }
msg="shoal run: examples/custom-layer/swish.conf:$line: [job] plugins: plugin libswish.so: no such file (looked in SHOAL_PLUGIN_PATH and $plugindir)"
grep -qxF "$msg" "$tmp/bad.err" || { cat "$tmp/bad.err"; fail "expected '$msg'"; }
echo "ok: $msg"
echo "plugin layer: ok"
