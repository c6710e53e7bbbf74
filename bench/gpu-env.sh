#!/usr/bin/env bash
# shoal's libraries for a bare GPU machine (no GLib, Thrift, LMDB, OpenBLAS
# and no package registry there).
#
#   bench/gpu-env.sh fetch [--dev]      here, on a machine with apt: downloads
#                                       the Debian packages into .debs/
#                                       (git-ignored); --dev adds what building
#                                       shoal there needs (headers, thrift,
#                                       pkg-config)
#   . bench/gpu-env.sh setup            there, sourced: unpacks .debs/*.deb with
#                                       dpkg -x into $SHOAL_PREFIX (default
#                                       /tmp/shoal-prefix) and exports
#                                       LD_LIBRARY_PATH, PKG_CONFIG_LIBDIR,
#                                       PKG_CONFIG_SYSROOT_DIR, PATH, and the
#                                       cuDNN / cuBLAS library folders when
#                                       /usr/local/cuda lacks them (they come
#                                       from the machine's Python nvidia-* wheels)
#
# The packages are Debian 12's (this machine's); their libraries need
# nothing newer than the glibc they were built for, so they load on a newer
# distribution (they did on the H200 machine of 2026-11-26).

debs_dir=${SHOAL_DEBS:-.debs}

# Libraries shoal's binaries load (readelf -d build-cuda/test/test_gpu) and
# what those need beyond a base system; the Fashion-MNIST IDX files.
RUNTIME_PACKAGES="libglib2.0-0 libjson-glib-1.0-0 libthrift-c-glib0 liblmdb0 libopenblas0-pthread libgfortran5 libquadmath0
  libssl3 libsoup-3.0-0 libnghttp2-14 libpsl5 libbrotli1 libsqlite3-0 libgssapi-krb5-2 libkrb5-3 libk5crypto3
  libkrb5support0 libkeyutils1 libcom-err2 libidn2-0 libunistring2
  dataset-fashion-mnist"
# (libssl3: TLS between hosts; libsoup-3.0-0 and what it loads: the shoal
# command's dashboard)
# Building there (make CUDA=1): headers, .pc files, the Thrift compiler, pkg-config.
DEV_PACKAGES="libglib2.0-dev libjson-glib-dev libthrift-c-glib-dev thrift-compiler liblmdb-dev libopenblas-dev
  libopenblas-pthread-dev libopenblas0 libpcre2-dev libffi-dev zlib1g-dev pkgconf pkgconf-bin libpkgconf3"

fetch () {
  local dev=${1:-}
  local pkgs=$RUNTIME_PACKAGES
  [ "$dev" = --dev ] && pkgs="$pkgs $DEV_PACKAGES"
  command -v apt-get >/dev/null || { echo "gpu-env: apt-get not found (fetch runs on a Debian machine)" >&2; return 1; }
  mkdir -p "$debs_dir" || return 1
  # shellcheck disable=SC2086
  (cd "$debs_dir" && apt-get download $pkgs) || {
    echo "gpu-env: apt-get download failed (apt-get update first?)" >&2
    return 1
  }
  echo "gpu-env: $(ls "$debs_dir"/*.deb | wc -l) packages, $(du -sh "$debs_dir" | cut -f1) in $debs_dir"
}

# The folder of a Python nvidia-* wheel's libraries (or includes), if any.
wheel_dir () {
  python3 - "$1" "$2" <<'EOF' 2>/dev/null
import importlib, os, sys
try:
    m = importlib.import_module(sys.argv[1])
    for p in m.__path__:
        d = os.path.join(p, sys.argv[2])
        if os.path.isdir(d):
            print(d)
            break
except Exception:
    pass
EOF
}

setup () {
  local prefix=${SHOAL_PREFIX:-/tmp/shoal-prefix}
  ls "$debs_dir"/*.deb >/dev/null 2>&1 || { echo "gpu-env: no packages in $debs_dir (run fetch where apt works)" >&2; return 1; }
  command -v dpkg >/dev/null || { echo "gpu-env: dpkg not found" >&2; return 1; }
  mkdir -p "$prefix" || return 1
  local f
  for f in "$debs_dir"/*.deb; do
    dpkg -x "$f" "$prefix" || { echo "gpu-env: cannot unpack $f" >&2; return 1; }
  done
  local lib=$prefix/usr/lib/x86_64-linux-gnu
  # dpkg -x runs no maintainer scripts: make the links update-alternatives would
  if [ -d "$lib/openblas-pthread" ]; then
    [ -e "$lib/libopenblas.so.0" ] || ln -sf openblas-pthread/libopenblas.so.0 "$lib/libopenblas.so.0"
    [ -e "$lib/openblas-pthread/pkgconfig/openblas.pc" ] && mkdir -p "$lib/pkgconfig" &&
      ln -sf ../openblas-pthread/pkgconfig/openblas.pc "$lib/pkgconfig/openblas.pc"
  fi
  export SHOAL_PREFIX=$prefix
  # the machine's own path (its driver's libcuda may be found through it),
  # for programs that need none of Debian's libraries (bench/gpu_torch.py)
  export SHOAL_SYSTEM_LD_LIBRARY_PATH=${SHOAL_SYSTEM_LD_LIBRARY_PATH-${LD_LIBRARY_PATH:-}}
  export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export PATH=$prefix/usr/bin:$PATH
  # the .pc files say prefix=/usr: the sysroot maps their -I and -L into the
  # prefix; LIBDIR (not PATH) keeps the system's .pc files, which need no mapping, out
  export PKG_CONFIG_LIBDIR=$lib/pkgconfig:$prefix/usr/share/pkgconfig
  export PKG_CONFIG_SYSROOT_DIR=$prefix
  export FMNIST_DIR=$prefix/usr/share/datasets/fashion-mnist

  # CUDA: the toolkit's own libraries, else the PyTorch wheels' ones
  local cuda=${CUDA_HOME:-/usr/local/cuda}
  local extra_lib="" extra_inc="" d so
  if [ ! -e "$cuda/lib64/libcudnn.so.9" ]; then
    d=$(wheel_dir nvidia.cudnn lib)
    if [ -n "$d" ]; then
      extra_lib="$extra_lib:$d"
      # the unversioned names that -lcudnn looks for when building there
      for so in "$d"/libcudnn*.so.9; do
        [ -e "${so%.9}" ] || ln -sf "$(basename "$so")" "${so%.9}" 2>/dev/null
      done
    fi
    d=$(wheel_dir nvidia.cudnn include)
    [ -n "$d" ] && extra_inc="$extra_inc -I$d"
  fi
  if [ ! -e "$cuda/lib64/libcublas.so.13" ]; then
    d=$(wheel_dir nvidia.cublas lib)
    [ -n "$d" ] && extra_lib="$extra_lib:$d"
  fi
  if [ ! -e "$cuda/lib64/libcudart.so.13" ]; then
    d=$(wheel_dir nvidia.cuda_runtime lib)
    [ -n "$d" ] && extra_lib="$extra_lib:$d"
  fi
  # wheels of another layout (CUDA 13's nvidia/cu13/lib): look for the files
  for so in libcudnn.so.9 libcublas.so.13 libcudart.so.13; do
    [ -e "$cuda/lib64/$so" ] && continue
    local found=""
    for d in ${extra_lib//:/ }; do [ -e "$d/$so" ] && found=$d; done
    if [ -z "$found" ]; then
      found=$(find /opt /usr/local /usr/lib -name "$so" -print -quit 2>/dev/null)
      [ -n "$found" ] && extra_lib="$extra_lib:$(dirname "$found")"
    fi
  done
  export SHOAL_CUDA_CFLAGS="$extra_inc"
  export SHOAL_CUDA_LDFLAGS=""
  if [ -n "$extra_lib" ]; then
    export LD_LIBRARY_PATH=$LD_LIBRARY_PATH$extra_lib
    SHOAL_CUDA_LDFLAGS=$(tr ':' '\n' <<<"${extra_lib#:}" | sed 's/^/-L/' | tr '\n' ' ')
  fi
  echo "gpu-env: prefix $prefix; LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
}

case "${1:-}" in
  fetch) shift; fetch "$@" ;;
  setup) setup ;;
  *) echo "usage: bench/gpu-env.sh fetch [--dev]   |   . bench/gpu-env.sh setup" >&2
     # sourced: return; run: exit
     return 2 2>/dev/null || exit 2 ;;
esac
