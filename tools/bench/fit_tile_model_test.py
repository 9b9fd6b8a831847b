#!/usr/bin/env python3
"""fit_tile_model.py: it reads gemm_bench's sweep lines, recovers a model's constants from
times that model made, picks the fastest width, and scores the constants the kernel uses."""
import math
import os
import re
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import fit_tile_model as fm  # noqa: E402

# Two lines as gemm_bench prints them (the v3 run), one with kinds (session 5's format).
V3_LINES = """\
case                                 tn        us   TFLOPS     TB/s  check |     lt_us    lt_TF  lt_TB/s  check |   vs lt  [tile_n:us]
dense 8x7168x16384                   32      79.4     23.7     1.48     ok |      48.1     39.0     2.45     ok |   0.61x 16:132.6 32:79.8 64:56.8 128:72.5
decode 128x4 own 2048x2048          128     202.8     20.8     4.22     ok |     459.3      9.2     1.86     ok |   2.26x 16:1000.0 32:500.0 64:300.0 128:202.8
stacked 4x8192 4096x7168            128    2246.2   1004.1     0.31     ok |    1506.0   1497.4     0.47     ok |   0.67x prep=210.3/20.1us kind=rows256 rows128/128:2209.1 rows256/128:1910.6 64:2500.0 128:1910.6
dense 64x2112x7168                   16      24.2     80.1     0.66     ok |      18.1    107.2     0.88     ok |   0.75x
"""


TMP = tempfile.TemporaryDirectory()


def write(text):
    path = os.path.join(TMP.name, f"{len(os.listdir(TMP.name))}.log")
    with open(path, "w") as f:
        f.write(text)
    return path


class Parse(unittest.TestCase):
    def test_reads_cases_widths_and_kinds(self):
        cases = fm.parse([write(V3_LINES)])
        self.assertEqual([c[0] for c in cases], ["dense 8x7168x16384", "decode 128x4 own 2048x2048",
                                                 "stacked 4x8192 4096x7168"])
        name, groups, bm, widths = cases[0]
        self.assertEqual(groups, [(8, 7168, 16384)])
        self.assertEqual(bm, 128)
        self.assertEqual(widths, {16: 132.6, 32: 79.8, 64: 56.8, 128: 72.5})
        self.assertEqual(cases[1][1], [(4, 2048, 2048)] * 128)
        # kind/width cells are not widths; the batch's kind sets the rows
        self.assertEqual(cases[2][2], 256)
        self.assertEqual(cases[2][3], {64: 2500.0, 128: 1910.6})
        self.assertEqual(cases[2][1], [(8192, 4096, 7168)] * 4)

    def test_no_sweep_exits_2(self):
        self.assertEqual(fm.main([write(V3_LINES.splitlines()[-1] + "\n")]), 2)


class Fit(unittest.TestCase):
    def test_recovers_the_constants_that_made_the_times(self):
        truth = (250.0, 3.1, 4000.0)
        lines = []
        for m, n, k in [(8, 7168, 16384), (64, 2112, 7168), (128, 4096, 7168), (4096, 7168, 2048), (1, 24576, 1536)]:
            cells = " ".join(f"{tn}:{fm.predict(truth, [(m, n, k)], 128, tn, 132) / 1000:.4f}" for tn in (16, 32, 64, 128))
            lines.append(f"dense {m}x{n}x{k}    128  1.0  1.0  1.0  ok | 1.0 1.0 1.0 ok | 1.00x {cells}")
        cases = fm.parse([write("\n".join(lines) + "\n")])
        self.assertEqual(len(cases), 5)
        a, b, c = fm.fit(cases, 132)
        self.assertAlmostEqual(a / truth[0], 1.0, places=3)
        self.assertAlmostEqual(b / truth[1], 1.0, places=3)
        self.assertAlmostEqual(c / truth[2], 1.0, places=2)
        for name, groups, bm, widths in cases:
            self.assertEqual(fm.pick((a, b, c), groups, bm, widths, 132), min(widths, key=widths.get), name)

    def test_waves_and_blocks(self):
        # 8×7168×16384 at width 64: 112 tiles, one wave, 128 K blocks per tile
        self.assertEqual(fm.terms([(8, 7168, 16384)], 128, 64, 132), (128.0, 128.0 * 64))
        # at width 32: 224 tiles, two waves
        self.assertEqual(fm.terms([(8, 7168, 16384)], 128, 32, 132), (256.0, 256.0 * 32))


class Kernel(unittest.TestCase):
    def test_current_constants_are_the_kernels(self):
        with open(sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "../../kernels/wgmma/tile_rules.cc")) as f:
            src = f.read()
        m = re.search(r"\(([0-9.]+) \+ ([0-9.]+) \* tn\)", src)
        self.assertIsNotNone(m, "best_width's cost expression not found")
        self.assertEqual((float(m.group(1)), float(m.group(2))), fm.CURRENT[:2])


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
