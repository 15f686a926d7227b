#!/bin/bash
# Build the ntcore container image from Debian packages only (issue 21):
#   1. a Debian 12 root file system with the runtime libraries
#      (packages.txt) by mmdebstrap from the configured Debian mirror,
#      imported into podman as localhost/ntcore-base:bookworm (kept: a
#      second build reuses it; REBASE=1 makes it again);
#   2. `meson install --destdir` of the build tree BUILD into a stage;
#   3. `podman build` of Containerfile: localhost/ntcore:VERSION.
# No registry is asked for anything. Needs root, mmdebstrap, podman
# (Debian packages; scripts/setup.sh does not install them: this script is
# not part of `make test`, CI runs it on its own; run-test.sh also needs
# runc on hybrid-cgroup hosts). Takes about a minute (mmdebstrap 30-50 s).
# The RUN step of the Containerfile runs with buildah's chroot isolation
# (ISOLATION=chroot): crun cannot make cgroups on a hybrid host.
# Usage: dist/container/build.sh [BUILD_DIR]   (default: build)
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
BUILD=$(cd "${1:-$SRC/build}" && pwd)
WORK=${WORK:-/var/tmp/ntcore-image}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
PODMAN=${PODMAN:-podman}

for tool in mmdebstrap "$PODMAN"; do
	command -v "$tool" >/dev/null ||
		{ echo "build.sh: needs $tool (apt-get install -y mmdebstrap podman)" >&2; exit 2; }
done
[ "$(id -u)" = 0 ] || { echo "build.sh: run as root (mmdebstrap, rootful podman)" >&2; exit 2; }
[ -x "$BUILD/core/ntcore" ] || { echo "build.sh: no build at $BUILD (ninja -C $BUILD)" >&2; exit 2; }
VERSION=$("$BUILD/core/ntcore" --version | awk '{print $2}')
mkdir -p "$WORK"

# 1. base
if [ -n "${REBASE:-}" ] || ! "$PODMAN" image exists localhost/ntcore-base:bookworm; then
	pkgs=$(grep -v '^#' "$HERE/packages.txt" | paste -sd, -)
	t0=$(date +%s)
	mmdebstrap --variant=minbase --include="$pkgs" \
		--dpkgopt='path-exclude=/usr/share/man/*' \
		--dpkgopt='path-exclude=/usr/share/doc/*' \
		--dpkgopt='path-exclude=/usr/share/locale/*' \
		bookworm "$WORK/rootfs.tar" "$MIRROR"
	"$PODMAN" import --change 'CMD ["/bin/sh"]' "$WORK/rootfs.tar" localhost/ntcore-base:bookworm
	echo "build.sh: base image from $(du -h "$WORK/rootfs.tar" | cut -f1) root file system in $(( $(date +%s) - t0 )) s"
fi

# 2. stage
rm -rf "$WORK/ctx"
mkdir -p "$WORK/ctx"
DESTDIR="$WORK/ctx/stage" meson install -C "$BUILD" --no-rebuild --quiet >/dev/null
# what a daemon does not need: headers, the kit's static library, pkg-config
rm -rf "$WORK/ctx/stage/usr/local/include" "$WORK/ctx/stage/usr/local/share/man"
find "$WORK/ctx/stage" \( -name '*.a' -o -name '*.pc' \) -delete
chmod -R go-w "$WORK/ctx/stage"
cp "$HERE/Containerfile" "$WORK/ctx/"

# 3. image
"$PODMAN" build --pull=never --isolation="${ISOLATION:-chroot}" -t "localhost/ntcore:$VERSION" -f "$WORK/ctx/Containerfile" "$WORK/ctx"
"$PODMAN" tag "localhost/ntcore:$VERSION" localhost/ntcore:latest
echo "build.sh: localhost/ntcore:$VERSION ($("$PODMAN" image inspect --format '{{.Size}}' "localhost/ntcore:$VERSION") bytes)"
