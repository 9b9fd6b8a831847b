#!/usr/bin/env python3
"""The rounds tile rule (kernels/wgmma/tile_rules.cc: choose_by_rounds) in Python, scored
against gemm_bench logs that timed every kind and width forced (--kinds ... --tile-n ...).

  python3 tools/bench/rounds_rule_model.py LOG... [--ps64 46]

For each single-group dense shape of >= 256 rows in the logs: the rule's kind and width, its
forced time, the fastest forced cell, and cuBLASLt's time; then the geomean and worst of
chosen / fastest, for the rule without ROWS128/64 (v24) and with it at the given price (v25).
Keep the candidate table in step with the kernel's (session 17 used it to price ROWS128/64).
"""
import argparse
import math
import re

SMS = 132
# kind, tile rows, width, paired (ROWS256 pairs on sms / 2 clusters), ps per output and K block
V24 = [("rows256", 256, 128, True, 27.0), ("rows256", 256, 96, True, 34.0),
       ("rows128", 128, 128, False, 31.0), ("wide", 128, 192, False, 35.0),
       ("wide", 128, 96, False, 39.0)]


def cdiv(a, b):
    return -(-a // b)


def load(paths):
    data = {}
    for path in paths:
        for line in open(path):
            m = re.match(r"dense (\d+)x(\d+)x(\d+)", line)
            if not m:
                continue
            cells = {(k, int(w)): float(t) for k, w, t in re.findall(r"(\w+)/(\d+):([\d.]+)", line)}
            if cells:
                data[tuple(map(int, m.groups()))] = (float(line.split("|")[1].split()[0]), cells)
    return data


def choose(m, n, k, cands):
    best = None
    for kind, bm, tn, paired, ps in cands:
        tiles = cdiv(m, bm) * cdiv(n, 2 * tn if paired else tn)
        rounds = cdiv(tiles, SMS // 2 if paired else SMS)
        cost = rounds * cdiv(k, 128) * bm * tn * ps
        if best is None or cost < best[2] * 0.999:
            best = (kind, tn, cost)
    return best[:2]


def score(data, cands, verbose):
    ratios = []
    for (m, n, k), (lt, cells) in sorted(data.items()):
        if m < 256 or n < 512:
            continue  # the old rule's batches
        kind, tn = choose(m, n, k, cands)
        fastest = min(cells.items(), key=lambda c: c[1])
        if (kind, tn) not in cells:
            print(f"{m}x{n}x{k}: {kind}/{tn} not timed")
            continue
        t = cells[(kind, tn)]
        ratios.append(t / fastest[1])
        if verbose:
            print(f"{m:5d}x{n}x{k:<5d} {kind}/{tn:<3d} {t:8.1f} us  fastest {fastest[0][0]}/{fastest[0][1]} "
                  f"{fastest[1]:8.1f} ({t / fastest[1]:.3f})  cuBLASLt {lt:8.1f} ({lt / t:.2f}x)")
    return math.exp(sum(map(math.log, ratios)) / len(ratios)), max(ratios)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("logs", nargs="+")
    ap.add_argument("--ps64", type=float, default=46.0)
    a = ap.parse_args()
    data = load(a.logs)
    for name, cands in (("v24", V24), (f"v25 (ROWS128/64 at {a.ps64} ps)", V24 + [("rows128", 128, 64, False, a.ps64)])):
        print(f"== {name}")
        g, worst = score(data, cands, True)
        print(f"chosen / fastest: geomean {g:.4f}, worst {worst:.3f}")


if __name__ == "__main__":
    main()
