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
# Then, in the image: `ldd` finds every library and `herald --version` runs. (Serving against a
# database in the container is not part of it yet.)
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
awk '/^FROM /{last=NR} {lines[NR]=$0} END{for(i=last;i<=NR;i++) print lines[i]}' deploy/Dockerfile |
  sed 's|^COPY --from=build /out/ /|COPY out/ /|' > "$work/context/Containerfile"
grep -q '^COPY out/ /' "$work/context/Containerfile" || { echo "image-test: no COPY --from=build /out/ / in deploy/Dockerfile's runtime stage" >&2; exit 1; }
podman build --network host --build-arg RUNTIME_IMAGE=localhost/herald-base:bookworm -t localhost/herald:test "$work/context"
swiftlib=$(dirname "$(dirname "$(readlink -f "$(command -v swift)")")")/lib/swift/linux
run() { podman run --rm --network host -v "$swiftlib:/swift:ro" -e LD_LIBRARY_PATH=/swift "$@"; }
missing=$(run --entrypoint ldd localhost/herald:test /usr/local/bin/herald | grep 'not found' || true)
[ -z "$missing" ] || { echo "image-test: libraries missing in the image:"; echo "$missing"; exit 1; } >&2
run localhost/herald:test --version
echo "image-test: the image starts herald; every library is found" >&2
