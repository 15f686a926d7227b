#!/bin/sh
# build-skel.sh CLANG BPFTOOL ARCH INPUT.bpf.c OUTPUT.skel.h DEPFILE [-I...]
# Compiles one BPF program (CO-RE, BTF) and generates its libbpf skeleton, so
# the object is embedded in the plugin .so and nothing is read from disk at
# run time.
set -eu
clang=$1 bpftool=$2 arch=$3 in=$4 out=$5 dep=$6
shift 6
obj=${out%.skel.h}.o
name=$(basename "$in" .bpf.c)
# clang -target bpf searches no multiarch directory, so <linux/errno.h>'s
# <asm/errno.h> (in /usr/include/x86_64-linux-gnu on Debian) is not found.
# Hand it the system directories clang uses for the machine the programs
# will run on (ARCH, which differs from the build machine's in a cross
# build: /usr/include/aarch64-linux-gnu from linux-libc-dev:arm64), after
# ours.
case $arch in
x86) triple=x86_64-linux-gnu ;;
arm64) triple=aarch64-linux-gnu ;;
*) triple=$("$clang" -print-target-triple) ;;
esac
sys_includes=$("$clang" --target="$triple" -v -E - </dev/null 2>&1 |
	sed -n '/<\.\.\.> search starts here:/,/End of search list/s|^ \(/.*\)|-idirafter \1|p')
"$clang" -g -O2 -target bpf -D__TARGET_ARCH_"$arch" -Wall -Werror \
	-Wno-unused-function -MD -MF "$dep" -MT "$out" "$@" $sys_includes -c "$in" -o "$obj"
"$bpftool" gen skeleton "$obj" name "${name}_bpf" > "$out.tmp"
mv "$out.tmp" "$out"
