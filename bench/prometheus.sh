#!/bin/bash
# SPDX-License-Identifier: MIT
# Scrape latency of ntcore's Prometheus endpoint at 1k, 10k and 100k series,
# side by side with node_exporter (Debian's prometheus-node-exporter) scraping
# its own metrics on the same machine in the same run.
#
# Every scrape: text format 0.0.4, identity encoding (no gzip on either side),
# one keep-alive connection, wall time from request to last body byte,
# measured by the same client (tests/integration/prometheus/promtest.py).
# ntcore's series come from the synthetic prometheus_metricgen probe
# (counters, 2 labels each, 50 families); its self-metrics ride along.
#
# Usage: bench/prometheus.sh [--smoke] [BUILD_ROOT]   (default build dir:
# $BUILD, $NTCORE_BUILD or ./build). --smoke: fewer scrapes, < 30 s.
set -euo pipefail

SMOKE=0
if [ "${1:-}" = "--smoke" ]; then SMOKE=1; shift; fi
B=${1:-${BUILD:-${NTCORE_BUILD:-build}}}
fail() { echo "bench/prometheus: $*" >&2; exit 1; }
[ -d "$B" ] || fail "no build dir $B (pass BUILD_ROOT)"
B=$(cd "$B" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
PT="python3 $HERE/../tests/integration/prometheus/promtest.py"
NT=$B/core/ntcore
[ -x "$NT" ] || fail "no daemon at $NT"
[ -f "$B/sinks/prometheus/prometheus_metricgen.so" ] || fail "prometheus sink not built in $B"
NODE=$(command -v prometheus-node-exporter || command -v node_exporter || true)
[ -n "$NODE" ] || fail "node_exporter missing (apt-get install prometheus-node-exporter)"
export NTCORE_PLUGIN_PATH=$B/sinks

if [ $SMOKE = 1 ]; then REPS=5; WARM=1; else REPS=40; WARM=3; fi

T=$(mktemp -d /tmp/nt-prombench.XXXXXX)
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$T"
}
trap cleanup EXIT

# node_exporter on a loopback port of its own.
NPORT=$($PT free-port)
"$NODE" --web.listen-address="127.0.0.1:$NPORT" >"$T/node.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 1 100); do
	$PT get "http://127.0.0.1:$NPORT/metrics" --timeout 2 >/dev/null 2>&1 && break
	sleep 0.1
done
read -r n_samples n_bytes n_med n_p90 n_min < <($PT bench "http://127.0.0.1:$NPORT/metrics" --reps "$REPS" --warmup "$WARM") ||
	fail "cannot scrape node_exporter"

row() { # label samples bytes med p90 min
	awk -v l="$1" -v s="$2" -v b="$3" -v m="$4" -v p="$5" -v mn="$6" -v nm="$n_med" -v ns="$n_samples" \
		'BEGIN { printf "%-22s %8d %10d %9.3f %9.3f %9.3f %10.3f %9.3f %9.3f\n",
			l, s, b, m, p, mn, 1000 * m / s, m / nm, (m / s) / (nm / ns) }'
}

echo "Prometheus scrape latency, $(nproc) CPUs, $REPS scrapes after $WARM warm-up, text 0.0.4, no gzip"
printf '%-22s %8s %10s %9s %9s %9s %10s %9s %9s\n' exporter series bytes med_ms p90_ms min_ms us/series "ratio" "ratio/ser"
row "node_exporter (own)" "$n_samples" "$n_bytes" "$n_med" "$n_p90" "$n_min"

for N in 1000 10000 100000; do
	cat >"$T/n$N.conf" <<EOF
plugins = (
  { plugin = "prometheus_metricgen"; series = $N; families = 50; labels = 2;
    max_series = 100000; },
  { plugin = "prometheus"; listen = "127.0.0.1:0"; required = true; events = [ "alert.*" ]; }
);
EOF
	"$NT" -c "$T/n$N.conf" >"$T/n$N.log" 2>&1 &
	pid=$!
	PIDS+=("$pid")
	port=$($PT wait-log "$T/n$N.log" 'serving metrics on http://\S+:(\d+)/' --timeout 30) ||
		{ cat "$T/n$N.log" >&2; fail "ntcore did not start for $N series"; }
	read -r s b m p mn < <($PT bench "http://127.0.0.1:$port/metrics" --reps "$REPS" --warmup "$WARM") ||
		fail "cannot scrape ntcore at $N series"
	# Render time inside ntcore (lock held), from its own histogram.
	$PT get "http://127.0.0.1:$port/metrics" --out "$T/self.txt"
	rs=$($PT value "$T/self.txt" ntcore_prometheus_scrape_duration_seconds_sum)
	rc=$($PT value "$T/self.txt" ntcore_prometheus_scrape_duration_seconds_count)
	rss=$(awk '/VmRSS/ {print $2}' /proc/"$pid"/status)
	row "ntcore $((N / 1000))k" "$s" "$b" "$m" "$p" "$mn"
	awk -v s="$rs" -v c="$rc" -v r="$rss" 'BEGIN { printf "%-22s   render under the registry lock: %.3f ms mean over %d scrapes; RSS %d kB\n", "", 1000 * s / c, c, r }'
	kill -INT "$pid"
	wait "$pid" || true
done
echo "ratio = ntcore median / node_exporter median; ratio/ser = the same per series."
