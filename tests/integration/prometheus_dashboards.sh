#!/bin/bash
# SPDX-License-Identifier: MIT
# The Grafana dashboards in conf.d/grafana/ refer only to metrics that exist
# (a "ntcore_..." name literal in the sources of core/, plugins/ or sinks/;
# histogram _bucket/_sum/_count of such a name), every PromQL expression
# parses (promtool check rules), the JSON matches gen.py's output, and panel
# ids are unique. No root needed. Usage: prometheus_dashboards.sh [BUILD_ROOT]
set -euo pipefail
fail() { echo "FAIL: prometheus_dashboards: $*" >&2; exit 1; }
SRC=$(cd "$(dirname "$0")/../.." && pwd)
command -v promtool >/dev/null || fail "promtool missing (apt-get install prometheus)"
T=$(mktemp -d /tmp/nt-dash.XXXXXX)
trap 'rm -rf "$T"' EXIT

# 1. The committed JSON is what gen.py writes.
cp "$SRC"/conf.d/grafana/gen.py "$T/gen.py"
python3 "$T/gen.py"
for f in ntcore-gpu.json ntcore-host.json; do
	cmp -s "$T/$f" "$SRC/conf.d/grafana/$f" ||
		fail "conf.d/grafana/$f differs from what gen.py writes; run conf.d/grafana/gen.py"
done

# 2. Names and 3. a rules file for promtool.
python3 - "$SRC" "$T/rules.yml" <<'PY'
import glob, json, os, re, sys
src, rules = sys.argv[1], sys.argv[2]
known = set()
for pat in ("core/**/*.[ch]", "plugins/**/*.[ch]", "sinks/**/*.[ch]"):
    for path in glob.glob(os.path.join(src, pat), recursive=True):
        if "/testgen/" in path:
            continue
        with open(path, errors="replace") as f:
            known.update(re.findall(r'"(ntcore_[a-z0-9_]+)"', f.read()))
exprs, bad, ids = [], [], set()
for board in sorted(glob.glob(os.path.join(src, "conf.d/grafana/*.json"))):
    d = json.load(open(board))
    panels = []
    for p in d["panels"]:
        panels.append(p)
        panels.extend(p.get("panels", []))
    for p in panels:
        key = (board, p["id"])
        if key in ids:
            sys.exit("duplicate panel id %s in %s" % (p["id"], board))
        ids.add(key)
        g = p["gridPos"]
        if g["x"] + g["w"] > 24:
            sys.exit("panel %r of %s is wider than the grid" % (p["title"], board))
        for t in p.get("targets", []):
            exprs.append((os.path.basename(board), p["title"], t["expr"]))
    for v in d["templating"]["list"]:
        if v.get("definition"):
            m = re.search(r"label_values\((\w+)", v["definition"])
            if m:
                exprs.append((os.path.basename(board), "variable " + v["name"], m.group(1)))
for board, title, e in exprs:
    for name in set(re.findall(r"\bntcore_[a-z0-9_]+", e)):
        base = re.sub(r"_(bucket|sum|count)$", "", name)
        if name not in known and base not in known:
            bad.append("%s: %r uses %s" % (board, title, name))
if bad:
    sys.exit("metrics that no plugin registers:\n  " + "\n  ".join(bad))
with open(rules, "w") as f:
    f.write("groups:\n  - name: dashboards\n    rules:\n")
    for i, (board, title, e) in enumerate(exprs):
        e = (e.replace("$__rate_interval", "1m").replace("$__range", "1h")
              .replace("$instance", ".+"))
        f.write("      - record: dashboard:expr%d\n        expr: %s\n"
                % (i, json.dumps(e)))
print("%d expressions, %d known metric names" % (len(exprs), len(known)))
PY
out=$(promtool check rules "$T/rules.yml" 2>&1) || { echo "$out" >&2; fail "promtool rejects a dashboard expression"; }
echo "ok - dashboards: names exist, expressions parse, JSON up to date"
