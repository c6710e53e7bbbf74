#!/usr/bin/env bash
# TLS on the links between hosts ([tls], docs/SECURITY.md) against the
# same links in clear, as interleaved ratios (each pair run back to back,
# alternating which goes first, so load from outside hits both alike):
# 1. the parameter service on loopback (bench/tls_throughput.c): push then
#    pull of one slice of 1, 4 and 16 MiB, a TLS server process against a
#    plain one; ratio = plain time / TLS time per pair, median over the
#    pairs (target >= 0.8 at 4 MiB);
# 2. the MLP example's Sandblaster with its servers in another network
#    namespace (two "hosts" on a veth pair, as test/e2e/multihost_netns.sh),
#    the hosts claiming different host ids so that every slice crosses
#    the link: samples/s over TLS / in clear per pair, median [min-max]
#    (target >= 0.9).  Needs root for the namespaces; says so and skips
#    part 2 without.
#   With BENCH_TLS_RATE (a tc rate, e.g. 1gbit) the veth pair is also held
#   to that rate each way (tc tbf) and part 2 runs again: a link slower
#   than the CPU's copies, as between real hosts, instead of loopback's
#   memory speed.
#   bench/tls.sh [BUILD_DIR]
#   knobs: BENCH_TLS_SIZES=1,4,16 BENCH_TLS_SECONDS=2 BENCH_TLS_REPEATS=3 BENCH_TLS_STEPS=300
#          BENCH_TLS_RATE=
set -u -o pipefail
cd "$(dirname "$0")/.." || exit 1
BUILD=${1:-build}
REPEATS=${BENCH_TLS_REPEATS:-3}
STEPS=${BENCH_TLS_STEPS:-300}
PKGS="glib-2.0 gthread-2.0 gobject-2.0 gmodule-2.0 thrift_c_glib lmdb openblas zlib json-glib-1.0 openssl"
tmp=$(mktemp -d)
ns_w=shoal-bench-$$-w
ns_s=shoal-bench-$$-s
cleanup() {
  ip netns del "$ns_w" 2>/dev/null
  ip netns del "$ns_s" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
die () { echo "bench/tls: $*" >&2; exit 1; }

[ -f "$BUILD/libshoal.a" ] || die "$BUILD/libshoal.a missing: run make first"
# shellcheck disable=SC2046  # pkg-config prints several flags
"${CC:-cc}" -std=c11 -O2 -Wall -Wextra -D_GNU_SOURCE -Iinclude -Isrc -I"$BUILD/gen" $(pkg-config --cflags $PKGS) \
  bench/tls_throughput.c -o "$tmp/tls_throughput" "$BUILD/libshoal.a" $(pkg-config --libs $PKGS) -lm -lpthread \
  || die "cannot build bench/tls_throughput.c"
echo "Parameter service on loopback, TLS 1.3 (AES-128-GCM) against plain TCP: push then pull of one slice," \
     "MiB/s of slice bytes both ways (medians), ratio = plain time / TLS time per interleaved pair (median):"
G_MESSAGES_DEBUG= "$tmp/tls_throughput" --sizes "${BENCH_TLS_SIZES:-1,4,16}" --seconds "${BENCH_TLS_SECONDS:-2}" 2>/dev/null |
  awk '{ for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
         printf "  %4s MiB  plain %6s MiB/s  tls %6s MiB/s  ratio %s  (%s pairs)\n", v["size_mib"], v["plain"], v["tls"],
           v["ratio"], v["pairs"] }' || die "tls_throughput failed"

if ! ip netns add "$ns_w" 2>/dev/null; then
  echo "Sandblaster across two namespaces: skipped (cannot create network namespaces here: needs root)"
  exit 0
fi
ip netns add "$ns_s"
ip netns exec "$ns_w" ip link add vw type veth peer name vs netns "$ns_s"
ip netns exec "$ns_w" ip addr add 10.201.0.1/24 dev vw
ip netns exec "$ns_s" ip addr add 10.201.0.2/24 dev vs
for ns in "$ns_w" "$ns_s"; do ip netns exec "$ns" ip link set lo up; done
ip netns exec "$ns_w" ip link set vw up
ip netns exec "$ns_s" ip link set vs up

# the example's MLP (1024-unit layers), Sandblaster's layout, a short run
sed -e "s/^epochs = 3\$/train_steps = $STEPS/" -e 's/^test_freq = 938$/test_freq = 0\ntest_steps = 1/' \
  examples/fashion-mnist/mlp.conf >"$tmp/job.conf"
grep -q "^train_steps = $STEPS\$" "$tmp/job.conf" || die "examples/fashion-mnist/mlp.conf changed: update bench/tls.sh"
cat conf/sandblaster.conf >>"$tmp/job.conf"
sed 's/^\[job\]$/[tls]\nmode = off\n\n[job]/' "$tmp/job.conf" >"$tmp/clear.conf"
(umask 077 && od -An -tx1 -N16 /dev/urandom | tr -d ' \n' >"$tmp/token")
printf '10.201.0.1\n10.201.0.2\n' >"$tmp/hosts"
"$BUILD/shoal" certs "$tmp/job.conf" --out "$tmp/tls" >/dev/null || die "shoal certs failed"

# one_run KIND N: samples/s of rank 0 (median of its train windows)
one_run() {
  local kind=$1 n=$2 conf=$tmp/job.conf extra=(--tls-dir "$tmp/tls")
  [ "$kind" = clear ] && { conf=$tmp/clear.conf; extra=(); }
  local args=("$conf" --hostfile "$tmp/hosts" --token-file "$tmp/token" --workspace "$tmp/ws-$kind-$n" -q "${extra[@]}")
  ip netns exec "$ns_s" env SHOAL_INJECT_HOST_ID=bench-s timeout 300 "$BUILD/shoal" proc "${args[@]}" --rank 1 \
    >/dev/null 2>&1 &
  local spid=$!
  ip netns exec "$ns_w" env SHOAL_INJECT_HOST_ID=bench-w timeout 300 "$BUILD/shoal" proc "${args[@]}" --rank 0 \
    >"$tmp/out" 2>/dev/null || die "$kind run $n failed"
  wait "$spid" || die "$kind run $n: the server rank failed"
  sed -n 's/^rank 0: group 0 worker 0: [0-9]* steps at \([0-9]*\) samples\/s.*/\1/p' "$tmp/out"
}
# pairs LABEL: REPEATS interleaved pairs, their ratio
pairs() {
  rm -rf "$tmp"/ws-*
  : >"$tmp/pairs"
  for i in $(seq "$REPEATS"); do
    if [ $((i % 2)) -eq 1 ]; then c=$(one_run clear "$i"); t=$(one_run tls "$i")
    else t=$(one_run tls "$i"); c=$(one_run clear "$i"); fi
    echo "$c $t" >>"$tmp/pairs"
  done
  echo "MLP example (Sandblaster, servers on the other \"host\" of a veth pair$1), $STEPS steps, $REPEATS interleaved pairs:"
  awk '{ c[NR] = $1; t[NR] = $2; r[NR] = $2 / $1 }
    function med(a, n,   i, j, x) { for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j - 1] > a[j]; j--) { x = a[j]; a[j] = a[j - 1]; a[j - 1] = x }
                                     return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
    END { n = NR; lo = hi = r[1]; for (i = 2; i <= n; i++) { if (r[i] < lo) lo = r[i]; if (r[i] > hi) hi = r[i] }
          printf "  in clear %.0f samples/s, TLS %.0f samples/s, ratio TLS / clear %.2f [%.2f-%.2f] (target >= 0.9)\n",
            med(c, n), med(t, n), med(r, n), lo, hi }' "$tmp/pairs"
}
pairs ""
if [ -n "${BENCH_TLS_RATE:-}" ]; then
  ip netns exec "$ns_w" tc qdisc add dev vw root tbf rate "$BENCH_TLS_RATE" burst 1mb latency 50ms
  ip netns exec "$ns_s" tc qdisc add dev vs root tbf rate "$BENCH_TLS_RATE" burst 1mb latency 50ms
  pairs ", the link held to $BENCH_TLS_RATE each way"
fi
