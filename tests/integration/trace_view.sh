#!/bin/bash
# The trace sink's report page in headless Chromium (Debian's `chromium`,
# driven over the DevTools protocol by trace/cdp.py): it loads with no
# console error, exception, failed load or dialog; a screenshot is taken;
# the DOM holds the expected flame-graph frames, alert text and tables, and
# clicking a frame zooms to it. Two pages: the GPU fixture's scenario (known
# frames, kernels, alert) and the fixture CUDA workload under the cuda
# probe with the cuda_errors detector (real stacks, real alerts).
# Root (BPF). Arg 1: build root. TRACE_SHOTS=DIR keeps the screenshots.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
nt_test_root "${1:-}"
[ -f "$B/sinks/trace/trace.so" ] || fail "trace sink not built in $B"
command -v chromium >/dev/null || fail "chromium is needed (scripts/setup.sh installs it)"
PY=/usr/bin/python3
TR=$HERE/trace
nt_test_tmp nt-trace-view

ntcore() { # NAME ARGS...
	local name=$1
	shift
	if ! timeout 120 "$NTCORE" -c "$T/$name.conf" "$@" >"$T/$name.out" 2>&1; then
		cat "$T/$name.out" >&2
		fail "$name: ntcore failed"
	fi
}

# page NAME HTML: load it, screenshot $T/NAME.png, the DOM as JSON in $T/NAME.dom
page() {
	local name=$1 html=$2
	"$PY" "$TR/cdp.py" "file://$html" --timeout 30 --screenshot "$T/$name.png" \
		--eval "JSON.stringify({
			frames: [...document.querySelectorAll('svg.flame g.f title')].map(t => t.textContent.replace(/ \\([^(]*\\)\$/, '')),
			alerts: [...document.querySelectorAll('.alert .msg')].map(x => x.textContent),
			stacks: [...document.querySelectorAll('.alert pre.stack')].map(x => x.textContent),
			kernels: [...document.querySelectorAll('#kernels + table td.name')].map(x => x.textContent),
			calls: [...document.querySelectorAll('#calls + table td.name')].map(x => x.textContent),
			legend: [...document.querySelectorAll('ul.legend li')].map(x => x.textContent),
			title: document.title})" \
		--eval "(() => {
			const g = [...document.querySelectorAll('#flame-gpufx-stack + p + div + svg g.f')]
				.find(g => g.querySelector('title').textContent.startsWith('forward ('));
			if (!g) return 'no frame forward';
			g.dispatchEvent(new MouseEvent('click', {bubbles: true}));
			const w = +g.querySelector('rect').getAttribute('width');
			const back = [...document.querySelectorAll('#flame-gpufx-stack + p + div + svg g.f')]
				.find(g => g.querySelector('title').textContent.startsWith('backward ('));
			return 'forward ' + w + ' backward ' + (back ? back.style.display : 'missing');
		})()" > "$T/$name.dom" || fail "$name: chromium failed"
	[ -s "$T/$name.png" ] && [ "$(stat -c %s "$T/$name.png")" -gt 20000 ] ||
		fail "$name: no screenshot"
	if [ -n "${TRACE_SHOTS:-}" ]; then mkdir -p "$TRACE_SHOTS"; cp "$T/$name.png" "$TRACE_SHOTS/"; fi
}

# ---- the fixture scenario -------------------------------------------------
mkdir -p "$T/s"
cat > "$T/s.conf" <<CONF
ntcore = { identity_labels = [ "declared" ]; };
plugins = (
  { plugin = "trace_gpufx"; },
  { plugin = "trace"; dir = "$T/s"; counters = [ "ntcore_gpufx_*" ];
    report_memory = [ "ntcore_gpufx_memory_bytes" ]; }
);
CONF
ntcore s -d 1
page scenario "$(ls "$T"/s/*.html)"
"$PY" - "$T/scenario.dom" <<'PY' || fail "scenario page"
import json, sys
r = json.load(open(sys.argv[1]))
dom, zoom = json.loads(r["eval"][0]), r["eval"][1]
errs = []
if r["errors"] or r["dialogs"] or not r["loaded"]:
    errs.append(f"errors {r['errors']} dialogs {r['dialogs']} loaded {r['loaded']}")
want = {"all", "[cpu]", "main", "train_step", "forward", "backward", "launch"}
want |= {"[gpu] vector_add", "[gpu] gemm_kernel<float, 128>", "[gpu] softmax",
         "[gpu] nccl_allreduce", "[gpu] memcpy HtoD", "train.py:main", "model.forward"}
missing = want - set(dom["frames"])
if missing:
    errs.append(f"frames missing: {sorted(missing)}")
if dom["alerts"] != ["planted: step time doubled"] or \
        dom["stacks"] != ["main\ntrain_step\nslow_op\n"]:
    errs.append(f"alerts: {dom['alerts']} {dom['stacks']}")
if dom["kernels"][:1] != ["nccl_allreduce"] or len(dom["kernels"]) != 5:
    errs.append(f"kernels table: {dom['kernels']}")
if dom["calls"][:1] != ["cudaDeviceSynchronize"]:
    errs.append(f"calls table: {dom['calls']}")
if not any("ntcore_gpufx_memory_bytes{device=0} pid 4242: last 3.0 MiB" in x for x in dom["legend"]):
    errs.append(f"memory legend: {dom['legend']}")
if zoom != "forward 1200 backward none":
    errs.append(f"click to zoom: {zoom}")
if errs:
    sys.exit("\n".join(errs))
print(f"ok: {len(dom['frames'])} frames, alert, tables, memory, zoom")
PY
echo "ok - scenario report: no console error, screenshot, frames, alert, tables, zoom"

# ---- the fixture CUDA workload with real alerts ----------------------------
FX=$B/plugins/cuda
[ -x "$FX/cuda_workload" ] && [ -f "$FX/detectors/cuda_errors.so" ] ||
	fail "the fixture CUDA workload and cuda_errors are needed (CUDA toolkit headers)"
mkdir -p "$T/c"
cat > "$T/c.conf" <<CONF
ntcore = { identity_labels = [ "declared" ]; };
plugins = (
  { plugin = "cuda"; launch_layer = "runtime"; launch_events = true; stacks = true; },
  { plugin = "cuda_errors"; },
  { plugin = "trace"; dir = "$T/c"; counter_interval_ms = 10; }
);
CONF
(export NTCORE_PLUGIN_PATH=$NTCORE_PLUGIN_PATH:$FX/detectors; unset LD_LIBRARY_PATH
 ntcore c -- "$FX/cuda_workload")
page cuda "$(ls "$T"/c/*.html)"
"$PY" - "$T/cuda.dom" <<'PY' || fail "cuda workload page"
import json, sys
r = json.load(open(sys.argv[1]))
dom = json.loads(r["eval"][0])
errs = []
if r["errors"] or r["dialogs"] or not r["loaded"]:
    errs.append(f"errors {r['errors']} dialogs {r['dialogs']}")
missing = {"main", "train_step", "vector_add", "scale_kernel", "alloc_buffers",
           "cudaLaunchKernel", "cudaMalloc"} - set(dom["frames"])
if missing:
    errs.append(f"frames missing: {sorted(missing)}")
if not any(a.startswith("cudaMalloc returned cudaErrorMemoryAllocation") for a in dom["alerts"]):
    errs.append(f"alerts: {dom['alerts']}")
if "cudaStreamSynchronize" not in dom["calls"]:
    errs.append(f"calls table: {dom['calls']}")
if not any("ntcore_cuda_memory_bytes{device=0,kind=device}" in x and x.endswith("last 2.9 KiB")
           for x in dom["legend"]):
    errs.append(f"memory legend: {dom['legend']}")
if errs:
    sys.exit("\n".join(errs))
print(f"ok: {len(dom['frames'])} frames, {len(dom['alerts'])} alerts")
PY
echo "ok - cuda workload report: real stacks and alerts, no console error"
echo "PASS"
