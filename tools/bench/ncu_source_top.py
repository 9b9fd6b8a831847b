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

STALLS = ["barrier", "branch_resolving", "dispatch", "long_sb", "math", "membar", "mio", "misc",
          "no_inst", "not_selected", "selected", "short_sb", "sleep", "wait", "lg"]


def num(s):
    try:
        return float(s)
    except ValueError:
        return 0.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("page")
    ap.add_argument("--by", default="samples", choices=["samples", "wavefronts", "executed"])
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args()
    col = {"samples": "Warp Stall Sampling (All Samples)", "wavefronts": "L1 Wavefronts Shared",
           "executed": "Instructions Executed"}[args.by]
    rows, header, kernel = [], None, ""
    with open(args.page, newline="") as f:
        for rec in csv.reader(f):
            if not rec:
                continue
            if rec[0] == "Kernel Name":
                kernel = rec[1]
                continue
            if rec[0] == "Address":
                header = {name: i for i, name in enumerate(rec)}
                continue
            if header is None:
                continue
            rows.append(rec)
    if not rows:
        sys.exit("no instructions in " + args.page)
    base = int(rows[0][header["Address"]], 16)
    total = sum(num(r[header[col]]) for r in rows) or 1.0
    samples_total = sum(num(r[header["Warp Stall Sampling (All Samples)"]]) for r in rows)
    print("kernel %s: %d instructions; %s total %.0f; stall samples %.0f" %
          (kernel, len(rows), col, total, samples_total))
    rows.sort(key=lambda r: -num(r[header[col]]))
    for r in rows[:args.top]:
        v = num(r[header[col]])
        stalls = sorted(((num(r[header["stall_" + s]]), s) for s in STALLS if "stall_" + s in header),
                        reverse=True)
        top = " ".join("%s:%.0f" % (s, n) for n, s in stalls[:3] if n > 0)
        print("%5.1f%% %12.0f +0x%05x exec %9.0f  %-38s %s" %
              (100 * v / total, v, int(r[header["Address"]], 16) - base,
               num(r[header["Instructions Executed"]]), top, r[header["Source"]].strip()))


if __name__ == "__main__":
    main()
