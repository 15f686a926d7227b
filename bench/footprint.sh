#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/footprint.sh [--smoke] [BUILD_ROOT] [--baseline OTHER_BUILD_ROOT]
# ntcore's footprint and timing (issue 17), on this machine: RSS and its
# peak while idle with default.conf (host-wide and -p), with training.conf
# and with every plugin that runs without a GPU; how many times the kernel
# BTF is parsed for training.conf (opens of /sys/kernel/btf/vmlinux, by
# strace); attach time (start to the -- CMD child running) and shutdown
# time (SIGINT to exit) for training.conf, the median of 5 runs. With
# --baseline, the same for another build (main, say) in a column beside:
# before/after measured in one run. Root (BPF); the numbers depend on what
# else runs on the machine (host-wide probes see it), so compare columns.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
NT_BENCH=bench/footprint
SMOKE=0
B=
BASE=
while [ $# -gt 0 ]; do
	case $1 in
	--smoke) SMOKE=1 ;;
	--baseline) BASE=$(cd "$2" && pwd); shift ;;
	-h | --help) sed -n '2,12p' "$0"; exit 0 ;;
	*) B=$1 ;;
	esac
	shift
done
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=$(cd "${B:-${NTCORE_BUILD_ROOT:-$ROOT/build}}" && pwd)
[ "$(id -u)" -eq 0 ] || fail "must run as root"
[ -x "$B/core/ntcore" ] || fail "no daemon at $B/core/ntcore (pass the build root)"
T=$(mktemp -d /tmp/ntcore-bench-footprint.XXXXXX)
SLEEPER=
trap '[ -n "$SLEEPER" ] && kill $SLEEPER 2>/dev/null; rm -rf "$T"' EXIT
IDLE=10 RUNS=5
[ $SMOKE = 1 ] && { IDLE=2; RUNS=1; }

# every plugin of the tree that runs without a GPU, outputs in $T
cat >"$T/all.conf" <<C
plugins = (
  { plugin = "sched"; }, { plugin = "mem"; }, { plugin = "io"; }, { plugin = "net"; },
  { plugin = "cuda"; stacks = true; enter_events = true; }, { plugin = "cuda_gpu"; },
  { plugin = "cuda_memleak"; }, { plugin = "cuda_oom"; }, { plugin = "cuda_errors"; },
  { plugin = "cuda_frag"; svg_path = "$T/frag-%p-dev%d.svg"; }, { plugin = "cuda_hang"; },
  { plugin = "nvlink"; }, { plugin = "python"; },
  { plugin = "stdout"; interval_ms = 5000; },
  { plugin = "file"; path = "$T/all.jsonl"; metrics = true; },
  { plugin = "prometheus"; listen = "127.0.0.1:19479"; },
  { plugin = "trace"; dir = "$T"; },
  { plugin = "grpc"; }
);
C
sed 's|ntcore-training|'"$T"'/training|' "$ROOT/conf.d/training.conf" >"$T/training.conf"
sleep 3600 &
SLEEPER=$!

# measure BUILD: prints "key value" lines
measure() {
	local b=$1
	python3 - "$b" "$T" "$ROOT" "$IDLE" "$RUNS" "$SLEEPER" <<'PY'
import os, signal, statistics, subprocess, sys, time
b, T, ROOT, idle, runs, sleeper = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
env = dict(os.environ, NTCORE_PLUGIN_PATH=f"{b}/plugins:{b}/sinks")
nt = f"{b}/core/ntcore"

def status(pid):
    st = dict(l.split(":", 1) for l in open(f"/proc/{pid}/status"))
    return int(st["VmRSS"].split()[0]) / 1024, int(st["VmHWM"].split()[0]) / 1024

def rss(conf, *args):
    p = subprocess.Popen([nt, "-c", conf, *args], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, cwd=T, env=env)
    time.sleep(idle)
    if p.poll() is not None:
        sys.exit(f"ntcore -c {conf} exited {p.returncode} before it was measured")
    r = status(p.pid)
    p.send_signal(signal.SIGINT)
    p.wait()
    return r

def timing(conf):
    att, shut = [], []
    for _ in range(runs):
        t0 = time.monotonic()
        p = subprocess.Popen([nt, "-c", conf, "--", "sh", "-c", "echo go; exec sleep 60"],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=T, env=env)
        while True:
            line = p.stdout.readline()
            if b"go" in line or not line:
                break
        att.append((time.monotonic() - t0) * 1000)
        time.sleep(1)
        t1 = time.monotonic()
        p.send_signal(signal.SIGINT)  # passed on to the job, which ends
        p.wait()
        shut.append((time.monotonic() - t1) * 1000)
    return statistics.median(att), statistics.median(shut)

def btf_parses(conf):
    out = f"{T}/strace.txt"
    subprocess.run(["strace", "-f", "-e", "trace=openat", "-o", out, nt, "-c", conf,
                    "-d", "1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   cwd=T, env=env)
    return sum("/sys/kernel/btf/vmlinux" in l and "openat" in l for l in open(out))

default = f"{ROOT}/conf.d/default.conf"
for name, args in [("rss_default", (default,)), ("rss_default_p", (default, "-p", sleeper)),
                   ("rss_training", (f"{T}/training.conf",)), ("rss_all", (f"{T}/all.conf",))]:
    now, peak = rss(*args)
    print(f"{name} {now:.1f} {peak:.1f}")
print(f"btf_parses {btf_parses(T + '/training.conf')}")
a, s = timing(f"{T}/training.conf")
print(f"attach_ms {a:.0f}\nshutdown_ms {s:.0f}")
PY
}

measure "$B" >"$T/now"
[ -n "$BASE" ] && measure "$BASE" >"$T/base"
python3 - "$T" "${BASE:+yes}" "$IDLE" "$RUNS" <<'PY'
import sys
T, base, idle, runs = sys.argv[1], sys.argv[2] == "yes", sys.argv[3], sys.argv[4]
def load(f):
    return {l.split()[0]: l.split()[1:] for l in open(f)}
now = load(f"{T}/now")
old = load(f"{T}/base") if base else {}
rows = [("rss_default", f"RSS idle, default.conf ({idle} s)", "MB"),
        ("rss_default_p", f"RSS idle, default.conf -p PID", "MB"),
        ("rss_training", f"RSS, training.conf ({idle} s)", "MB"),
        ("rss_all", f"RSS, every CPU plugin ({idle} s)", "MB"),
        ("btf_parses", "kernel BTF parses, training.conf", ""),
        ("attach_ms", f"attach, training.conf (median of {runs})", "ms"),
        ("shutdown_ms", f"shutdown, training.conf (median of {runs})", "ms")]
print(f"{'':44} {'this build':>18}" + (f" {'baseline':>18}" if base else ""))
for k, label, unit in rows:
    def cell(v):
        if not v:
            return "-"
        return f"{v[0]} {unit} (peak {v[1]})" if len(v) > 1 else f"{v[0]} {unit}"
    print(f"{label:44} {cell(now.get(k)):>18}" + (f" {cell(old.get(k)):>18}" if base else ""))
PY
