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
            sol = re.search(r" sol=([\d.]+)us", line)
            yield {"kind": m.group(1), "shape": m.group(2).strip(), "us": float(m.group(4)),
                   "tflops": float(m.group(5)), "tbps": float(m.group(6)), "lt_us": float(m.group(8)),
                   "ratio": float(m.group(12)), "sol_us": float(sol.group(1)) if sol else None}


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
    # gemm_bench --sol: the memory floor (the same bytes moved by a plain launch).
    for name, rset in (("M=4096", big), ("M in {64,128}", small), ("M in {1,8,16}", tiny),
                       ("decode", [r for r in rs if r["kind"] == "decode"])):
        floors = [r for r in rset if r["sol_us"]]
        if floors:
            print("  %s memory floor (--sol): %.2f TB/s geomean; ours at %.2fx its time, cuBLASLt %.2fx (geomean)"
                  % (name, geo([r["tbps"] * r["us"] / r["sol_us"] for r in floors]),
                     geo([r["us"] / r["sol_us"] for r in floors]),
                     geo([r["lt_us"] / r["sol_us"] for r in floors if r["lt_us"] > 0])))
    for r in rs:
        if r["kind"] == "decode":
            print("  decode %s: %.2f TB/s (target >= 3.8), %.2fx cuBLASLt" % (r["shape"], r["tbps"], r["ratio"]))
