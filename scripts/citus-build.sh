#!/usr/bin/env bash
# Builds Citus 13.2.2 for the installed PostgreSQL 15 and installs it into the server's folders.
# The build is cached under .build/citus; a second run only re-installs (seconds).
# Recipe: ../shared/citus/README.md (headers of the installed server version, extracted, not
# installed, so the server is not upgraded; with_llvm=no).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
src_tar="${CITUS_SOURCE:-$here/../shared/citus/citus-13.2.2.tar.gz}"
cache="$here/.build/citus"
pg_config=/usr/lib/postgresql/15/bin/pg_config
libdir="$($pg_config --pkglibdir)"
sharedir="$($pg_config --sharedir)"

if [ -f "$libdir/citus.so" ] && [ -f "$sharedir/extension/citus.control" ]; then
    echo "citus: installed ($libdir/citus.so)"
    exit 0
fi
if [ ! -f "$src_tar" ]; then
    echo "citus: no source at $src_tar (set CITUS_SOURCE)" >&2
    exit 1
fi
mkdir -p "$cache/debs" "$cache/root"
sudo_() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

if [ ! -f "$cache/built" ]; then
    version="$(dpkg-query -W -f='${Version}' postgresql-15)"
    ( cd "$cache/debs"
      [ -n "$(ls postgresql-server-dev-15_*.deb 2>/dev/null)" ] || apt-get download "postgresql-server-dev-15=$version"
      for p in libkrb5-dev krb5-multidev libzstd-dev liblz4-dev; do
          [ -n "$(ls ${p}_*.deb 2>/dev/null)" ] || apt-get download "$p"
      done
      for d in *.deb; do dpkg -x "$d" "$cache/root"; done )
    # PGXS looks for the server headers at the path pg_config names.
    inc="$($pg_config --includedir-server)"
    if [ ! -e "$inc" ]; then
        sudo_ mkdir -p "$(dirname "$inc")"
        sudo_ ln -s "$cache/root$inc" "$inc"
    fi
    rm -rf "$cache/src" && mkdir -p "$cache/src"
    tar -xzf "$src_tar" -C "$cache/src" --strip-components=1
    ( cd "$cache/src"
      ./configure PG_CONFIG="$pg_config" --without-libcurl --without-lz4 --without-zstd >/dev/null
      make -j2 with_llvm=no CPPFLAGS="-I$cache/root/usr/include -I$cache/root/usr/include/mit-krb5" >"$cache/build.log" 2>&1 \
        || { tail -40 "$cache/build.log" >&2; exit 1; } )
    touch "$cache/built"
fi
( cd "$cache/src" && sudo_ make install with_llvm=no >"$cache/install.log" 2>&1 ) \
  || { tail -20 "$cache/install.log" >&2; exit 1; }
echo "citus: built and installed ($libdir/citus.so)"
