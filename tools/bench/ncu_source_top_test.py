#!/usr/bin/env python3
"""ncu_source_top.py: it reads ncu's source page (CSV), ranks the kernel's instructions by a
column, gives their shares, offsets and top stall reasons, and refuses an empty page."""
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import ncu_source_top as nst  # noqa: E402

# The page's shape as `ncu --page source --print-source sass --csv` writes it (columns cut to
# the ones the tool reads, plus one it ignores).
PAGE = '''"Kernel Name","k(const unsigned char *, float *)",
"Address","Source","Warp Stall Sampling (All Samples)","Instructions Executed","L1 Wavefronts Shared","stall_barrier","stall_short_sb","stall_wait","stall_selected","Ignored"
"0x7f0000000000","      LDC R1, c[0x0][0x28]","2","10","0","0","0","0","2","x"
"0x7f0000000010","      QGMMA.64x128x32.F32.E4M3.E4M3 R24, gdesc[UR32], RZ, !UPT","5","100","1200","0","0","4","1","x"
"0x7f0000000020","      LDS R227, [R226+0x24000]","3","100","100","0","3","0","0","x"
"0x7f0000000030","      WARPGROUP.DEPBAR.LE gsb0, 0x0","10","100","0","9","0","0","1","x"
'''


def page(text):
    f = tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False)
    f.write(text)
    f.close()
    return f.name


class Top(unittest.TestCase):
    def test_reads_the_kernel_and_its_instructions(self):
        kernel, rows = nst.read_page(page(PAGE))
        self.assertEqual(kernel, "k(const unsigned char *, float *)")
        self.assertEqual(len(rows), 4)
        self.assertEqual(rows[2]["Source"].strip(), "LDS R227, [R226+0x24000]")

    def test_ranks_by_samples_with_shares_offsets_and_reasons(self):
        _, rows = nst.read_page(page(PAGE))
        lines, total = nst.top(rows, "samples", 2)
        self.assertEqual(total, 20)
        share, value, offset, executed, stalls, sass = lines[0]
        self.assertAlmostEqual(share, 0.5)
        self.assertEqual((value, offset, executed), (10, 0x30, 100))
        self.assertEqual(stalls, [("barrier", 9), ("selected", 1)])
        self.assertTrue(sass.startswith("WARPGROUP.DEPBAR"))
        self.assertEqual(lines[1][2], 0x10)  # the QGMMA, 5 samples

    def test_ranks_by_wavefronts(self):
        _, rows = nst.read_page(page(PAGE))
        lines, total = nst.top(rows, "wavefronts", 3)
        self.assertEqual(total, 1300)
        self.assertEqual([line[1] for line in lines], [1200, 100, 0])
        self.assertAlmostEqual(lines[0][0], 1200 / 1300)

    def test_cli_prints_and_refuses_an_empty_page(self):
        tool = os.path.join(HERE, "ncu_source_top.py")
        out = subprocess.run([sys.executable, tool, page(PAGE), "--by", "executed", "--top", "1"],
                             capture_output=True, text=True, check=True).stdout
        self.assertIn("4 instructions", out)
        self.assertIn("+0x00010", out)  # the first of the three with 100 executions
        empty = subprocess.run([sys.executable, tool, page('"Kernel Name","k",\n')], capture_output=True, text=True)
        self.assertNotEqual(empty.returncode, 0)
        self.assertIn("no instructions", empty.stderr)


if __name__ == "__main__":
    unittest.main()
