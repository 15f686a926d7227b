#!/usr/bin/env bash
# Installs every Debian 12 package ntcore's build, tests and benchmarks need,
# then configures and builds into ./build. Run as root. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  # build
  meson ninja-build pkg-config gcc clang llvm libbpf-dev bpftool
  libconfig-dev libev-dev libelf-dev libdw-dev zlib1g-dev
  libmicrohttpd-dev libprotobuf-c-dev protobuf-c-compiler libgrpc-dev
  protobuf-compiler python3
  libsystemd-dev        # sd_notify: readiness and watchdog under systemd
  libclang-rt-dev       # clang's ASan/UBSan/libFuzzer runtimes (scripts/sanitize.sh)
  # tests and benchmark peers
  check valgrind python3-grpcio python3-protobuf prometheus
  prometheus-node-exporter bpftrace bpfcc-tools linux-perf systemd
  iproute2 procps openssl ca-certificates
  # bcc tools (memleak-bpfcc) compile against headers: this machine's flavour
  "linux-headers-$(dpkg --print-architecture)"   # -amd64, -arm64
  chromium              # trace sink: its report page is checked in headless Chromium
  # CI: scripts/fresh-root.sh builds a brand-new Debian 12 root
  mmdebstrap
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# Classic tracepoints need tracefs; ntcore mounts it too, the peers may not.
[ -d /sys/kernel/tracing/events ] || mount -t tracefs nodev /sys/kernel/tracing || true

if [ -f build/build.ninja ]; then
  meson setup --reconfigure build >/dev/null
else
  meson setup build >/dev/null
fi
ninja -C build
