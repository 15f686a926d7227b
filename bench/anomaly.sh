#!/bin/bash
# bench/anomaly.sh [--smoke] [BUILD_ROOT]
#
# The anomaly detector's quality and cost, each side by side with a naive
# detector (mean + 3 sd, exponentially weighted over 100 values, learning
# every value), in one run of BUILD_ROOT/plugins/anomaly/anomaly_bench
# (bench/anomaly/anomaly_bench.c):
#   quality  precision, recall and F1 per anomaly kind on 30 seeded labelled
#            synthetic streams of 3,000 values per kind (spikes, level
#            shifts, slow drifts, seasonal breaks, and two anomaly-free
#            kinds), and the multivariate check on groups of 8 series that
#            shift together by 3.5 sd
#   cost     ns per update and bytes per watched series with 10,000 watched
#            series: the detector, the naive one, and the plugin's path per
#            series (registry snapshot -> view -> detector)
# No root, no BPF: it runs the detector's own code on generated data.
# --smoke: 5 streams per kind, 20 values per series (seconds; CI).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SMOKE=
B=
for a in "$@"; do
	case $a in
	--smoke) SMOKE=--smoke ;;
	-h | --help) sed -n '2,18p' "$0"; exit 0 ;;
	*) B=$a ;;
	esac
done
B=${B:-${NTCORE_BUILD_ROOT:-$ROOT/build}}
BIN=$B/plugins/anomaly/anomaly_bench
[ -x "$BIN" ] || { echo "bench/anomaly: no $BIN (build first: ninja -C $B)" >&2; exit 1; }
echo "bench/anomaly: $(uname -r), $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
exec "$BIN" $SMOKE
