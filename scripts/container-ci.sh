#!/usr/bin/env bash
# CI (issue 21): the container image built from Debian packages only
# (dist/container/build.sh) and the sched probe run in it against the host
# (dist/container/run-test.sh). Installs what it needs from Debian first:
# `make test` does not need these packages, so scripts/setup.sh leaves them
# out. About a minute and a half once the packages are there.
# Usage: scripts/container-ci.sh [BUILD_DIR]   (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
missing=()
for p in podman buildah runc mmdebstrap; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null </dev/null
fi
dist/container/build.sh "${1:-build}"
dist/container/run-test.sh
