#!/usr/bin/env bash
# Cross-builds all of ntcore for arm64 (Grace, GH200 hosts) on an x86-64
# Debian 12 machine into ./build-arm64, checks that every ELF it made is
# AArch64 (the BPF objects are eBPF), and runs the unit tests that need no
# kernel under qemu-aarch64 (user mode). Run as root; idempotent.
#
#   scripts/cross-arm64.sh            install what is missing, build, check, test
#   NT_CROSS_TESTS=0 scripts/...      no qemu: build and check only
#
# Installs Debian's aarch64 cross gcc and the :arm64 -dev libraries (all
# Multi-Arch: same, so they sit beside the amd64 ones), plus qemu-user.
# docs/arm64.md says what the cross build covers and what it leaves out.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)

packages=(
	gcc-aarch64-linux-gnu g++-aarch64-linux-gnu    # C; libstdc++ for __cxa_demangle
	libbpf-dev:arm64 libconfig-dev:arm64 libev-dev:arm64 libelf-dev:arm64
	libdw-dev:arm64 zlib1g-dev:arm64 libmicrohttpd-dev:arm64
	libprotobuf-c-dev:arm64 libgrpc-dev:arm64 check:arm64
	libsystemd-dev:arm64                           # sd_notify (core/notify.c)
	linux-libc-dev:arm64                           # <asm/*.h> for clang -target bpf
)
[ "${NT_CROSS_TESTS:-1}" = 0 ] || packages+=(qemu-user)

# The build machine's own tools (clang, bpftool, meson, protoc-c ...).
[ -x "$(command -v bpftool || echo /usr/sbin/bpftool)" ] || bash scripts/setup.sh >/dev/null

dpkg --print-foreign-architectures | grep -qx arm64 || dpkg --add-architecture arm64
missing=()
for p in "${packages[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
installed=$(date +%s)

cross=(--cross-file cross/aarch64-linux-gnu.ini)
[ "${NT_CROSS_TESTS:-1}" = 0 ] || cross+=(--cross-file cross/aarch64-qemu.ini)
# Cross files are fixed at setup: set up afresh when they change.
want="${cross[*]}"
if [ ! -f build-arm64/build.ninja ] || [ "$(cat build-arm64/.nt-cross 2>/dev/null)" != "$want" ]; then
	rm -rf build-arm64
	meson setup "${cross[@]}" build-arm64 >/dev/null
	echo "$want" > build-arm64/.nt-cross
fi
ninja -C build-arm64 -j"${NT_JOBS:-2}" >/dev/null
built=$(date +%s)

# Every ELF of the build: AArch64, or eBPF for the BPF objects (meson's
# own sanity checks of the build machine's compiler stay out of it).
n_arm=0 n_bpf=0 bad=()
while IFS= read -r -d '' f; do
	desc=$(file -b "$f")
	case $desc in
	ELF*"ARM aarch64"*) n_arm=$((n_arm + 1)) ;;
	ELF*"eBPF"*) n_bpf=$((n_bpf + 1)) ;;
	ELF*) bad+=("$f: $desc") ;;
	esac
done < <(find build-arm64 -path build-arm64/meson-private -prune -o -type f \( -name '*.so' -o -name '*.so.*' -o -name '*.o' -o -name '*.a' -o -perm -u+x \) -print0)
if ((${#bad[@]})); then
	printf 'cross-arm64: not AArch64: %s\n' "${bad[@]}" >&2
	exit 1
fi
((n_arm > 0 && n_bpf > 0)) || { echo "cross-arm64: no AArch64 or no BPF objects built" >&2; exit 1; }
ntcore_desc=$(file -b build-arm64/core/ntcore)
echo "cross-arm64: $n_arm AArch64 ELF files, $n_bpf eBPF objects; ntcore: ${ntcore_desc%%,*}, $(echo "$ntcore_desc" | grep -o 'ARM aarch64')"

# Unit tests under qemu-aarch64. Left out: valgrind runs (valgrind is an
# x86-64 binary here), and five programs whose kernel interfaces qemu's
# user mode does not give a guest: python-unit and python-ring-unit (they
# read code objects from their own memory with process_vm_readv: ENOSYS),
# kit-proc (qemu fakes /proc/self/stat), kit-tp and kit-ring (the bpf()
# system call).
if [ "${NT_CROSS_TESTS:-1}" != 0 ]; then
	mapfile -t tests < <(meson test -C build-arm64 --list --suite unit --no-suite valgrind 2>/dev/null |
		sed -n 's|^ntcore:[^ ]* / ||p' | grep -vxE 'python-unit|python-ring-unit|kit-proc|kit-tp|kit-ring')
	meson test -C build-arm64 --no-rebuild --num-processes "${NT_JOBS:-2}" "${tests[@]}"
fi
end=$(date +%s)
echo "cross-arm64: packages $((installed - start)) s, build $((built - installed)) s, checks and tests $((end - built)) s, total $((end - start)) s"
