# Sourced by the batchnorm scripts: build_bn_stats OUT builds
# test/e2e/lib/bn_stats.c (the statistics checker) against the build's
# installed-layout library ($BUILD/pkgconfig), as an application would.
# Needs BUILD and fail (test/e2e/lib/topology.sh).
build_bn_stats () {
  local out=$1 san=${SHOAL_SANITIZE:+-fsanitize=$SHOAL_SANITIZE}
  export PKG_CONFIG_PATH=$BUILD/pkgconfig
  [ -f "$PKG_CONFIG_PATH/shoal.pc" ] || fail "no $PKG_CONFIG_PATH/shoal.pc: run make first"
  # shellcheck disable=SC2046,SC2086
  cc -std=c11 -O2 -Wall -Wextra -Werror $san -o "$out" test/e2e/lib/bn_stats.c \
    $(pkg-config --cflags --libs shoal) -Wl,-rpath,"$BUILD" -lm || fail "building bn_stats"
}
