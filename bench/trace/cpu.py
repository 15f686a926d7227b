# SPDX-License-Identifier: MIT
"""Run a command; print its user+system CPU seconds (and its children's)
and wall seconds as JSON on stdout, its own output to a file.
  cpu.py OUTFILE CMD ARGS..."""
import json
import os
import subprocess
import sys
import time

out = open(sys.argv[1], "w")
t0 = time.monotonic()
p = subprocess.Popen(sys.argv[2:], stdout=out, stderr=subprocess.STDOUT)
_, status, ru = os.wait4(p.pid, 0)
print(json.dumps({"cpu_s": ru.ru_utime + ru.ru_stime, "wall_s": time.monotonic() - t0,
                  "status": os.waitstatus_to_exitcode(status)}))
