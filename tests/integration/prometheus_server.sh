#!/bin/bash
# SPDX-License-Identifier: MIT
# A real Prometheus server (Debian's prometheus package) on loopback scrapes
# ntcore every second; counters whose true values the test knows are read
# back through Prometheus's HTTP query API:
#  - ntcore_events_in_total{plugin="prometheus_metricgen.0"} == 5000: the
#    synthetic probe publishes exactly 5000 events, the core counts them;
#  - ntcore_events_out_total{plugin="file.0"} == 5000 and the file sink wrote
#    5000 lines: the core's delivery count equals what reached the sink;
#  - ntcore_metricgen_c0_total{l0="s0"} == 12345, the value set;
#  - ntcore_sched_context_switches_total{pid=CHILD,kind="voluntary"} of a
#    known child that sleeps 200 times: at least 200, and within a few of the
#    child's own /proc/self/status count (needs the sched probe built);
#  - a histogram bucket le="1.0" exists in Prometheus: it negotiated
#    OpenMetrics and parsed it.
# Usage: prometheus_server.sh BUILD_ROOT
set -euo pipefail

. "$(dirname "$0")/lib.sh"
nt_test_root "$@"
PT="python3 $HERE/prometheus/promtest.py"
NT=$NTCORE
command -v prometheus >/dev/null || fail "prometheus missing (apt-get install prometheus)"
[ -f "$B/plugins/sched/sched.so" ] ||
	fail "the sched probe is not built in $B (configure with -Dplugins=...,sched,...): the context-switch check needs it"

PIDS=()
test_cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
}
nt_test_tmp nt-promsrv

P_NT=$($PT free-port)
P_PROM=$($PT free-port)
[ "$P_NT" != "$P_PROM" ] || P_PROM=$($PT free-port)
PROM=http://127.0.0.1:$P_PROM

cat >"$T/nt.conf" <<EOF
plugins = (
  { plugin = "sched"; interval_ms = 200; },
  { plugin = "prometheus_metricgen"; series = 30; families = 3; kind = "mixed";
    value = 12345; publish = 5000; },
  { plugin = "file"; path = "$T/events.jsonl"; events = [ "metricgen.*" ]; },
  { plugin = "prometheus"; listen = "127.0.0.1:$P_NT"; required = true;
    events = [ "alert.*" ]; }
);
EOF

# The known child: 200 sleeps of 5 ms (each one voluntary switch), then it
# records its own count and blocks on a FIFO until the test is done.
mkfifo "$T/release"
cat >"$T/child.py" <<EOF
import os, time
with open("$T/child.pid.tmp", "w") as f:
    f.write(str(os.getpid()))
os.rename("$T/child.pid.tmp", "$T/child.pid")
for _ in range(200):
    time.sleep(0.005)
with open("/proc/self/status") as f:
    vol = [l.split()[1] for l in f if l.startswith("voluntary_ctxt_switches")][0]
with open("$T/child.vol.tmp", "w") as f:
    f.write(vol)
os.rename("$T/child.vol.tmp", "$T/child.vol")
open("$T/release").read()
EOF

cat >"$T/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: ntcore
    static_configs:
      - targets: ['127.0.0.1:$P_NT']
EOF

"$NT" -c "$T/nt.conf" -- python3 "$T/child.py" >"$T/nt.log" 2>&1 &
NTPID=$!
PIDS+=("$NTPID")
$PT wait-log "$T/nt.log" '(serving metrics on http://\S+)' --timeout 20 >/dev/null ||
	{ cat "$T/nt.log" >&2; fail "ntcore did not start serving"; }

prometheus --config.file="$T/prometheus.yml" --storage.tsdb.path="$T/tsdb" \
	--web.listen-address="127.0.0.1:$P_PROM" >"$T/prom.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 1 100); do
	$PT get "$PROM/-/ready" --timeout 1 >/dev/null 2>&1 && break
	sleep 0.2
done
$PT get "$PROM/-/ready" --timeout 2 >/dev/null 2>&1 || { tail -20 "$T/prom.log" >&2; fail "prometheus did not become ready"; }

for _ in $(seq 1 200); do [ -f "$T/child.vol" ] && break; sleep 0.1; done
[ -f "$T/child.vol" ] || { cat "$T/nt.log" >&2; fail "the child did not run"; }
CHILD=$(cat "$T/child.pid")
VOL=$(cat "$T/child.vol")

q() { $PT query "$PROM" "$@" --timeout 25; }
up=$(q 'up{job="ntcore"}' --expect 1) ||
	{ tail -20 "$T/prom.log" >&2; fail "Prometheus cannot scrape ntcore"; }
echo "ok 1 - Prometheus scrapes ntcore (up == $up)"

q 'ntcore_events_in_total{plugin="prometheus_metricgen.0"}' --expect 5000 >/dev/null ||
	fail "ntcore_events_in_total of the generator is not 5000 in Prometheus"
q 'ntcore_events_out_total{plugin="file.0"}' --expect 5000 >/dev/null ||
	fail "ntcore_events_out_total of the file sink is not 5000 in Prometheus"
echo "ok 2 - events in/out read back through the query API: 5000 / 5000"

q 'ntcore_metricgen_c0_total{l0="s0"}' --expect 12345 >/dev/null ||
	fail "ntcore_metricgen_c0_total{l0=\"s0\"} is not 12345 in Prometheus"
echo "ok 3 - a set counter reads back 12345"

# The sched probe publishes per interval: wait until Prometheus has at least
# the child's own count, then bound it from above.
v=""
for _ in $(seq 1 60); do
	v=$($PT query "$PROM" "ntcore_sched_context_switches_total{pid=\"$CHILD\",kind=\"voluntary\"}" --timeout 2 2>/dev/null || true)
	[ -n "$v" ] && [ "$v" -ge "$VOL" ] && break
	sleep 0.5
done
[ -n "$v" ] || fail "no ntcore_sched_context_switches_total for child $CHILD in Prometheus"
[ "$v" -ge 200 ] || fail "child $CHILD slept 200 times but Prometheus has $v voluntary switches"
[ "$v" -ge "$VOL" ] || fail "Prometheus has $v voluntary switches for $CHILD, the child counted $VOL itself"
[ "$v" -le $((VOL + 20)) ] || fail "Prometheus has $v voluntary switches for $CHILD, far above the child's own $VOL"
echo "ok 4 - context switches of the known child: Prometheus $v, /proc $VOL, >= 200 sleeps"

n=$(q 'count(ntcore_metricgen_h2_seconds_bucket{le="1.0"})' --expect 10) ||
	fail "no canonical OpenMetrics le=\"1.0\" buckets in Prometheus (did it negotiate OpenMetrics?)"
# 10 series x counts 1..6 per bucket: rank 105 of 210 lies in (1, 10] at
# 5/50, so the median interpolates to 1.9.
med=$(q 'histogram_quantile(0.5, sum by (le) (ntcore_metricgen_h2_seconds_bucket))')
awk -v m="$med" 'BEGIN { exit !(m > 1.8999 && m < 1.9001) }' ||
	fail "histogram_quantile over the generator's buckets is $med, want 1.9"
echo "ok 5 - Prometheus ingested OpenMetrics histograms ($n series with le=\"1.0\", median $med)"

echo done >"$T/release"
rc=0
wait "$NTPID" || rc=$?
[ "$rc" = 0 ] || { cat "$T/nt.log" >&2; fail "ntcore exited $rc"; }
lines=$(grep -c '"type":"metricgen.tick"' "$T/events.jsonl" || true)
[ "$lines" = 5000 ] || fail "the file sink wrote $lines metricgen.tick lines, want 5000"
echo "ok 6 - the file sink has the same 5000 events"
echo "PASS: prometheus_server"
