#!/usr/bin/env python3
"""layout.py SRC_ROOT: the plugin folders' layout rules (issue 20, docs/
plugin-kit.md): in every folder under plugins/ and sinks/ (and their
sub-folders with a descriptor file), the descriptor file X/X.c holds at most
400 lines, and no C function (.c, .bpf.c) is longer than 80 lines, from its
signature to its closing brace (K&R layout: the body's braces at column 0).
Prints each breach as FILE:LINE and exits 1 when there is one."""
import os
import re
import sys

MAX_FN, MAX_DESC = 80, 400


def functions(path):
    """(name, lines, first line) of each function body in a C file."""
    lines = open(path, errors="replace").read().split("\n")
    i = 0
    while i < len(lines):
        if lines[i] == "{":
            j = i - 1  # back to the signature's first line
            while j > 0 and lines[j] and (lines[j][0] in " \t" or lines[j].startswith(")")):
                j -= 1
            k = i + 1
            while k < len(lines) and lines[k] != "}" and not lines[k].startswith("};"):
                k += 1
            name = re.findall(r"(\w+)\s*\(", lines[j])
            yield (name[0] if name else lines[j][:40]), k - j + 1, j + 1
            i = k
        i += 1


def main(root):
    bad = []
    for top in ("plugins", "sinks"):
        for folder, _, files in os.walk(os.path.join(root, top)):
            desc = os.path.join(folder, os.path.basename(folder) + ".c")
            if os.path.exists(desc):
                n = open(desc).read().count("\n")
                if n > MAX_DESC:
                    bad.append(f"{os.path.relpath(desc, root)}: {n} lines (descriptor and ops: at most {MAX_DESC})")
            for f in sorted(files):
                if not f.endswith(".c"):
                    continue
                path = os.path.join(folder, f)
                for name, n, line in functions(path):
                    if n > MAX_FN:
                        bad.append(f"{os.path.relpath(path, root)}:{line}: {name} is {n} lines (at most {MAX_FN})")
    for b in bad:
        print(b)
    print(f"layout: {len(bad)} breach(es) of the plugin folder rules")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
