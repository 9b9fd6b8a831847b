#!/usr/bin/env python3
"""Reads an ncu source page exported as CSV (`ncu --import R --page source --print-source sass
--csv`) and prints, for the profiled kernel, the SASS instructions that take the most of a
column: warp-stall samples, shared-memory wavefronts, instructions executed.

    python3 tools/bench/ncu_source_top.py PAGE.csv [--by samples|wavefronts|executed] [--top N]

Each line: the column's share of the kernel's total, the instruction's count, its address
offset from the kernel's start, its top stall reasons (of the samples) and the SASS text.
"""
import argparse
import csv
import sys

COLUMNS = {"samples": "Warp Stall Sampling (All Samples)", "wavefronts": "L1 Wavefronts Shared",
           "executed": "Instructions Executed"}
STALLS = ["barrier", "branch_resolving", "dispatch", "long_sb", "math", "membar", "mio", "misc",
          "no_inst", "not_selected", "selected", "short_sb", "sleep", "wait", "lg"]


def num(s):
    try:
        return float(s)
    except ValueError:
        return 0.0


def read_page(path):
    """The kernel's name and its instructions, each a dict by column name."""
    rows, header, kernel = [], None, ""
    with open(path, newline="") as f:
        for rec in csv.reader(f):
            if not rec:
                continue
            if rec[0] == "Kernel Name":
                kernel = rec[1]
            elif rec[0] == "Address":
                header = rec
            elif header is not None:
                rows.append(dict(zip(header, rec)))
    return kernel, rows


def top(rows, by, n):
    """The n instructions with the most of column `by`: (share, value, offset, executed,
    top stall reasons, SASS), and the column's total."""
    col = COLUMNS[by]
    base = int(rows[0]["Address"], 16)
    total = sum(num(r.get(col, "")) for r in rows) or 1.0
    out = []
    for r in sorted(rows, key=lambda r: -num(r.get(col, "")))[:n]:
        v = num(r.get(col, ""))
        stalls = sorted(((num(r.get("stall_" + s, "")), s) for s in STALLS), reverse=True)
        out.append((v / total, v, int(r["Address"], 16) - base, num(r.get("Instructions Executed", "")),
                    [(s, c) for c, s in stalls[:3] if c > 0], r["Source"].strip()))
    return out, total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("page")
    ap.add_argument("--by", default="samples", choices=sorted(COLUMNS))
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args()
    kernel, rows = read_page(args.page)
    if not rows:
        sys.exit("no instructions in " + args.page)
    lines, total = top(rows, args.by, args.top)
    samples = sum(num(r.get(COLUMNS["samples"], "")) for r in rows)
    print("kernel %s: %d instructions; %s total %.0f; stall samples %.0f" %
          (kernel, len(rows), COLUMNS[args.by], total, samples))
    for share, v, off, executed, stalls, sass in lines:
        reasons = " ".join("%s:%.0f" % (s, c) for s, c in stalls)
        print("%5.1f%% %12.0f +0x%05x exec %9.0f  %-38s %s" % (100 * share, v, off, executed, reasons, sass))


if __name__ == "__main__":
    main()
