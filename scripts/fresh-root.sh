#!/usr/bin/env bash
# scripts/fresh-root.sh [-k] [CMD ARGS...]: runs CMD (default: the README's
# first command, `bash scripts/setup.sh && make run`) as root inside a
# brand-new Debian 12 root file system that holds nothing but a base system
# (apt, git, make, ca-certificates) and a clone of this repository's
# committed HEAD at /src/ntcore. What a package, header or symlink installed
# by hand on this machine hides fails there, as on a new user's machine.
#
#   -k   keep the root file system afterwards (its path is printed)
#
# Needs root (mmdebstrap, chroot, mounts) and the network (Debian mirror).
# Reads no stdin. The base system is built once with mmdebstrap (installed
# from Debian when missing) and cached as a tarball; downloaded packages are
# cached too. Cache: $NTCORE_FRESH_CACHE, default /var/tmp/ntcore-fresh.
# Exit status: CMD's.
set -euo pipefail

keep=0
[ "${1:-}" = -k ] && { keep=1; shift; }
[ $# -gt 0 ] || set -- bash -c 'bash scripts/setup.sh && make run'
[ "$(id -u)" = 0 ] || { echo "fresh-root.sh: must run as root (chroot, mounts)" >&2; exit 2; }
repo=$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)
cache=${NTCORE_FRESH_CACHE:-/var/tmp/ntcore-fresh}
base=$cache/bookworm-base.tar
mkdir -p "$cache/debs"

# The base system: mmdebstrap writes a tarball (--format=tar: it would
# otherwise pick a format from the file name).
if [ ! -f "$base" ]; then
	if ! command -v mmdebstrap >/dev/null; then
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mmdebstrap >/dev/null </dev/null
	fi
	mmdebstrap --quiet --variant=apt --format=tar \
		--include=ca-certificates,git,make bookworm "$base.part" </dev/null
	mv "$base.part" "$base"
fi

root=$(mktemp -d "$cache/root.XXXXXX")
# Mount points, in mounting order; unmounted in reverse.
mounts=()
cleanup() {
	local i
	for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do
		umount -R -l "$root/${mounts[i]}" 2>/dev/null || true
	done
	if [ $keep = 1 ]; then
		echo "fresh-root.sh: root file system kept at $root" >&2
	elif ! grep -q " $root/" /proc/self/mounts; then
		rm -rf "$root"
	else
		echo "fresh-root.sh: $root still has mounts; not removed" >&2
	fi
}
trap cleanup EXIT
bind() { # SRC DEST [rbind]
	mkdir -p "$root/$2"
	mount "--${3:-bind}" "$1" "$root/$2"
	mounts+=("$2")
}

tar -xf "$base" -C "$root"
# The network and the package sources of this machine (its mirror or proxy).
cp /etc/resolv.conf "$root/etc/resolv.conf"
cp -a /etc/apt/sources.list* "$root/etc/apt/" 2>/dev/null || true
rm -f "$root/etc/apt/apt.conf.d/docker-clean"
git clone -q "$repo" "$root/src/ntcore"

mount -t proc proc "$root/proc"
mounts+=(proc)
bind /sys sys rbind
mount --make-rslave "$root/sys"
bind /dev dev
bind /dev/pts dev/pts
bind "$cache/debs" var/cache/apt/archives

echo "fresh-root.sh: $(git -C "$repo" log -1 --format='%h %s' | cut -c1-72)" >&2
echo "fresh-root.sh: running: $*" >&2
set +e
chroot "$root" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
	PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
	bash -c 'cd /src/ntcore && exec "$@"' fresh-root "$@" </dev/null
rc=$?
set -e
echo "fresh-root.sh: exit status $rc" >&2
exit $rc
