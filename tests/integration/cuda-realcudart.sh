#!/bin/bash
# The cuda probe against the real CUDA runtime of the toolkit installed on
# this machine (CUDA_HOME, default /usr/local/cuda), on a machine without a
# GPU: cudaMalloc fails, and the probe must report that error with the name
# the runtime itself gives it (cudaGetErrorName, printed by the workload).
# Root (BPF). Arg 1: build root.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
nt_test_init cuda "$@"
NT=$NTCORE
FX=$B/plugins/cuda
need_cuda_toolkit_lib "$FX/cuda_real_cudart" libcudart.so
nt_test_tmp nt-cuda-real
# No fixture driver on the library path: the real runtime looks for the
# real libcuda.so.1 and, on this GPU-less machine, does not find one.
unset LD_LIBRARY_PATH
lib=$(ldd "$FX/cuda_real_cudart" | awk '/libcudart\.so/ { print $3 }')
[ -n "$lib" ] && [ -f "$lib" ] || fail "cuda_real_cudart is not linked against a libcudart"
case $lib in "$B"/*) fail "cuda_real_cudart resolves the fixture runtime ($lib), not the toolkit's" ;; esac

cat > "$T/c.conf" <<CONF
plugins = (
  { plugin = "cuda"; stacks = true; },
  { plugin = "file"; path = "$T/out.jsonl"; metrics = true; }
);
CONF
timeout 60 "$NT" -c "$T/c.conf" -- "$FX/cuda_real_cudart" > "$T/out" 2> "$T/err" ||
	{ cat "$T/err" >&2; fail "ntcore failed"; }
line=$(grep '^cudaMalloc=' "$T/out") || { cat "$T/out" "$T/err" >&2; fail "no output from the workload"; }
code=${line#cudaMalloc=}; code=${code%% *}
name=${line##* }
[ "$code" != 0 ] || fail "cudaMalloc succeeded: is there a GPU? this test expects none"
python3 - "$T/out.jsonl" "$code" "$name" "$lib" <<'PY' || fail "the error was not reported as the runtime names it"
import json, sys
path, code, name, lib = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
ev = [json.loads(l) for l in open(path)]
errs = [e for e in ev if e["type"] == "cuda.error" and e["api_name"] == "cudaMalloc"]
libs = [e["path"] for e in ev if e["type"] == "cuda.library" and e["version"] == "runtime"]
ok = len(errs) == 1 and errs[0]["ret"] == code and errs[0]["error_name"] == name and errs[0]["layer"] == 1
if not ok:
    print("cuda.error events:", errs)
    sys.exit(1)
if "try_alloc" not in errs[0]["stack"].split(";"):
    print("error stack lacks try_alloc:", errs[0]["stack"]); sys.exit(1)
m = [e for e in ev if e["type"] == "metric" and e["name"] == "ntcore_cuda_api_errors_total"
     and e["labels"].get("error") == name]
if not m or m[-1]["value"] != 1:
    print("metric:", m); sys.exit(1)
print(f"ok: cudaMalloc -> {code} {name} from {lib}; probed runtimes: {libs}")
PY
echo "PASS"
