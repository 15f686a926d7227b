#!/bin/bash
# The cuda probe against a binary with the CUDA runtime linked statically
# (libcudart_static.a of the toolkit): the probe finds the runtime inside
# the executable when the target execs it, attaches before the first
# instruction of main runs (the target is held with SIGSTOP meanwhile), and
# reports the failing cudaMalloc with its name. Root (BPF). Arg 1: build root.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
nt_test_init cuda "$@"
NT=$NTCORE
FX=$B/plugins/cuda
need_cuda_toolkit_lib "$FX/cuda_static_cudart" libcudart_static.a
if ldd "$FX/cuda_static_cudart" | grep -q libcudart; then
	fail "cuda_static_cudart links libcudart dynamically"
fi
nt_test_tmp nt-cuda-static
unset LD_LIBRARY_PATH

cat > "$T/c.conf" <<CONF
plugins = (
  { plugin = "cuda"; },
  { plugin = "file"; path = "$T/out.jsonl"; metrics = true; }
);
CONF
# Through a shell: the static binary is found at its exec, not at start-up.
timeout 60 "$NT" -c "$T/c.conf" -- sh -c 'exec "$0"' "$FX/cuda_static_cudart" \
	> "$T/out" 2> "$T/err" || { cat "$T/err" >&2; fail "ntcore failed"; }
line=$(grep '^cudaMalloc=' "$T/out") || { cat "$T/out" "$T/err" >&2; fail "no output from the workload"; }
code=${line#cudaMalloc=}; code=${code%% *}
name=${line##* }
[ "$code" != 0 ] || fail "cudaMalloc succeeded: is there a GPU? this test expects none"
python3 - "$T/out.jsonl" "$code" "$name" <<'PY' || { cat "$T/err" >&2; fail "static runtime not probed"; }
import json, sys
path, code, name = sys.argv[1], int(sys.argv[2]), sys.argv[3]
ev = [json.loads(l) for l in open(path)]
libs = [e for e in ev if e["type"] == "cuda.library" and e["is_static"] == 1]
errs = [e for e in ev if e["type"] == "cuda.error" and e["api_name"] == "cudaMalloc"]
if len(libs) != 1 or libs[0]["n_probes"] < 10 or libs[0]["version"] != "runtime (static)":
    print("static runtime library events:", libs); sys.exit(1)
if len(errs) != 1 or errs[0]["ret"] != code or errs[0]["error_name"] != name:
    print("cuda.error events:", errs); sys.exit(1)
print(f"ok: {libs[0]['path']} ({libs[0]['n_probes']} probes); cudaMalloc -> {code} {name}")
PY
echo "PASS"
