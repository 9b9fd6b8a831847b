#!/usr/bin/env python3
"""Refits the tile-width cost model (best_width in kernels/wgmma/tile_rules.cc) to a
gemm_bench width sweep and reports how well each set of constants picks the width.

    gemm_bench --kernel wgmma --tile-n 16,32,64,128 > sweep.log      # on the GPU
    python3 tools/bench/fit_tile_model.py sweep.log [more.log ...] [--sms 132]

The model: a batch of tiles of `bm` rows and `tn` columns takes
    waves × (K blocks per tile) × (a + b·tn) + c   nanoseconds,
waves = ceil(tiles / SMs). It is linear in a, b and c, so they are fitted by least
squares on relative error (times span 20 µs to 5 ms). c is the same for every width of a
case, so it never changes a pick (the kernel leaves it out); it keeps the launch and first
loads out of a and b. Every (case, width) cell of the
sweep is one observation. The kernel's current constants (a=219, b=2.66, c=0) are scored
beside the fit: for each case the width the model picks, its measured time, and the
regret (that time / the case's fastest width).

Reads gemm_bench's text lines: 'case ... | ... | ratio kind=K  16:us 32:us ...' (older
logs have no kind=: ROWS128). Exits 2 when no line holds a width sweep.
"""
import math
import re
import sys

BK = 128
KIND_ROWS = {"rows128": 128, "tma_store": 128, "rows256": 256, "rows64": 64}
CURRENT = (219.0, 2.66, 0.0)


def case_groups(name):
    """(m, n, k) of every group of a gemm_bench case name, or None if unknown."""
    m = re.fullmatch(r"dense (\d+)x(\d+)x(\d+)", name)
    if m:
        return [tuple(int(x) for x in m.groups())]
    m = re.fullmatch(r"stacked (\d+)x(\d+) (\d+)x(\d+)", name)
    if m:
        g, rows, n, k = (int(x) for x in m.groups())
        return [(rows, n, k)] * g
    m = re.fullmatch(r"decode (\d+)x(\d+) own (\d+)x(\d+)", name)
    if m:
        g, rows, n, k = (int(x) for x in m.groups())
        return [(rows, n, k)] * g
    return None


def parse(paths):
    """[(case name, groups, bm, {width: µs})] from the logs' sweep cells."""
    cases = []
    for path in paths:
        with open(path) as f:
            for line in f:
                if "|" not in line:
                    continue
                name = re.split(r"\s{2,}", line.strip())[0]
                groups = case_groups(name)
                tail = line.rsplit("|", 1)[-1]
                widths = {int(w): float(us) for w, us in re.findall(r"(?<![/\w])(16|32|64|128):([0-9.]+)", tail)}
                if groups is None or len(widths) < 2:
                    continue
                kind = re.search(r"kind=(\w+)", tail)
                bm = KIND_ROWS.get(kind.group(1) if kind else "rows128")
                if bm is None:
                    continue
                cases.append((name, groups, bm, widths))
    return cases


def terms(groups, bm, tn, sms):
    """(waves × K blocks per tile, the same × tn): the model's two scaled terms."""
    tiles = sum(math.ceil(m / bm) * math.ceil(n / tn) for m, n, k in groups)
    kblocks = sum(math.ceil(m / bm) * math.ceil(n / tn) * math.ceil(k / BK) for m, n, k in groups)
    waves = math.ceil(tiles / sms)
    x = waves * kblocks / tiles
    return x, x * tn


def predict(consts, groups, bm, tn, sms):
    a, b, c = consts
    x, xt = terms(groups, bm, tn, sms)
    return a * x + b * xt + c


def pick(consts, groups, bm, widths, sms):
    """The width the model picks among the measured ones (ties to the wider, as the kernel)."""
    best, best_cost = None, None
    for tn in sorted(widths, reverse=True):
        cost = predict(consts, groups, bm, tn, sms)
        if best is None or cost < best_cost * 0.999:
            best, best_cost = tn, cost
    return best


def solve3(m, v):
    """x with m·x = v (3×3, Cramer's rule)."""
    def det(a):
        return (a[0][0] * (a[1][1] * a[2][2] - a[1][2] * a[2][1]) - a[0][1] * (a[1][0] * a[2][2] - a[1][2] * a[2][0])
                + a[0][2] * (a[1][0] * a[2][1] - a[1][1] * a[2][0]))
    d = det(m)
    return tuple(det([[v[r] if c == i else m[r][c] for c in range(3)] for r in range(3)]) / d for i in range(3))


def fit(cases, sms):
    """Least squares of Σ (model / time − 1)² over every (case, width): the normal equations."""
    ata = [[0.0] * 3 for _ in range(3)]
    atb = [0.0] * 3
    for _, groups, bm, widths in cases:
        for tn, us in widths.items():
            x, xt = terms(groups, bm, tn, sms)
            t = us * 1000.0
            row = (x / t, xt / t, 1.0 / t)
            for i in range(3):
                atb[i] += row[i]
                for j in range(3):
                    ata[i][j] += row[i] * row[j]
    return solve3(ata, atb)


def main(argv):
    sms = 132
    if "--sms" in argv:
        i = argv.index("--sms")
        sms = int(argv[i + 1])
        del argv[i : i + 2]
    cases = parse(argv)
    if not cases:
        print("fit_tile_model: no gemm_bench line with a width sweep (--tile-n) in " + " ".join(argv), file=sys.stderr)
        return 2
    fitted = fit(cases, sms)
    print(f"# {len(cases)} cases, {sum(len(c[3]) for c in cases)} (case, width) times, {sms} SMs")
    print(f"# fitted:  a = {fitted[0]:.1f} ns, b = {fitted[1]:.3f} ns per column, c = {fitted[2] / 1000:.2f} µs")
    print(f"# current: a = {CURRENT[0]:.1f} ns, b = {CURRENT[1]:.3f} ns per column, c = 0")
    print(f"{'case':36} {'bm':>4} {'best':>9} {'current':>14} {'fitted':>14}")
    regrets = {"current": [], "fitted": []}
    for name, groups, bm, widths in cases:
        best = min(widths, key=widths.get)
        cells = [f"{name:36} {bm:4} {best:4}:{widths[best]:<6.1f}"]
        for label, consts in (("current", CURRENT), ("fitted", fitted)):
            tn = pick(consts, groups, bm, widths, sms)
            regret = widths[tn] / widths[best]
            regrets[label].append(regret)
            cells.append(f"{tn:4}:{widths[tn]:<7.1f}{'' if tn == best else f'x{regret:.2f}':>6}")
        print(" ".join(cells))
    for label, r in regrets.items():
        geo = math.exp(sum(math.log(v) for v in r) / len(r))
        print(f"# {label}: picks the fastest width in {sum(v == 1.0 for v in r)} of {len(r)} cases; "
              f"time / fastest: geomean {geo:.3f}, worst {max(r):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
