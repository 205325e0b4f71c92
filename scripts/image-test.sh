#!/usr/bin/env bash
# `make image-test`: builds the runtime stage of deploy/Dockerfile with podman and runs Herald in it.
#
# No registry is reachable here (only Debian's and PyPI's mirrors), so neither swift:6.2-bookworm
# nor debian:bookworm-slim can be pulled. Instead:
# - the base image is Debian 12 made by `debootstrap --variant=minbase bookworm` from Debian's
#   mirror (cached in .build/image/rootfs.tar; debian:bookworm-slim is built the same way, minus docs);
# - the build stage is replaced by the binary built here (HERALD_BIN, default the debug build), and
#   the Swift runtime libraries of this toolchain are mounted read-only with LD_LIBRARY_PATH, as
#   `--static-swift-stdlib` would have linked them in;
# - the runtime stage is the Dockerfile's own text from its last FROM, with `COPY --from=build`
#   replaced by the same files from this checkout.
# Then, in the image: `ldd` finds every library, `herald --version` runs, and `herald serve`, as
# the image's user against a throwaway PostgreSQL, answers /readyz with 200.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v podman >/dev/null || { echo "image-test: podman is not installed (apt-get install podman)" >&2; exit 1; }
work=.build/image
mkdir -p "$work"
if [ ! -f "$work/rootfs.tar" ]; then
  command -v debootstrap >/dev/null || { echo "image-test: debootstrap is not installed" >&2; exit 1; }
  rm -rf "$work/rootfs"
  debootstrap --variant=minbase bookworm "$work/rootfs" http://deb.debian.org/debian >"$work/debootstrap.log"
  tar -C "$work/rootfs" -cf "$work/rootfs.tar" .
  rm -rf "$work/rootfs"
fi
podman image exists localhost/herald-base:bookworm || podman import "$work/rootfs.tar" localhost/herald-base:bookworm >/dev/null
bin=${HERALD_BIN:-$(swift build --show-bin-path)/herald}
rm -rf "$work/context" && mkdir -p "$work/context/out/usr/local/bin" "$work/context/out/usr/local/share/herald"
cp "$bin" "$work/context/out/usr/local/bin/herald"
cp -r sql openapi console "$work/context/out/usr/local/share/herald/"
# The runtime stage, as written, with the build stage's output taken from the context.
# (The global ARGs before the first FROM, then the last stage.)
awk '/^FROM /{if(!first)first=NR; last=NR} {lines[NR]=$0} END{for(i=1;i<first;i++) if(lines[i] ~ /^ARG /) print lines[i]; for(i=last;i<=NR;i++) print lines[i]}' deploy/Dockerfile |
  sed 's|^COPY --from=build /out/ /|COPY out/ /|' > "$work/context/Containerfile"
grep -q '^COPY out/ /' "$work/context/Containerfile" || { echo "image-test: no COPY --from=build /out/ / in deploy/Dockerfile's runtime stage" >&2; exit 1; }
podman build --isolation chroot --network host --build-arg RUNTIME_IMAGE=localhost/herald-base:bookworm -t localhost/herald:test "$work/context"
swiftlib=$(dirname "$(dirname "$(readlink -f "$(command -v swift)")")")/lib/swift/linux
# `podman run` cannot start containers here (crun: "cgroups in hybrid mode not supported", and
# setrlimit refused), so the image's file system is entered the plain way: a container created
# from the image, mounted, and chroot as the image's user, with the Swift libraries bound in.
container=$(podman create localhost/herald:test)
root=$(podman mount "$container")
cleanup() { umount "$root/swift" "$root/proc" 2>/dev/null || true; podman umount "$container" >/dev/null 2>&1 || true; podman rm "$container" >/dev/null 2>&1 || true; }
trap cleanup EXIT
mkdir -p "$root/swift" && mount --bind -o ro "$swiftlib" "$root/swift"
mount -t proc proc "$root/proc"   # Foundation reads the arguments from /proc/self/cmdline
inside() { chroot --userspec=10001:10001 "$root" /usr/bin/env -i PATH=/usr/local/bin:/usr/bin:/bin LD_LIBRARY_PATH=/swift HERALD_LISTEN=0.0.0.0:8080 "$@"; }
missing=$(inside ldd /usr/local/bin/herald | grep 'not found' || true)
[ -z "$missing" ] || { echo "image-test: libraries missing in the image:"; echo "$missing"; exit 1; } >&2
inside herald --version
# serve without a database exits 2 naming DATABASE_URL (a configuration error, not a crash).
set +e
inside herald serve 2>&1 | tail -1; status=${PIPESTATUS[0]}
set -e
[ "$status" = 2 ] || { echo "image-test: herald serve without DATABASE_URL exited $status, not 2" >&2; exit 1; }
# serve with a database: a throwaway cluster whose socket the image's user (10001) may reach,
# bound into the image at the same path; /readyz must answer 200 (migrations, OpenAPI file and
# console found under /usr/local/share/herald, libraries loaded).
pgdir=$(mktemp -d /tmp/herald-image-pg.XXXXXX)
scripts/pg.sh init "$pgdir" fast
echo "unix_socket_permissions = 0777" >> "$pgdir/data/postgresql.conf"
scripts/pg.sh start "$pgdir"
chmod 711 "$pgdir/run"
mkdir -p "$root$pgdir/run" && mount --bind "$pgdir/run" "$root$pgdir/run"
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
chroot --userspec=10001:10001 "$root" /usr/bin/env -i PATH=/usr/local/bin:/usr/bin:/bin LD_LIBRARY_PATH=/swift \
  DATABASE_URL="$(scripts/pg.sh url "$pgdir")" HERALD_LISTEN="127.0.0.1:$port" herald serve >"$work/serve.log" 2>&1 &
serve=$!
cleanup() {
  kill "$serve" 2>/dev/null; wait "$serve" 2>/dev/null
  umount "$root$pgdir/run" "$root/swift" "$root/proc" 2>/dev/null || true
  scripts/pg.sh stop "$pgdir" >/dev/null 2>&1 || true; rm -rf "$pgdir"
  podman umount "$container" >/dev/null 2>&1 || true; podman rm "$container" >/dev/null 2>&1 || true
}
ready=
for _ in $(seq 1 100); do
  ready=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/readyz" || true)
  [ "$ready" = 200 ] && break
  sleep 0.2
done
[ "$ready" = 200 ] || { echo "image-test: herald serve in the image did not become ready ($ready); its log:" >&2; cat "$work/serve.log" >&2; exit 1; }
curl -s "http://127.0.0.1:$port/readyz"; echo
curl -s "http://127.0.0.1:$port/metrics" | grep '^herald_build_info'
echo "image-test: the image's libraries are all found, and herald serves from it (/readyz 200)" >&2
