# The tests' time scale (sourced by test/run-tests.sh and by every e2e
# script that bounds a wait): every time bound a test carries (run-tests'
# per-test limit, timeout(1) around a run, a wait loop's count, a "took
# at most N s" check) is written for a plain build and multiplied by
# SHOAL_TEST_TIME_SCALE (a number >= 1, e.g. 2.5).  Sanitized code runs
# several times slower, the product's own waits included, so a sanitizer
# build gets a larger factor by default from BUILD/sanitize (written by
# the Makefile's `make SANITIZE=... test`), from whole runs measured
# against the plain build on this 2-core machine at load 7:
#   plain 1;
#   address (with or without undefined) 3: e2e/topology_downpour 3.0-3.2x,
#     train_mlp 2.1-2.9x (launch_faults 1.35x, test_rpc 1.1-1.25x: waits);
#   undefined alone 2 (less than ASan's shadow memory and checks);
#   thread 10: e2e/train_mlp 10.3x, topology_downpour 14x (with reports
#     being written).
# The user's SHOAL_TEST_TIME_SCALE wins.  A scaled bound is still finite:
# a hang still fails, only later.
# Usage: source test/e2e/lib/time_scale.sh BUILD; then `scaled SECONDS`.
if [ -z "${SHOAL_TEST_TIME_SCALE:-}" ]; then
  case ",$(cat "${1:-build}/sanitize" 2>/dev/null || true)," in
    *,thread,*) SHOAL_TEST_TIME_SCALE=10 ;;
    *,address,*) SHOAL_TEST_TIME_SCALE=3 ;;
    *,undefined,*) SHOAL_TEST_TIME_SCALE=2 ;;
    *) SHOAL_TEST_TIME_SCALE=1 ;;
  esac
fi
if ! awk -v s="$SHOAL_TEST_TIME_SCALE" 'BEGIN { exit !(s ~ /^[0-9]+(\.[0-9]+)?$/ && s >= 1) }'; then
  echo "SHOAL_TEST_TIME_SCALE=$SHOAL_TEST_TIME_SCALE: not a number >= 1" >&2
  exit 2
fi
export SHOAL_TEST_TIME_SCALE

# scaled N: N (seconds, or a count of fixed sleeps) times the scale,
# rounded up to a whole number; exactly N at scale 1
scaled() {
  awk -v n="$1" -v s="$SHOAL_TEST_TIME_SCALE" 'BEGIN { v = n * s; i = int(v); if (i < v) i++; print i }'
}
