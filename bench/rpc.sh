#!/usr/bin/env bash
# The parameter service against a plain TCP socket on loopback
# (bench/rpc_throughput.c): push+pull MiB/s of 1, 4 and 16 MiB slices
# through ShoalRpcClient and through a raw socket moving the same bytes,
# and their ratio.  Runs the program BENCH_RPC_RUNS times and prints the
# median of each figure over the runs, then the last run's breakdown of
# where a 16 MiB push+pull spends its time.  "shm call" is one push_pull
# of the slice on a connection with the client's shared memory attached,
# the wire ranks on one host use (the call stays Thrift; the slice's
# bytes stay in the region), against the same raw TCP pair.  A second
# table sets one push_pull call against the raw pair's one round trip,
# and the same bytes moved as a worker moves a param of that size (the
# runner's ~512 KiB slices, one call each) against the raw pair
# exchanging the same slices and against its one push+pull of it all.
#
# Usage: bench/rpc.sh [BUILD_DIR]          (default: build; needs BUILD_DIR/libshoal.a)
# Both server modes: sync (Sandblaster's; replies sent straight from the
# server's values) and async (Downpour's; replies sent in place under a
# pin that updates wait for; server/server.h, shoal_server_pull_pinned).
# Knobs: BENCH_RPC_RUNS=3  BENCH_RPC_SIZES=1,4,16  BENCH_RPC_SECONDS=0.6 (per kind and size)
#        BENCH_RPC_MODES="sync async"
set -u -o pipefail
cd "$(dirname "$0")/.." || exit 1

BUILD=${1:-build}
RUNS=${BENCH_RPC_RUNS:-3}
SIZES=${BENCH_RPC_SIZES:-1,4,16}
SECONDS_PER=${BENCH_RPC_SECONDS:-0.6}
MODES=${BENCH_RPC_MODES:-sync async}
OUT=$BUILD/bench
LOGS=$OUT/logs
PKGS="glib-2.0 gthread-2.0 gobject-2.0 thrift_c_glib lmdb openblas zlib openssl"

die () { echo "bench/rpc: $*" >&2; exit 1; }

[ -f "$BUILD/libshoal.a" ] || die "$BUILD/libshoal.a missing: run make first"
mkdir -p "$OUT" "$LOGS" || die "cannot create $OUT"
BIN=$OUT/rpc_throughput
# shellcheck disable=SC2046  # pkg-config prints several flags
"${CC:-cc}" -std=c11 -O2 -Wall -Wextra -D_GNU_SOURCE -Iinclude -Isrc -I"$BUILD/gen" \
  $(pkg-config --cflags $PKGS) bench/rpc_throughput.c -o "$BIN" \
  "$BUILD/libshoal.a" $(pkg-config --libs $PKGS) -lm -lpthread ||
  die "cannot build $BIN"

# median and [min-max] of a space-separated list, for both tables
AWK_STATS='
  function med(list,   n, v, i, j, t) {
    n = split(list, v, " ")
    for (i = 2; i <= n; i++) for (j = i; j > 1 && v[j - 1] + 0 > v[j] + 0; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
    return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
  }
  function range(list,   n, v, i, lo, hi) {
    n = split(list, v, " "); lo = hi = v[1]
    for (i = 2; i <= n; i++) { if (v[i] + 0 < lo + 0) lo = v[i]; if (v[i] + 0 > hi + 0) hi = v[i] }
    return sprintf("[%.2f-%.2f]", lo, hi)
  }
'
LOG=$LOGS/rpc_throughput.log
: >"$LOG"
for r in $(seq 1 "$RUNS"); do
  for mode in $MODES; do
    G_MESSAGES_DEBUG= "$BIN" --sizes "$SIZES" --seconds "$SECONDS_PER" --mode "$mode" >>"$LOG" 2>&1 ||
      die "run $r ($mode) failed, see $LOG"
  done
done

echo "Parameter service vs raw TCP on loopback (bench/rpc_throughput.c; median of $RUNS runs," \
     "each a median over operations; MiB/s of slice bytes both ways):"
echo "ratios: rpc / raw of each run (operations interleaved within it), median [min-max] over the runs;" \
     "target >= 0.9 for push+pull at every size (on one host, the shm call is the service's wire)"
printf '%6s %8s %14s %14s %14s %14s %14s %-17s %5s %-17s %-17s\n' "mode" "slice" "rpc push+pull" "rpc put+pull" \
  "rpc push_pull" "shm push_pull" "raw push+pull" "ratio" "put" "1 call" "shm call"
awk "$AWK_STATS"'
  /^rpc_throughput / {
    size = ""; mode = ""
    for (i = 2; i <= NF; i++) {
      split($i, kv, "=")
      if (kv[1] == "mode") mode = kv[2]
      else if (kv[1] == "size_mib") {
        size = mode " " kv[2]
        if (!(size in seen)) { seen[size] = 1; order[++ns] = size }
      }
      else vals[size, kv[1]] = vals[size, kv[1]] " " kv[2]
    }
  }
  END {
    for (s = 1; s <= ns; s++) {
      z = order[s]
      split(z, mz, " ")
      printf "%6s %4s MiB %14.0f %14.0f %14.0f %14.0f %14.0f %5.2f %-11s %5.2f %5.2f %-11s %5.2f %-11s\n", mz[1], mz[2],
        med(vals[z, "rpc_push_pull"]), med(vals[z, "rpc_put_pull"]), med(vals[z, "rpc_pushpull_call"]),
        med(vals[z, "rpc_shm_call"]), med(vals[z, "raw_push_pull"]),
        med(vals[z, "ratio_push_pull"]), range(vals[z, "ratio_push_pull"]),
        med(vals[z, "ratio_put_pull"]), med(vals[z, "ratio_pushpull_call"]),
        range(vals[z, "ratio_pushpull_call"]), med(vals[z, "ratio_shm_call"]), range(vals[z, "ratio_shm_call"])
    }
  }' "$LOG"
echo "One round trip per slice against the raw pair's one round trip (raw exchange), and the same bytes as" \
     "a worker moves a param of that size: cut into the runner's ~512 KiB slices, one push_pull each" \
     "(rpc sliced), against the raw pair exchanging the same slices (raw sliced); median [min-max]:"
printf '%6s %8s %14s %14s %-17s %14s %14s %-17s %s\n' "mode" "size" "rpc push_pull" "raw exchange" "ratio" \
  "rpc sliced" "raw sliced" "ratio" "sliced / raw push+pull"
awk "$AWK_STATS"'
  /^rpc_throughput / {
    for (i = 2; i <= NF; i++) {
      split($i, kv, "=")
      if (kv[1] == "mode") mode = kv[2]
      else if (kv[1] == "size_mib") { z = mode " " kv[2]; if (!(z in seen)) { seen[z] = 1; order[++ns] = z } }
      else vals[z, kv[1]] = vals[z, kv[1]] " " kv[2]
    }
  }
  END {
    for (s = 1; s <= ns; s++) {
      z = order[s]; split(z, mz, " ")
      printf "%6s %4s MiB %14.0f %14.0f %5.2f %-11s %14.0f %14.0f %5.2f %-11s %5.2f %s\n", mz[1], mz[2],
        med(vals[z, "rpc_pushpull_call"]), med(vals[z, "raw_exchange"]),
        med(vals[z, "ratio_pushpull_call_raw_exchange"]), range(vals[z, "ratio_pushpull_call_raw_exchange"]),
        med(vals[z, "rpc_sliced"]), med(vals[z, "raw_sliced"]),
        med(vals[z, "ratio_sliced_raw_sliced"]), range(vals[z, "ratio_sliced_raw_sliced"]),
        med(vals[z, "ratio_sliced"]), range(vals[z, "ratio_sliced"])
    }
  }' "$LOG"
echo "stock c_glib client (ThriftSocket + ThriftBufferedTransport) pulling the same slices, MiB/s:" \
     "$(awk '/^rpc_throughput / { for (i = 2; i <= NF; i++) { split($i, kv, "=");
               if (kv[1] == "size_mib") { z = kv[2]; if (!(z in s)) o[++n] = z }
               if (kv[1] == "stock_pull") s[z] = s[z] " " kv[2] } }
             END { for (i = 1; i <= n; i++) printf "%s MiB:%s; ", o[i], s[o[i]] }' "$LOG")"
for mode in $MODES; do
  echo "Where one push+pull of the largest slice goes, $mode server (ms, medians; last run):"
  grep "^rpc_breakdown mode=$mode " "$LOG" | tail -n 1 | tr ' ' '\n' | sed -n 's/_ms=/ /p' | \
    awk '{ printf "  %-16s %8s\n", $1, $2 }'
done
