# Sourced by the batchnorm scripts: build_bn_stats OUT builds
# test/e2e/lib/bn_stats.c (the statistics checker) against the build's
# installed-layout library ($BUILD/pkgconfig), as an application would.
# Needs BUILD and fail (test/e2e/lib/topology.sh).
build_bn_stats () {
  local out=$1 san=${SHOAL_SANITIZE:+-fsanitize=$SHOAL_SANITIZE} glib_locks=
  export PKG_CONFIG_PATH=$BUILD/pkgconfig
  [ -f "$PKG_CONFIG_PATH/shoal.pc" ] || fail "no $PKG_CONFIG_PATH/shoal.pc: run make first"
  # under TSan a program links what tells TSan of GLib's locks, as the
  # Makefile links it into shoal and the tests (else every GMutex-guarded
  # hand-over, such as lmdb_input's prefetch thread, reads as a race)
  case "${SHOAL_SANITIZE:-}" in
    *thread*) glib_locks=$BUILD/obj/test/sanitizers/tsan_glib.o
              [ -f "$glib_locks" ] || fail "no $glib_locks: make SANITIZE=thread first" ;;
  esac
  # shellcheck disable=SC2046,SC2086
  cc -std=c11 -O2 -Wall -Wextra -Werror $san -o "$out" test/e2e/lib/bn_stats.c $glib_locks \
    $(pkg-config --cflags --libs shoal) -Wl,-rpath,"$BUILD" -lm -ldl || fail "building bn_stats"
}
