#!/usr/bin/env bash
# Regenerates core/bpf/ARCH/vmlinux_<MAJOR><MINOR>.h (the kernel types the
# BPF programs compile against, CO-RE relocated at load time) from a real
# kernel's BTF, and points core/bpf/ARCH/vmlinux.h at it. Named by kernel
# version as libbpf-tools does: 6.1 -> vmlinux_601.h, 6.18 -> vmlinux_618.h.
#
#   scripts/gen-vmlinux.sh ARCH SOURCE
#
#   ARCH    x86 | arm64 (the __TARGET_ARCH_ spelling, core/bpf/ARCH/)
#   SOURCE  /sys/kernel/btf/vmlinux   the running kernel (its arch must be ARCH)
#           PATH/vmlinux              a kernel ELF with a .BTF section
#           PATH/linux-image-*-dbg_*.deb   Debian's debug kernel package
#           debian:PACKAGE            apt-get download PACKAGE (e.g.
#                                     debian:linux-image-6.1.0-50-arm64-dbg;
#                                     a foreign ARCH needs
#                                     `dpkg --add-architecture arm64` and
#                                     `apt-get update` first)
#
# Needs bpftool (Debian: bpftool) and, for ELF sources, binutils (readelf,
# strings). docs/arm64.md says when to regenerate and what to check after.
set -euo pipefail

die() { echo "gen-vmlinux: $*" >&2; exit 2; }

[ $# -eq 2 ] || die "usage: $0 x86|arm64 SOURCE (see the comment at the top)"
arch=$1 src=$2
case $arch in
x86) machine="Advanced Micro Devices X86-64" uname_m=x86_64 deb_arch=amd64 ;;
arm64) machine=AArch64 uname_m=aarch64 deb_arch=arm64 ;;
*) die "unknown ARCH '$arch' (x86 or arm64)" ;;
esac
root=$(cd "$(dirname "$0")/.." && pwd)
bpftool=$(command -v bpftool || echo /usr/sbin/bpftool)
[ -x "$bpftool" ] || die "bpftool not found (apt-get install bpftool)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# A Debian package: fetch it if named, then take boot/vmlinux-* out of it.
if [[ $src == debian:* ]]; then
	pkg=${src#debian:}
	(cd "$tmp" && apt-get download "$pkg:$deb_arch" >/dev/null 2>&1) ||
		die "apt-get download $pkg:$deb_arch failed (dpkg --add-architecture $deb_arch; apt-get update?)"
	src=$(ls "$tmp"/*.deb)
	origin="Debian package $(basename "$src")"
fi
if [[ $src == *.deb ]]; then
	origin=${origin:-"Debian package $(basename "$src")"}
	dpkg-deb --fsys-tarfile "$src" |
		tar -x -C "$tmp" --wildcards './usr/lib/debug/boot/vmlinux-*' ||
		die "$src has no usr/lib/debug/boot/vmlinux-* (a linux-image-*-dbg package?)"
	src=$(ls "$tmp"/usr/lib/debug/boot/vmlinux-*)
fi
[ -r "$src" ] || die "$src: not readable"

# The kernel release (for the name) and a check that the arch is right.
if [ "$src" = /sys/kernel/btf/vmlinux ]; then
	[ "$(uname -m)" = "$uname_m" ] ||
		die "the running kernel is $(uname -m), not $uname_m: give a vmlinux or a .deb"
	release=$(uname -r)
	origin="/sys/kernel/btf/vmlinux of the running kernel"
else
	readelf -h "$src" 2>/dev/null | grep -q "Machine: *$machine" ||
		die "$src is not a $arch ELF kernel"
	readelf -S "$src" | grep -q ' \.BTF ' ||
		die "$src has no .BTF section (kernel built without CONFIG_DEBUG_INFO_BTF)"
	release=$(strings -n 16 "$src" | sed -n 's/^Linux version \([^ ]*\) .*/\1/p' | head -n 1)
	[ -n "$release" ] || die "$src: no 'Linux version' string to name the header by"
	origin=${origin:-$src}
fi
[[ $release =~ ^([0-9]+)\.([0-9]+) ]] || die "cannot read a version from '$release'"
ver=$(printf '%d%02d' "${BASH_REMATCH[1]}" "${BASH_REMATCH[2]}")
name=vmlinux_$ver.h
dir=$root/core/bpf/$arch
mkdir -p "$dir"

{
	printf '/* Kernel types for BPF programs built with __TARGET_ARCH_%s:\n' "$arch"
	printf ' * Linux %s, from %s,\n' "$release" "$origin"
	printf ' * by scripts/gen-vmlinux.sh (bpftool btf dump ... format c). Do not edit. */\n'
	"$bpftool" btf dump file "$src" format c
} > "$tmp/$name"
mv "$tmp/$name" "$dir/$name"
cat > "$dir/vmlinux.h" <<EOF
/* The kernel types the $arch BPF programs compile against: Linux $release.
 * Regenerate with scripts/gen-vmlinux.sh (docs/arm64.md). */
#include "$name"
EOF
echo "core/bpf/$arch/$name: Linux $release, $(wc -l < "$dir/$name") lines; core/bpf/$arch/vmlinux.h points at it"
