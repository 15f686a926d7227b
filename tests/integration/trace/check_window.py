# SPDX-License-Identifier: MIT
"""Check a flight-recorder dump of the trace_gpufx busy mode: it decodes,
holds launches with their flows, and spans no more than the window (plus
one recorder chunk of slack). Usage: check_window.py DUMP WINDOW_S"""
import sys

import ptrace


def main(path, window_s):
    m = ptrace.load_perfetto(path)
    fl = ptrace.flows(m)
    calls = [s for s in m.slices if s.name == "cudaLaunchKernel"]
    if not fl or not calls:
        print(f"{path}: no launches or flows")
        sys.exit(1)
    first = min(s.ts for s in calls)
    last = max(s.ts for s in calls)
    span = (last - first) / 1e9
    if span > window_s + 1.0:
        print(f"{path}: spans {span:.2f} s, window {window_s} s")
        sys.exit(1)
    print(f"ok: {path.rsplit('/', 1)[-1]}: {len(calls)} launches, {len(fl)} flows, "
          f"{span:.2f} s (window {window_s} s)")


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]))
