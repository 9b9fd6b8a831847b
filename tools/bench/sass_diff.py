#!/usr/bin/env python3
"""Compares the SASS of two builds of a kernel object, function by function, as the kernel
sessions do before they time a change (docs/bench/kernels.md, "Reading the kernel's SASS").

    python3 tools/bench/sass_diff.py A B            # A, B: `cuobjdump -sass` dumps or .o files
    python3 tools/bench/sass_diff.py --runs A [--function joint] [--op QGMMA]

The first form prints, per function of A: its instruction count in A and B, whether the
instruction text is the same (addresses and encodings ignored), and in each the QGMMAs, the
spill instructions (STL/LDL) and the mbarrier try-waits. The second prints the runs of an
instruction (QGMMA by default) in the functions whose name holds --function, with the gaps
between its members: how ptxas issued the WGMMAs. .o files go through `cuobjdump -sass`
(on PATH; PyPI's nvidia-cuda-cuobjdump has it).
"""
import argparse
import re
import subprocess
import sys


def read(path):
    """{function name: [(address, instruction text)]} from a dump or an object file."""
    if path.endswith(".o"):
        text = subprocess.run(["cuobjdump", "-sass", path], capture_output=True, text=True, check=True).stdout
    else:
        with open(path) as f:
            text = f.read()
    funcs, cur = {}, None
    for line in text.splitlines():
        m = re.search(r"Function : (\S+)", line)
        if m:
            cur = m.group(1)
            funcs[cur] = []
            continue
        m = re.search(r"/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;", line)
        if m and cur is not None:
            funcs[cur].append((int(m.group(1), 16), m.group(2).strip()))
    return funcs


def counts(ins):
    def has(pattern):
        return sum(1 for _, x in ins if re.search(pattern, x))
    return {"QGMMA": has(r"\bQGMMA\b"), "spills": has(r"\b(STL|LDL)\b"), "TRYWAIT": has(r"TRYWAIT")}


def stable_names(names):
    """{name: the name without its namespaces}: c++filt's demangled name less every `ns::`
    and `(anonymous namespace)::`, so a kernel pairs with itself across builds that moved it
    to another file or namespace (an anonymous namespace's mangled name holds the file's
    path and a hash). Without c++filt, the names as they are."""
    names = list(names)
    try:
        out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return {n: n for n in names}
    plain = [re.sub(r"(\(anonymous namespace\)|\w+)::", "", d) for d in out.splitlines()]
    return dict(zip(names, plain)) if len(plain) == len(names) else {n: n for n in names}


def compare(a, b):
    """Lines: (function, len a, len b, same, counts a, counts b). A function of A pairs with
    B's of the same name, else with B's of the same name less namespaces (stable_names)."""
    out = []
    sa, sb = stable_names(a), stable_names(b)
    by_stable = {}
    for name in b:
        by_stable.setdefault(sb[name], name)
    for name, ia in a.items():
        ib = b.get(name)
        if ib is None and sa[name] in by_stable:
            ib = b[by_stable[sa[name]]]
        same = ib is not None and [x for _, x in ia] == [x for _, x in ib]
        out.append((name, len(ia), None if ib is None else len(ib), same, counts(ia),
                    None if ib is None else counts(ib)))
    return out


def runs(ins, op="QGMMA", max_gap=60):
    """Runs of `op` (members at most max_gap instructions apart): [(first one's address,
    instructions between consecutive members)]."""
    idx = [i for i, (_, x) in enumerate(ins) if re.search(r"\b%s\b" % re.escape(op), x)]
    out, cur = [], idx[:1]
    for prev, nxt in zip(idx, idx[1:]):
        if nxt - prev <= max_gap:
            cur.append(nxt)
        else:
            out.append(cur)
            cur = [nxt]
    if cur:
        out.append(cur)
    return [(ins[r[0]][0], [y - x - 1 for x, y in zip(r, r[1:])]) for r in out]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("b", nargs="?")
    ap.add_argument("--runs", action="store_true")
    ap.add_argument("--function", default="")
    ap.add_argument("--op", default="QGMMA")
    args = ap.parse_args()
    a = read(args.a)
    if args.runs:
        for name, ins in a.items():
            if args.function in name:
                for first, gaps in runs(ins, args.op):
                    print("%s +0x%05x %d %s, gaps %s" % (name[-40:], first, len(gaps) + 1, args.op, gaps))
        return
    if args.b is None:
        sys.exit("two dumps to compare, or --runs")
    for name, na, nb, same, ca, cb in compare(a, read(args.b)):
        if nb is None:
            print("%-42s %6d %6s only in A" % (name[-42:], na, "-"))
            continue
        print("%-42s %6d %6d %-4s QGMMA %d/%d spills %d/%d TRYWAIT %d/%d" %
              (name[-42:], na, nb, "same" if same else "diff", ca["QGMMA"], cb["QGMMA"], ca["spills"],
               cb["spills"], ca["TRYWAIT"], cb["TRYWAIT"]))


if __name__ == "__main__":
    main()
