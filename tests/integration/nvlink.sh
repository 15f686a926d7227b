#!/bin/bash
# Integration test of the nvlink probe's NVML side against the stand-in
# libnvidia-ml.so.1 (tests/fixtures/nvlink/fake_nvml.c) with scripted
# values on two GPUs: every device metric exactly, the clock event reasons
# bit by bit, NVLink per link on the GPU that has links and nothing but one
# "unsupported" count (and one log line) on the GPU that has none, the PCIe
# rate from byte counters and from the throughput call, one alert.gpu_xid
# with the XID's meaning, per-process memory and utilisation labelled with
# pid and comm and kept to the traced processes; then a missing library and
# a failing nvmlInit (one clear line each, the daemon runs on), bad config
# values (exit 2), and the kernel tracepoints attached where tracefs has
# them. Root (BPF). Arg 1: build root.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
nt_test_init nvlink "$@"
FX=$B/plugins/nvlink
[ -f "$FX/libnvidia-ml.so.1" ] || fail "stand-in NVML not built"
nt_test_tmp nt-nvlink-it
unset LD_LIBRARY_PATH

cat > "$T/nvml.txt" <<'EOF'
gpus 2
gpu 0 name NVIDIA H100 80GB HBM3
gpu 0 uuid GPU-11111111-2222-3333-4444-555555555555
gpu 0 bus 00000000:00:06.0
gpu 0 util 97 41
gpu 0 memory 85899345920 4294967296 536870912
gpu 0 power 312500
gpu 0 energy 123456789
gpu 0 temp 51
gpu 0 clocks 1980 2619
gpu 0 reasons 0x5
gpu 0 pcie_bytes 1000000 2000000
gpu 0 replay 3
gpu 0 ecc 5 1
gpu 0 links 0
gpu 0 proc @child 1073741824 60 20
gpu 0 proc 1 2048 30 30
gpu 0 xid 79
gpu 1 links 4
gpu 1 unsupported pcie_bytes
gpu 1 pcie_rate 100 200
gpu 1 memory 1000 10
EOF
export NVLINK_FAKE_NVML=$T/nvml.txt

# Metric snapshots every 300 ms: a process NVML no longer lists (the traced
# child, once it has exited) loses its series at the next poll, which can
# come before the snapshot written at exit; the checks read the last value
# each series had in any snapshot.
conf() { # conf NAME BODY: the nvlink instance on line 3
	cat > "$T/$1.conf" <<CONF
plugins = (
  { plugin = "file"; path = "$T/$1.jsonl"; metrics = true; interval_ms = 300; },
  { plugin = "nvlink"; nccl = false; $2 }
);
# per-process series by pid also host-wide (the host-wide default drops pid)
ntcore = { identity_labels = ["declared"]; };
CONF
}

run() { # run NAME BODY ARGS...: ntcore with the stand-in, log in NAME.err
	local name=$1 body=$2
	shift 2
	conf "$name" "interval_ms = 200; nvml_library = \"$FX/libnvidia-ml.so.1\"; $body"
	timeout 60 "$NTCORE" -c "$T/$name.conf" "$@" > "$T/$name.out" 2> "$T/$name.err" ||
		{ cat "$T/$name.err" >&2; fail "$name: ntcore failed"; }
}

# 1. Target mode: every reading, processes kept to the target.
run target "" -- sleep 1.5
python3 - "$T/target.jsonl" "$T/target.err" <<'PY' || fail "metrics of the traced run differ"
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
log = open(sys.argv[2]).read()
m = {}
for e in ev:
    if e["type"] == "metric" and e["name"].startswith("ntcore_nvlink_"):
        m[(e["name"], tuple(sorted(e["labels"].items())))] = e.get("value")
errs = []
U0 = "GPU-11111111-2222-3333-4444-555555555555"
U1 = "GPU-fake-0001"
def get(metric, **labels):
    return m.get((metric, tuple(sorted(labels.items()))))
def want(metric, value, **labels):
    got = get(metric, **labels)
    if got is None or abs(got - value) > 1e-9 * max(1, abs(value)):
        errs.append(f"{metric}{labels}: got {got}, want {value}")
g0 = dict(gpu="0", uuid=U0)
g1 = dict(gpu="1", uuid=U1)
want("ntcore_nvlink_gpu_info", 1, pci_bus_id="00000000:00:06.0", name="NVIDIA H100 80GB HBM3", **g0)
want("ntcore_nvlink_gpu_utilization_ratio", 0.97, **g0)
want("ntcore_nvlink_memory_utilization_ratio", 0.41, **g0)
want("ntcore_nvlink_memory_used_bytes", 4294967296, **g0)
want("ntcore_nvlink_memory_total_bytes", 85899345920, **g0)
want("ntcore_nvlink_memory_reserved_bytes", 536870912, **g0)
want("ntcore_nvlink_memory_used_bytes", 10, **g1)
want("ntcore_nvlink_power_watts", 312.5, **g0)
want("ntcore_nvlink_energy_joules_total", 123456.789, **g0)
want("ntcore_nvlink_temperature_celsius", 51, **g0)
want("ntcore_nvlink_sm_clock_hertz", 1980e6, **g0)
want("ntcore_nvlink_memory_clock_hertz", 2619e6, **g0)
for r, v in [("gpu_idle", 1), ("applications_clocks_setting", 0), ("sw_power_cap", 1),
             ("hw_slowdown", 0), ("sync_boost", 0), ("sw_thermal_slowdown", 0),
             ("hw_thermal_slowdown", 0), ("hw_power_brake_slowdown", 0),
             ("display_clock_setting", 0)]:
    want("ntcore_nvlink_clock_event_reason", v, reason=r, **g0)
want("ntcore_nvlink_pcie_tx_bytes_total", 1000000, **g0)
want("ntcore_nvlink_pcie_rx_bytes_total", 2000000, **g0)
want("ntcore_nvlink_pcie_tx_bytes_per_second", 0, **g0)   # counters did not move
want("ntcore_nvlink_pcie_tx_bytes_per_second", 100000, **g1)  # throughput call, KB/s
want("ntcore_nvlink_pcie_rx_bytes_per_second", 200000, **g1)
if get("ntcore_nvlink_pcie_tx_bytes_total", **g1) is not None:
    errs.append("gpu 1 has no PCIe byte counters but a series appeared")
want("ntcore_nvlink_pcie_replays_total", 3, **g0)
want("ntcore_nvlink_ecc_errors_total", 5, kind="corrected", **g0)
want("ntcore_nvlink_ecc_errors_total", 1, kind="uncorrected", **g0)
for l in range(4):
    want("ntcore_nvlink_link_up", 1, link=str(l), **g1)
    want("ntcore_nvlink_link_tx_bytes_total", (l + 1) * 1000 * 1024, link=str(l), **g1)
    want("ntcore_nvlink_link_rx_bytes_total", (l + 1) * 2000 * 1024, link=str(l), **g1)
    want("ntcore_nvlink_link_errors_total", l, link=str(l), kind="replay", **g1)
    want("ntcore_nvlink_link_errors_total", 0, link=str(l), kind="recovery", **g1)
    want("ntcore_nvlink_link_errors_total", 2 * l, link=str(l), kind="crc", **g1)
links4 = [k for k in m if k[0].startswith("ntcore_nvlink_link_") and ("link", "4") in k[1]]
links0 = [k for k in m if k[0].startswith("ntcore_nvlink_link_") and ("gpu", "0") in k[1]]
if links4 or links0:
    errs.append(f"link series that should not exist: {links4 + links0}")
want("ntcore_nvlink_nvml_unsupported", 1, query="nvlink_state", **g0)
want("ntcore_nvlink_nvml_unsupported", 1, query="nvlink_fields", **g0)
want("ntcore_nvlink_nvml_unsupported", 1, query="pcie_bytes", **g1)
unsup = sorted(k for k in m if k[0] == "ntcore_nvlink_nvml_unsupported")
if len(unsup) != 3:
    errs.append(f"unsupported series: {unsup}")
n = log.count("gpu 0: NVML does not support nvlink_state")
if n != 1:
    errs.append(f"'does not support nvlink_state' logged {n} times, want 1")
polls = [e for e in ev if e["type"] == "metric" and e["name"] == "ntcore_nvlink_nvml_poll_seconds"]
if not polls or polls[-1]["count"] < 4:
    errs.append(f"poll histogram: {polls[-1] if polls else None}")
# XID: one alert with its meaning, counted
xa = [e for e in ev if e["type"] == "alert.gpu_xid"]
if len(xa) != 1 or xa[0]["xid"] != 79 or xa[0]["gpu"] != 0 or xa[0]["severity"] != 2 \
        or "fallen off the bus" not in xa[0]["message"]:
    errs.append(f"alert.gpu_xid: {xa}")
else:
    evd = json.loads(xa[0]["evidence"])
    if evd["uuid"] != U0 or evd["pci_bus_id"] != "00000000:00:06.0" or evd["source"] != "nvml":
        errs.append(f"xid evidence: {evd}")
want("ntcore_nvlink_xid_errors_total", 1, xid="79", source="nvml", **g0)
# processes: the traced child only (pid 1 is not a target)
child = next(e["pid"] for e in ev if e["type"] == "proc.exec")
want("ntcore_nvlink_process_memory_bytes", 1073741824, pid=str(child), comm="sleep", **g0)
want("ntcore_nvlink_process_sm_utilization_ratio", 0.6, pid=str(child), comm="sleep", **g0)
want("ntcore_nvlink_process_memory_utilization_ratio", 0.2, pid=str(child), comm="sleep", **g0)
procs = {dict(k[1])["pid"] for k in m if k[0] == "ntcore_nvlink_process_memory_bytes"}
if "1" in procs:
    errs.append("pid 1 (not a target) has process series")
if errs:
    print("\n".join(errs)); sys.exit(1)
print(f"ok: {len(m)} series, polls {polls[-1]['count']}")
PY
echo "ok - NVML metrics, XID alert and target processes exact"

# 2. Host-wide: every process NVML lists.
run hostwide "" -d 1
python3 - "$T/hostwide.jsonl" <<'PY' || fail "host-wide process metrics"
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
m = [e for e in ev if e["type"] == "metric" and e["name"] == "ntcore_nvlink_process_memory_bytes"
     and e["labels"]["pid"] == "1"]
if not m or m[-1]["value"] != 2048:
    print(f"pid 1: {m[-1] if m else None}"); sys.exit(1)
PY
echo "ok - host-wide: pid 1 listed"

# 3. No NVML library: one line, the daemon runs on (exit 0).
conf missing 'nvml_library = "/nonexistent/libnvidia-ml.so.1";'
timeout 30 "$NTCORE" -c "$T/missing.conf" -d 1 > "$T/missing.out" 2>&1 ||
	{ cat "$T/missing.out" >&2; fail "missing library: ntcore failed"; }
n=$(grep -c "NVML not available" "$T/missing.out" || true)
[ "$n" = 1 ] || { cat "$T/missing.out" >&2; fail "missing library: $n lines, want 1"; }
grep -q "NVML not available (/nonexistent/libnvidia-ml.so.1: cannot open shared object file" "$T/missing.out" ||
	{ cat "$T/missing.out" >&2; fail "missing library: the line does not say why"; }
grep "NVML not available" "$T/missing.out"

# 4. nvmlInit fails (driver not loaded): one line.
echo "init_error 9" > "$T/init.txt"
NVLINK_FAKE_NVML=$T/init.txt run initfail "" -d 1
n=$(grep -c "NVML init failed: Driver Not Loaded" "$T/initfail.err" || true)
[ "$n" = 1 ] || { cat "$T/initfail.err" >&2; fail "init failure: $n lines, want 1"; }
echo "ok - missing library and failing init: one line each"

# 4b. The event wait fails at once (a lost GPU): said once, polls go on,
# no spinning (the stand-in aborts after 1000 calls).
printf 'wait_error 15\n' > "$T/wait.txt"
NVLINK_FAKE_NVML=$T/wait.txt run waitfail "" -d 1.5
n=$(grep -c "waiting for XID events failed" "$T/waitfail.err" || true)
[ "$n" = 1 ] || { cat "$T/waitfail.err" >&2; fail "failing event wait: $n lines, want 1"; }
python3 - "$T/waitfail.jsonl" <<'PY' || fail "failing event wait: polls stopped"
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
p = [e for e in ev if e["type"] == "metric" and e["name"] == "ntcore_nvlink_nvml_poll_seconds"]
if not p or p[-1]["count"] < 5:
    print(f"polls: {p[-1]['count'] if p else 0}"); sys.exit(1)
PY
echo "ok - a failing event wait is said once and polling goes on"

# 5. Bad values: exit 2 with FILE:LINE.
expect_config_error badint "interval_ms = 10;" "interval_ms"
expect_config_error badring "ringbuf_kb = 12;" "power of two"

# 6. Kernel tracepoints: the dma_fence ones (tp_btf) exactly where the
# kernel's BTF has them, the XID one where tracefs shows it.
want=()
btf_types=$(bpftool btf dump file /sys/kernel/btf/vmlinux 2>/dev/null | grep -o "'btf_trace_dma_fence_[a-z_]*'" || true)
for tp in dma_fence_emit dma_fence_signaled dma_fence_wait_start dma_fence_wait_end; do
	grep -qx "'btf_trace_$tp'" <<<"$btf_types" && want+=("$tp")
done
[ -e /sys/kernel/tracing/events/nvidia/nvidia_dev_xid/id ] && want+=(nvidia_dev_xid)
got=$(sed -n 's/.*kernel tracepoints attached: //p' "$T/target.err")
exp=$(IFS=,; echo "${want[*]}" | sed 's/,/, /g')
[ -n "$exp" ] || exp="none (no dma_fence or nvidia_dev_xid here, or off)"
[ "$got" = "$exp" ] || fail "tracepoints attached: '$got', want '$exp'"
echo "ok - kernel tracepoints: $got"
echo "PASS"
