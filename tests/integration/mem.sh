#!/bin/bash
# Integration test of the mem probe (root, real kernel, real uprobes).
#   tests/integration/mem.sh BUILD_ROOT
# 1. `ntcore -- mem-leaker run`: the child makes 1000 malloc(1024) in
#    leak_some() and frees 900: the exit report has exactly 100 outstanding
#    allocations and 102400 bytes live, attributed to leak_some by its
#    symbolized stack (mem.leak, mem.heap, mem.report, metrics). It then
#    maps and touches a 64 MiB buffer: the RSS growth is in a mem.rss event
#    within one reporting interval of the touch, and the mapping is an
#    outstanding anonymous mmap from touch_buffer(). The same program started
#    by a shell (a grandchild, its allocations right after its exec) is
#    counted as exactly, and so are 8 threads allocating and freeing at once.
# 2. Two -p targets, one exits mid-run: a clear message, the run goes on to
#    its -d end with exit 0, the other target is still reported after.
# 3. An OOM kill: a child in a 48 MiB memory cgroup allocating without end
#    is reported in mem.oom_kill with its resident memory, and counted.
# 4. Config errors (unknown key, wrong type, unknown function, no free, bad
#    choice, out of bounds): FILE:LINE message naming the key, exit 2.
set -euo pipefail

. "$(dirname "$0")/lib.sh"
nt_test_init mem "$@"
LEAKER=$B/plugins/mem/mem-leaker
[ -x "$LEAKER" ] || fail "no test program at $LEAKER"

PIDS=()
CG=
test_cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	[ -n "$CG" ] && rmdir "$CG" 2>/dev/null
}
nt_test_tmp ntcore-mem-test

INTERVAL=500
conf() { # conf NAME [extra mem keys]   (the mem group is line 3)
	cat >"$T/$1.conf" <<EOF
ntcore = { log_level = "info"; };
plugins = (
  { plugin = "mem"; interval_ms = $INTERVAL; ${2:-} },
  { plugin = "file"; path = "$T/$1.jsonl"; metrics = true; interval_ms = 1000; }
);
EOF
}

# --- 1: exact leak accounting, named stack, RSS growth ---------------------
conf leak
timeout 60 "$NTCORE" -c "$T/leak.conf" -- "$LEAKER" run 1500 \
	>"$T/leak.out" 2>"$T/leak.err" || { cat "$T/leak.err" >&2; fail "leak: ntcore exited with $?"; }
grep -q "free starts with" "$T/leak.err" ||
	{ cat "$T/leak.err" >&2; fail "leak: no log of free's first instruction"; }
python3 - "$T/leak.jsonl" "$T/leak.out" "$INTERVAL" <<'EOF' || { cat "$T/leak.err" >&2; fail "leak: output does not match the program"; }
import json, sys
path, out, interval_ms = sys.argv[1], sys.argv[2], int(sys.argv[3])
marks = dict(l.split() for l in open(out) if l.strip())
touching, touched = int(marks["touching"]), int(marks["touched"])
ev = [json.loads(l) for l in open(path)]
exits = [e for e in ev if e["type"] == "proc.exit"]
assert len(exits) == 1, f"{len(exits)} proc.exit events"
pid = exits[0]["pid"]
mine = [e for e in ev if e.get("pid") == pid]

def one(kind, **match):
    got = [e for e in mine if e["type"] == kind and all(e.get(k) == v for k, v in match.items())]
    assert got, f"no {kind} {match}"
    return got

heap = one("mem.heap", final=True)
assert len(heap) == 1, f"{len(heap)} final mem.heap"
h = heap[0]
assert h["live_allocs"] == 100, f"live_allocs {h['live_allocs']} != 100"
assert h["live_bytes"] == 102400, f"live_bytes {h['live_bytes']} != 102400"
assert h["allocs"] == 1000 and h["frees"] == 900, f"allocs {h['allocs']} frees {h['frees']}"
assert h["peak_bytes"] == 1024000, f"peak_bytes {h['peak_bytes']}"
assert h["mmap_live_bytes"] == 64 << 20, f"mmap_live_bytes {h['mmap_live_bytes']}"

leaks = one("mem.leak", final=True, function="leak_some")
assert len(leaks) == 1, f"{len(leaks)} final leak_some stacks"
l = leaks[0]
assert l["allocs"] == 100 and l["bytes"] == 102400 and l["kind"] == 0, l
# root first, ';'-separated: main before leak_some, the allocating frame last
frames = l["stack"].split(";")
assert frames[-1].startswith("leak_some+") and any(f.startswith("main+") for f in frames[:-1]), l["stack"]
assert not any(f.startswith("ld-linux") for f in frames), l["stack"]
mm = one("mem.leak", final=True, function="touch_buffer")[0]
assert mm["kind"] == 1 and mm["bytes"] == 64 << 20 and mm["allocs"] == 1, mm
rep = one("mem.report", final=True)[0]["text"]
assert "100.0 KiB in 100 allocations outstanding" in rep and "from leak_some:" in rep, rep

# RSS: the first interval event after the touch carries the 64 MiB.
rss = [e for e in mine if e["type"] == "mem.rss" and not e["final"]]
before = [e for e in rss if e["ts"] < touching]
after = [e for e in rss if e["ts"] >= touched]
assert before and after, f"{len(before)} mem.rss before the touch, {len(after)} after"
base = before[-1]["rss_bytes"]
grown = [e for e in after if e["rss_bytes"] - base >= 60 << 20]
assert grown, f"no mem.rss with +60 MiB after the touch (base {base})"
delay_ms = (grown[0]["ts"] - touched) / 1e6
# one interval, plus 100 ms for timer and scheduling jitter
assert delay_ms <= interval_ms + 100, f"RSS growth seen {delay_ms:.0f} ms after the touch"
assert grown[0]["peak_rss_bytes"] >= grown[0]["rss_bytes"]

# Metrics of the last flush.
met = {}
for e in ev:
    if e["type"] == "metric" and e.get("labels", {}).get("pid") == str(pid):
        met[e["name"]] = e["value"]
assert met.get("ntcore_mem_heap_live_bytes") == 102400, met
assert met.get("ntcore_mem_heap_live_allocations") == 100, met
assert met.get("ntcore_mem_heap_allocations_total") == 1000, met
assert met.get("ntcore_mem_rss_peak_bytes", 0) >= 64 << 20, met
print(f"mem.sh: leak: pid {pid}: 100 allocations / 102400 B outstanding from "
      f"{l['stack'].split(';')[-1]}; RSS +{(grown[0]['rss_bytes'] - base) >> 20} MiB "
      f"reported {delay_ms:.0f} ms after the touch (interval {interval_ms} ms)")
EOF

# The same program forked and exec'd by a shell: the block the shell's child
# allocated before its exec is not the program's; its 100 blocks are.
conf grand
timeout 60 "$NTCORE" -c "$T/grand.conf" -- sh -c "$LEAKER run 100; true" \
	>"$T/grand.out" 2>"$T/grand.err" || { cat "$T/grand.err" >&2; fail "grand: ntcore exited with $?"; }
python3 - "$T/grand.jsonl" <<'EOF' || { cat "$T/grand.err" >&2; fail "grand: output does not match the program"; }
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
heap = [e for e in ev if e["type"] == "mem.heap" and e["final"] and e["comm"] == "mem-leaker"]
assert len(heap) == 1, f"{len(heap)} final mem.heap of mem-leaker"
h = heap[0]
assert h["live_allocs"] == 100 and h["live_bytes"] == 102400, h
leak = [e for e in ev if e["type"] == "mem.leak" and e["final"] and e["pid"] == h["pid"]
        and e["function"] == "leak_some"]
assert len(leak) == 1 and leak[0]["allocs"] == 100 and leak[0]["bytes"] == 102400, leak
print(f"mem.sh: grand: pid {h['pid']} (child of sh): 100 allocations / 102400 B from leak_some")
EOF


# 8 threads at once: per-thread calls in flight, atomic counters.
conf threads
timeout 60 "$NTCORE" -c "$T/threads.conf" -- "$LEAKER" threads \
	>"$T/threads.out" 2>"$T/threads.err" || { cat "$T/threads.err" >&2; fail "threads: ntcore exited with $?"; }
python3 - "$T/threads.jsonl" <<'EOF' || { cat "$T/threads.err" >&2; fail "threads: output does not match the program"; }
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
want_bytes = 8 * sum(64 + i % 64 for i in range(2000) if i % 10 == 0)
leak = [e for e in ev if e["type"] == "mem.leak" and e["final"] and e["function"] == "thread_leak"]
assert len(leak) == 1, f"{len(leak)} final thread_leak stacks"
assert leak[0]["allocs"] == 1600 and leak[0]["bytes"] == want_bytes, (leak[0], want_bytes)
h = [e for e in ev if e["type"] == "mem.heap" and e["final"]][0]
assert h["frees"] >= 8 * 5800 and h["untracked"] == 0, h
print(f"mem.sh: threads: 8 threads, 1600 allocations / {want_bytes} B outstanding from thread_leak")
EOF


# --- 2: a -p target exits mid-run ------------------------------------------
conf pexit
"$LEAKER" loop 2 >"$T/a.out" &
A=$!
PIDS+=("$A")
"$LEAKER" loop 6 >"$T/b.out" &
Bp=$!
PIDS+=("$Bp")
for _ in $(seq 50); do [ -s "$T/a.out" ] && [ -s "$T/b.out" ] && break; sleep 0.1; done
set +e
timeout 60 "$NTCORE" -c "$T/pexit.conf" -p "$A" -p "$Bp" -d 4 >"$T/pexit.out" 2>"$T/pexit.err"
rc=$?
set -e
[ "$rc" = 0 ] || { cat "$T/pexit.err" >&2; fail "pexit: exit $rc, expected 0"; }
grep -Eq "target pid $A \(mem-leaker\) exited.*the other targets go on" "$T/pexit.err" ||
	{ cat "$T/pexit.err" >&2; fail "pexit: no message about pid $A leaving"; }
python3 - "$T/pexit.jsonl" "$A" "$Bp" <<'EOF' || { cat "$T/pexit.err" >&2; fail "pexit: output"; }
import json, sys
path, a, b = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
ev = [json.loads(l) for l in open(path)]
fin = [e for e in ev if e["type"] == "mem.heap" and e["pid"] == a and e["final"]]
assert len(fin) == 1, f"{len(fin)} final mem.heap for {a}"
t_exit = fin[0]["ts"]
assert fin[0]["live_allocs"] > 0 and fin[0]["allocs"] > 100, fin[0]
leak = [e for e in ev if e["type"] == "mem.leak" and e["pid"] == a and e["final"]]
assert leak and leak[0]["function"] == "churn", leak[:1]
later = [e for e in ev if e["type"] == "mem.heap" and e["pid"] == b and e["ts"] > t_exit + 1e9]
assert later, f"no mem.heap for {b} a second after {a} left"
assert later[-1]["allocs"] > later[0]["allocs"] or len(later) == 1, "pid b not counted on"
print(f"mem.sh: pexit: pid {a} left with {fin[0]['live_allocs']} allocations outstanding "
      f"from churn; pid {b} reported {len(later)} more times")
EOF
echo "mem.sh: pexit: $(grep -E "target pid $A" "$T/pexit.err" | head -1)"

# --- 3: an OOM kill -----------------------------------------------------------
LIMIT=$((48 << 20))
if [ -d /sys/fs/cgroup/memory ] && [ -f /sys/fs/cgroup/memory/cgroup.procs ]; then
	CG=/sys/fs/cgroup/memory/ntcore-mem-test.$$ # cgroup v1
	mkdir "$CG"
	echo "$LIMIT" >"$CG/memory.limit_in_bytes"
	[ -f "$CG/memory.memsw.limit_in_bytes" ] && echo "$LIMIT" >"$CG/memory.memsw.limit_in_bytes"
elif grep -qw memory /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
	CG=/sys/fs/cgroup/ntcore-mem-test.$$ # cgroup v2
	echo +memory >/sys/fs/cgroup/cgroup.subtree_control 2>/dev/null || true
	mkdir "$CG"
	echo "$LIMIT" >"$CG/memory.max"
	[ -f "$CG/memory.swap.max" ] && echo 0 >"$CG/memory.swap.max"
else
	fail "oom: no memory cgroup (v1 /sys/fs/cgroup/memory or v2 with the memory controller) to run a child in"
fi
conf oom
# The job is OOM-killed (SIGKILL): ntcore exits with its status, 128 + 9.
rc=0
timeout 60 "$NTCORE" -c "$T/oom.conf" -- sh -c "echo \$\$ >$CG/cgroup.procs && exec $LEAKER hog" \
	>"$T/oom.out" 2>"$T/oom.err" || rc=$?
[ $rc = 137 ] || { cat "$T/oom.err" >&2; fail "oom: ntcore exited with $rc, not the killed job's 137"; }
grep -q "OOM killer chose pid .* (mem-leaker)" "$T/oom.err" ||
	{ cat "$T/oom.err" >&2; fail "oom: no OOM message"; }
python3 - "$T/oom.jsonl" "$LIMIT" <<'EOF' || { cat "$T/oom.err" >&2; fail "oom: output"; }
import json, sys
path, limit = sys.argv[1], int(sys.argv[2])
ev = [json.loads(l) for l in open(path)]
ex = [e for e in ev if e["type"] == "proc.exit"]
assert len(ex) == 1 and ex[0]["exit_code"] == 137 and ex[0]["signal"] == 9, ex
pid = ex[0]["pid"]
oom = [e for e in ev if e["type"] == "mem.oom_kill"]
assert len(oom) == 1, f"{len(oom)} mem.oom_kill"
o = oom[0]
assert o["pid"] == pid and o["comm"] == "mem-leaker", o
rss = o["anon_rss_bytes"] + o["file_rss_bytes"] + o["shmem_rss_bytes"]
assert limit * 3 // 4 <= rss <= limit + (4 << 20), f"victim rss {rss}"
m = [e for e in ev if e["type"] == "metric" and e["name"] == "ntcore_mem_oom_kills_total"
     and e["labels"].get("pid") == str(pid)]
assert m and m[-1]["value"] == 1, m
print(f"mem.sh: oom: pid {pid} killed with {rss >> 20} MiB resident in a {limit >> 20} MiB cgroup")
EOF

# --- 4: config errors --------------------------------------------------------
expect_config_error unknown_key 'sample_min_byte = 64;' "sample_min_byte"
expect_config_error bad_type 'top_n = "ten";' "top_n"
expect_config_error bad_function 'functions = [ "malloc", "mallocc", "free" ];' "functions: unknown allocator function 'mallocc'"
expect_config_error no_free 'functions = [ "malloc", "calloc" ];' "functions: .*'free'"
expect_config_error bad_choice 'heap = "sometimes";' "heap"
expect_config_error out_of_bounds 'stack_depth = 500;' "stack_depth: 500 is out of range"
echo "mem.sh: PASS"
