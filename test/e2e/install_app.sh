#!/usr/bin/env bash
# shoal as an installed library: `make install` into a temporary DESTDIR,
# then examples/custom-layer/app.c (it includes <shoal/shoal.h> only) is
# built with nothing but `pkg-config shoal` of that tree, once against
# libshoal.so and once against libshoal.a with only GLib, OpenBLAS and libm
# beside it (no Thrift, no LMDB); both train, save, reload and predict the
# same.  Checks the installed tree (headers, soname, shoal.pc, man page,
# the shoal binary), the app with the swish plugin (gradient check, the
# plugin's type in the conf, a located error), that a static program
# refuses plugins, and that `make uninstall` leaves no file.
# Usage: install_app.sh BUILD
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-build}" && pwd)
cd "$root"
# the Makefile names the build as it was made (a relative BUILD), else its
# flags stamp would differ and everything would be rebuilt
build_rel=$(realpath --relative-to="$root" "$build")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

version=$(sed -n 's/^#define SHOAL_VERSION_STRING "\(.*\)"/\1/p' include/shoal/version.h)
major=${version%%.*}
[ -n "$version" ] || fail "no SHOAL_VERSION_STRING in include/shoal/version.h"
# a sanitizer build's programs need its runtime (run-tests.sh sets SHOAL_SANITIZE)
san=${SHOAL_SANITIZE:+-fsanitize=$SHOAL_SANITIZE}

# make with the build's own variables, not those of an outer make
mk() {
  env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make --no-print-directory BUILD="$build_rel" \
    ${SHOAL_SANITIZE:+SANITIZE=$SHOAL_SANITIZE} "$@"
}

# ---- install, twice (idempotent) -------------------------------------------
stage=$tmp/stage
prefix=$stage/usr/local
for i in 1 2; do
  mk install DESTDIR="$stage" >"$tmp/install$i.log" 2>&1 || { tail -20 "$tmp/install$i.log"; fail "make install ($i)"; }
  (cd "$stage" && find . \( -type f -o -type l \) | sort) >"$tmp/files$i"
done
cmp -s "$tmp/files1" "$tmp/files2" || { diff "$tmp/files1" "$tmp/files2"; fail "a second install differs"; }

# exactly these files
{
  echo "./usr/local/bin/shoal"
  for f in include/shoal/*.h; do echo "./usr/local/include/shoal/$(basename "$f")"; done
  echo "./usr/local/lib/libshoal.a"
  echo "./usr/local/lib/libshoal.so"
  echo "./usr/local/lib/libshoal.so.$major"
  echo "./usr/local/lib/libshoal.so.$version"
  echo "./usr/local/lib/pkgconfig/shoal.pc"
  echo "./usr/local/share/doc/shoal/README.md"
  for f in docs/*.md; do echo "./usr/local/share/doc/shoal/docs/$(basename "$f")"; done
  for f in app.c swish.c swish.conf Makefile README.md; do
    echo "./usr/local/share/doc/shoal/examples/custom-layer/$f"
  done
  echo "./usr/local/share/man/man1/shoal.1"
  for f in src/dashboard/web/*; do echo "./usr/local/share/shoal/dashboard/$(basename "$f")"; done
} | sort >"$tmp/expected"
diff "$tmp/expected" "$tmp/files1" || fail "installed files differ from the expected list"
[ -d "$prefix/lib/shoal/plugins" ] || fail "no plugin directory lib/shoal/plugins"

# public headers only, as they are in include/shoal, naming no internal header
for f in include/shoal/*.h; do
  cmp -s "$f" "$prefix/include/shoal/$(basename "$f")" || fail "installed $(basename "$f") differs from $f"
done
if grep -l '^#include "' "$prefix"/include/shoal/*.h; then fail "an installed header includes a private one"; fi
echo "headers: $(ls "$prefix/include/shoal" | wc -l) public ones, nothing from src/"

# the library: soname, links, dependencies it names itself
readelf -d "$prefix/lib/libshoal.so.$version" >"$tmp/dyn"
grep -q "Library soname: \[libshoal.so.$major\]" "$tmp/dyn" || { cat "$tmp/dyn"; fail "soname is not libshoal.so.$major"; }
[ "$(readlink "$prefix/lib/libshoal.so.$major")" = "libshoal.so.$version" ] || fail "libshoal.so.$major link"
[ "$(readlink "$prefix/lib/libshoal.so")" = "libshoal.so.$major" ] || fail "libshoal.so link"
for lib in libglib-2.0 libthrift_c_glib liblmdb libopenblas; do
  grep -q "NEEDED.*\[$lib\.so" "$tmp/dyn" || fail "libshoal.so does not name $lib"
done
echo "libshoal.so.$version: soname libshoal.so.$major"

# the binary finds the installed library relative to itself
dynamic=$(readelf -d "$prefix/bin/shoal")
grep -q 'RUNPATH.*\[\$ORIGIN:\$ORIGIN/\.\./lib\]' <<<"$dynamic" || fail "shoal's RUNPATH"
used=$(env -u LD_LIBRARY_PATH ldd "$prefix/bin/shoal" | sed -n "s/^.*libshoal.so.$major => \([^ ]*\) .*/\1/p")
[ -n "$used" ] && [ "$(realpath "$used")" = "$prefix/lib/libshoal.so.$version" ] \
  || { ldd "$prefix/bin/shoal"; fail "the installed shoal does not use the installed library"; }
[ "$(env -u LD_LIBRARY_PATH "$prefix/bin/shoal" --version)" = "shoal $version" ] || fail "shoal --version"

# shoal.pc
pc=$prefix/lib/pkgconfig/shoal.pc
for line in "Version: $version" 'Requires: glib-2.0 gobject-2.0 gmodule-2.0' \
    'Requires.private: thrift_c_glib lmdb openblas zlib openssl json-glib-1.0' 'Libs: -L${libdir} -lshoal' \
    'Libs.private: -lm -lpthread' 'Cflags: -I${includedir}'; do
  grep -qxF "$line" "$pc" || { cat "$pc"; fail "shoal.pc lacks '$line'"; }
done
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
[ "$(pkg-config --modversion shoal)" = "$version" ] || fail "pkg-config --modversion shoal"
cflags=$(pkg-config --cflags shoal)
libs=$(pkg-config --libs shoal)
echo "pkg-config --cflags --libs shoal: $cflags $libs"
case " $libs " in *thrift*|*lmdb*) fail "pkg-config --libs names private libraries: $libs" ;; esac

# the headers as other programs' compilers take them: C99 and C11 with every
# warning an error (a typedef written twice is C11 only), and a plugin in
# C++, whose SHOAL_PLUGIN_DEFINE must still export shoal_plugin_info (a
# const of C++ has internal linkage unless declared extern)
cat >"$tmp/strict.c" <<'C'
#include <shoal/shoal.h>
static gboolean strict_init (GError **error) { (void) error; return TRUE; }
SHOAL_PLUGIN_DEFINE ("strict", "the headers under strict flags", strict_init);
C
for std in c99 c11; do
  # shellcheck disable=SC2086
  cc -std=$std -pedantic -Wall -Wextra -Werror -Wstrict-prototypes -Wmissing-prototypes -Wshadow \
    -Wredundant-decls -fsyntax-only "$tmp/strict.c" $cflags || fail "the public headers under -std=$std -pedantic -Werror"
done
if command -v c++ >/dev/null; then
  cp "$tmp/strict.c" "$tmp/strict.cpp"
  # shellcheck disable=SC2086
  c++ -std=c++17 -pedantic -Wall -Wextra -Werror -fPIC -shared "$tmp/strict.cpp" -o "$tmp/libstrict.so" $cflags $libs \
    || fail "a plugin in C++ against the public headers"
  nm -D --defined-only "$tmp/libstrict.so" | grep -q ' shoal_plugin_info$' \
    || fail "a C++ plugin's SHOAL_PLUGIN_DEFINE exports no shoal_plugin_info"
fi
echo "headers: C99, C11 (-pedantic -Werror) and a C++ plugin: ok"
# every library libshoal.so names is one shoal.pc gives (a static link needs them all)
static_libs=" $(pkg-config --static --libs shoal) -lc -lm "
for needed in $(sed -n 's/.*NEEDED.*\[lib\([^]]*\)\.so[.0-9]*\]$/\1/p' "$tmp/dyn"); do
  case "$needed" in ld-linux*) continue ;; esac
  case "$static_libs" in *" -l$needed "*) ;; *) fail "libshoal.so needs lib$needed, which shoal.pc does not give: $static_libs" ;; esac
done

# the man page (help2man from --help and --version)
man1=$prefix/share/man/man1/shoal.1
grep -q '^\.TH SHOAL "1"' "$man1" || fail "shoal.1 has no .TH line"
grep -q '^\.SH SYNOPSIS' "$man1" || fail "shoal.1 has no SYNOPSIS (help2man found no Usage: line)"
if command -v man >/dev/null; then
  MANWIDTH=80 man -P cat -l "$man1" >"$tmp/man.txt" 2>"$tmp/man.err" || { cat "$tmp/man.err"; fail "man -l shoal.1"; }
else
  groff -man -Tascii "$man1" >"$tmp/man.txt" 2>"$tmp/man.err" || fail "groff -man shoal.1"
fi
grep -q 'shoal COMMAND \[ARGS\]' "$tmp/man.txt" || fail "the rendered man page has no synopsis"
grep -q 'SHOAL_PLUGIN_PATH' "$tmp/man.txt" || fail "the rendered man page has no ENVIRONMENT"
grep -q 'run' "$tmp/man.txt" || fail "the rendered man page lists no commands"
echo "man page: $(wc -l <"$tmp/man.txt") lines rendered"

# ---- the app, against libshoal.so and against libshoal.a ----------------------
# A copy away from the source tree: only pkg-config says where shoal is.
# -lm is the app's own (sinf, cosf).
app=$tmp/app
mkdir -p "$app"
cp examples/custom-layer/app.c "$app/"
cd "$app"
# shellcheck disable=SC2086
cc -std=c11 -O2 -Wall -Wextra -Werror $san app.c -o app-shared $cflags $libs -lm \
  || fail "building app.c against libshoal.so"
# the static links as docs/LIBRARY.md writes them (its /usr/local is this tree):
# the layers-only one (GLib and OpenBLAS), then the one for jobs and models
mapfile -t doc_static < <(sed -n '/^cc -std=c11 app.c -o app $(pkg-config --cflags shoal) \/usr\/local\/lib\/libshoal.a \\$/{N;s/\\\n */ /;p}' \
  "$root/docs/LIBRARY.md")
[ "${#doc_static[@]}" -eq 2 ] || fail "docs/LIBRARY.md: expected two static link commands, found ${#doc_static[@]}"
doc_link() {  # N SOURCE OUTPUT: docs/LIBRARY.md's static command N for SOURCE
  local cmd=${doc_static[$1]/app.c -o app /$2 -o $3 }
  cmd=${cmd//\/usr\/local/$prefix}
  eval "${cmd/cc -std=c11 /cc -std=c11 -O2 -Wall -Wextra -Werror $san }"
}
doc_link 0 app.c app-static || fail "building app.c against libshoal.a with docs/LIBRARY.md's command (GLib and OpenBLAS only)"
readelf -d app-shared >dyn-shared
readelf -d app-static >dyn-static
grep -q "NEEDED.*\[libshoal.so.$major\]" dyn-shared || fail "app-shared does not link libshoal.so.$major"
if grep -E 'NEEDED.*\[(libshoal|libthrift|liblmdb)' dyn-static; then
  fail "app-static needs a shared libshoal, Thrift or LMDB"
fi
cd "$root"

# ---- jobs and models: docs/LIBRARY.md's second static command, and the shared library
cp "$root/test/e2e/lib/job_app.c" "$app/"
(cd "$app" && doc_link 1 job_app.c job-static) \
  || fail "building a program of jobs and models against libshoal.a with docs/LIBRARY.md's command"
# shellcheck disable=SC2086
cc -std=c11 -O2 -Wall -Wextra -Werror $san "$app/job_app.c" -o "$app/job-shared" $cflags $libs \
  || fail "building job_app.c against libshoal.so"
if readelf -d "$app/job-static" | grep -E 'NEEDED.*\[libshoal'; then fail "job-static needs a shared libshoal"; fi
jobdir=$tmp/job
mkdir -p "$jobdir"
cp "$root/test/e2e/lib/job_app.conf" "$jobdir/job.conf"
# three classes around three centres, 300 training and 90 test rows
for set in train:300 test:90; do
  awk -v n="${set#*:}" -v seed="${#set}" 'BEGIN { srand (seed); for (i = 0; i < n; i++) { c = i % 3;
    printf "%d,%.4f,%.4f,%.4f\n", c, (c == 0) * 1.5 + rand () - 0.5, (c == 1) * 1.5 + rand () - 0.5, rand () - 0.5 } }' \
    >"$jobdir/${set%%:*}.csv"
  env -u LD_LIBRARY_PATH "$prefix/bin/shoal" import csv --in "$jobdir/${set%%:*}.csv" --out "$jobdir/${set%%:*}" \
    >/dev/null || fail "shoal import csv ${set%%:*}"
done
for kind in shared static; do
  rc=0
  (cd "$jobdir" && LD_LIBRARY_PATH=$prefix/lib "$app/job-$kind" job.conf "ws-$kind") >"$tmp/job-$kind.log" \
    2>"$tmp/job-$kind.err" || rc=$?
  [ "$rc" -eq 0 ] || { cat "$tmp/job-$kind.err"; fail "job-$kind exited with $rc"; }
  grep -qE '^trained 40 steps: test loss [0-9.]+ accuracy (0\.9|1\.0)' "$tmp/job-$kind.log" \
    || { cat "$tmp/job-$kind.log"; fail "job-$kind did not train to 0.9"; }
  [ "$(grep -c '^row ' "$tmp/job-$kind.log")" -eq 3 ] || fail "job-$kind predicted no 3 rows"
done
cat "$tmp/job-shared.log"
diff "$tmp/job-shared.log" "$tmp/job-static.log" || fail "the shared and the static job program computed differently"

# the old custom_layer.sh bars: the loss at most half, most points right
check_run() {  # NAME LOG
  local line first final acc
  line=$(grep '^first_loss=' "$2" | tail -1)
  [ -n "$line" ] || fail "$1: no first_loss= line"
  first=$(sed 's/.*first_loss=\([^ ]*\).*/\1/' <<<"$line")
  final=$(sed 's/.*final_loss=\([^ ]*\).*/\1/' <<<"$line")
  acc=$(sed 's/.*final_accuracy=\([^ ]*\).*/\1/' <<<"$line")
  # three balanced classes: the loss starts near ln 3
  awk -v a="$first" -v b="$final" -v acc="$acc" -v n="$1" 'BEGIN {
    if (!(b < 0.5 * a)) { printf "%s: loss did not decrease enough: %s -> %s\n", n, a, b; exit 1 }
    if (!(acc > 0.8)) { printf "%s: accuracy %s is too low\n", n, acc; exit 1 }
    printf "%s: loss %s -> %s, accuracy %s\n", n, a, b, acc
  }' || fail "$1 did not train"
  grep -qx "libshoal $version (headers $version)" "$2" || fail "$1: no version line"
  grep -qx "predictions after reload: 390 rows x 3 scores, bit-identical" "$2" || fail "$1: reload"
  grep -q "^reloaded from $tmp/$1.params: loss " "$2" || fail "$1: no reloaded line"
}
for kind in shared static; do
  rc=0
  LD_LIBRARY_PATH=$prefix/lib "$app/app-$kind" --params "$tmp/$kind.params" >"$tmp/$kind.log" 2>"$tmp/$kind.err" || rc=$?
  cat "$tmp/$kind.log"
  [ "$rc" -eq 0 ] || { cat "$tmp/$kind.err"; fail "app-$kind exited with $rc"; }
  [ -s "$tmp/$kind.params" ] || fail "app-$kind saved no params"
  check_run "$kind" "$tmp/$kind.log"
done
# the same objects, the same seeds: the same numbers
diff <(grep -v '^reloaded from' "$tmp/shared.log") <(grep -v '^reloaded from' "$tmp/static.log") \
  || fail "the shared and the static app computed differently"
cmp -s "$tmp/shared.params" "$tmp/static.params" || fail "the shared and the static app saved different params"

# ---- the plugin, built from the installed example with its Makefile ----------
ex=$prefix/share/doc/shoal/examples/custom-layer
make --no-print-directory -C "$ex" OUT="$tmp/ex" CFLAGS="-O2 -g -Wall -Wextra -Werror $san" \
  LDFLAGS="$san" >"$tmp/ex.log" 2>&1 || { cat "$tmp/ex.log"; fail "make in the installed examples/custom-layer"; }
plugin=$tmp/ex/libswish.so
rc=0
LD_LIBRARY_PATH=$prefix/lib "$tmp/ex/app" --plugin "$plugin" -o "layer act.type=swish" \
  >"$tmp/swish.log" 2>"$tmp/swish.err" || rc=$?
cat "$tmp/swish.log"
[ "$rc" -eq 0 ] || { cat "$tmp/swish.err"; fail "app --plugin with swish activations exited with $rc"; }
grep -qE '^swish gradient check: ok, [0-9]+ elements compared$' "$tmp/swish.log" || fail "no gradient check line"
grep -qE 'act +swish +out 64x64' "$tmp/swish.err" \
  || fail "the net's act layer is not of the plugin's type"

# a bad value of the plugin's option is a located error
rc=0
LD_LIBRARY_PATH=$prefix/lib "$tmp/ex/app" --plugin "$plugin" -o "layer act.type=swish" -o "layer act.beta=0" \
  >"$tmp/beta.log" 2>&1 || rc=$?
[ "$rc" -eq 1 ] || { cat "$tmp/beta.log"; fail "beta=0: exit $rc, expected 1"; }
grep -qxF "app: -o layer act.beta: [layer act] beta: 0 is out of range [0.01, 100]" "$tmp/beta.log" \
  || { cat "$tmp/beta.log"; fail "beta=0: unexpected message"; }

# without the plugin its type is unknown
rc=0
LD_LIBRARY_PATH=$prefix/lib "$tmp/ex/app" -o "layer act.type=swish" >"$tmp/noplugin.log" 2>&1 || rc=$?
[ "$rc" -eq 1 ] || fail "swish without the plugin: exit $rc"
grep -qxF "app: -o layer act.type: [layer act] type: unknown layer type 'swish'" "$tmp/noplugin.log" \
  || { cat "$tmp/noplugin.log"; fail "swish without the plugin: unexpected message"; }

# a statically linked program has its own copy of the library: it refuses
# a plugin (which would register into libshoal.so's registry) and says why
# (ASan reports the second copy's globals itself when it loads: off here,
# the program's own refusal is what is tested)
rc=0
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_odr_violation=0" LD_LIBRARY_PATH=$prefix/lib \
  "$app/app-static" --plugin "$plugin" >"$tmp/static-plugin.log" 2>&1 || rc=$?
[ "$rc" -eq 1 ] || { cat "$tmp/static-plugin.log"; fail "app-static --plugin: exit $rc, expected 1"; }
grep -qxF "app: plugin $plugin: it calls another copy of libshoal ($prefix/lib/libshoal.so.$major) than this program's: a program linked with libshoal.a cannot load plugins, link it with libshoal.so" \
  "$tmp/static-plugin.log" || { cat "$tmp/static-plugin.log"; fail "app-static --plugin: unexpected message"; }
echo "app-static refuses the plugin: ok"

# the example's `make install` puts the plugin into the (staged) plugin
# directory, where the installed shoal loads it into its one libshoal
make --no-print-directory -C "$ex" OUT="$tmp/ex" install >>"$tmp/ex.log" 2>&1 || { cat "$tmp/ex.log"; fail "make install of the plugin"; }
[ -f "$prefix/lib/shoal/plugins/libswish.so" ] || fail "the example's make install put no libswish.so into lib/shoal/plugins"
env -u LD_LIBRARY_PATH "$prefix/bin/shoal" layers --plugin "$prefix/lib/shoal/plugins/libswish.so" >"$tmp/layers.txt" \
  || fail "the installed shoal cannot load the installed plugin"
grep -q '^swish: ' "$tmp/layers.txt" || fail "the installed shoal lists no swish"

# by name alone, from the plugin directory beside the library: in the
# staged tree (installed for /usr/local, used from elsewhere), then with
# the whole tree moved (nothing compiled in points at the old place)
for where in staged moved; do
  if [ "$where" = moved ]; then
    mv "$stage" "$tmp/moved-stage"
    prefix_now=$tmp/moved-stage/usr/local
  else
    prefix_now=$prefix
  fi
  env -u LD_LIBRARY_PATH -u SHOAL_PLUGIN_PATH "$prefix_now/bin/shoal" layers --plugin libswish.so \
    >"$tmp/layers-$where.txt" 2>"$tmp/layers-$where.err" \
    || { cat "$tmp/layers-$where.err"; fail "the $where tree's shoal cannot load libswish.so by name"; }
  grep -q '^swish: ' "$tmp/layers-$where.txt" || fail "the $where tree's shoal lists no swish"
  [ "$(realpath -m "$(PKG_CONFIG_PATH=$prefix_now/lib/pkgconfig pkg-config --variable=plugindir shoal)")" \
    = "$prefix_now/lib/shoal/plugins" ] || fail "the $where tree's shoal.pc names another plugindir"
  # a name that is not there: the message names the directory it looked in
  rc=0
  env -u LD_LIBRARY_PATH -u SHOAL_PLUGIN_PATH "$prefix_now/bin/shoal" layers --plugin libnone.so \
    >/dev/null 2>"$tmp/none-$where.err" || rc=$?
  grep -qF "looked in SHOAL_PLUGIN_PATH and $prefix_now/lib/shoal/plugins)" "$tmp/none-$where.err" \
    || { cat "$tmp/none-$where.err"; fail "the $where tree looked elsewhere for plugins"; }
  echo "plugins by name in the $where tree: ok"
done
mv "$tmp/moved-stage" "$stage"

# ---- uninstall: nothing left ---------------------------------------------------
# a plugin someone installed stays, and so does its directory
mk uninstall DESTDIR="$stage" >"$tmp/uninstall.log" 2>&1 || { cat "$tmp/uninstall.log"; fail "make uninstall"; }
left=$(find "$stage" \( -type f -o -type l \) | sed "s|^$stage||")
[ "$left" = "/usr/local/lib/shoal/plugins/libswish.so" ] || { echo "$left"; fail "make uninstall: expected the plugin alone left"; }
rm "$prefix/lib/shoal/plugins/libswish.so"
mk uninstall DESTDIR="$stage" >"$tmp/uninstall.log" 2>&1 || { cat "$tmp/uninstall.log"; fail "make uninstall (2)"; }
left=$(find "$stage" \( -type f -o -type l \) | sed "s|^$stage||")
[ -z "$left" ] || { echo "$left"; fail "make uninstall left files"; }
for d in include/shoal lib/shoal share/doc/shoal share/shoal; do
  [ ! -e "$prefix/$d" ] || fail "make uninstall left $d"
done
echo "install, build against it, uninstall: ok"
