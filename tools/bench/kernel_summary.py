#!/usr/bin/env python3
"""Issue 6's summary of a gemm_bench table (stdout or --csv): geometric means per set.
   python3 tools/bench/kernel_summary.py bench.txt [more.txt ...]"""
import math
import re
import sys


def rows(path):
    for line in open(path):
        m = re.match(r"^(dense|stacked|decode) (.+?)\s{2,}(\d+\s+)?([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\S+) \|\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(.+?) \|\s+([\d.]+)x", line)
        if m:
            yield {"kind": m.group(1), "shape": m.group(2).strip(), "us": float(m.group(4)),
                   "tflops": float(m.group(5)), "tbps": float(m.group(6)), "lt_us": float(m.group(8)),
                   "ratio": float(m.group(12))}


def geo(xs):
    xs = [x for x in xs if x > 0]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")


for path in sys.argv[1:]:
    rs = list(rows(path))
    def m_of(r):
        return int(r["shape"].split("x")[0]) if r["kind"] == "dense" else None
    big = [r for r in rs if r["kind"] == "dense" and m_of(r) == 4096]
    small = [r for r in rs if r["kind"] == "dense" and m_of(r) in (64, 128)]
    tiny = [r for r in rs if r["kind"] == "dense" and m_of(r) in (1, 8, 16)]
    target = [r for r in big if r["shape"].startswith("4096x7168x16384")]
    print(path)
    print("  M=4096 set: %.2fx cuBLASLt (geomean, target >= 1.10), %.0f TFLOPS geomean; 4096x7168x16384: %.0f TFLOPS (target >= 1500)"
          % (geo([r["ratio"] for r in big]), geo([r["tflops"] for r in big]), target[0]["tflops"] if target else float("nan")))
    print("  M in {64,128}: %.2fx cuBLASLt (target >= 1.3), %.2f TB/s geomean (target >= 3.0)"
          % (geo([r["ratio"] for r in small]), geo([r["tbps"] for r in small])))
    print("  M in {1,8,16}: %.2fx cuBLASLt where it runs, %.2f TB/s geomean"
          % (geo([r["ratio"] for r in tiny]), geo([r["tbps"] for r in tiny])))
    for r in rs:
        if r["kind"] == "decode":
            print("  decode %s: %.2f TB/s (target >= 3.8), %.2fx cuBLASLt" % (r["shape"], r["tbps"], r["ratio"]))
