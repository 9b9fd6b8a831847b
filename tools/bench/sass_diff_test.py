#!/usr/bin/env python3
"""sass_diff.py: it reads cuobjdump's SASS listing per function, tells same from different
instruction text (addresses and encodings aside), counts QGMMAs, spills and try-waits, and
finds the runs of QGMMAs with the gaps between them."""
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import sass_diff as sd  # noqa: E402


def listing(funcs):
    """A listing in cuobjdump -sass's layout: {name: [instruction]}, 16 bytes apart."""
    lines = ["", "Fatbin elf code:", "================", "arch = sm_90a", ""]
    for name, ins in funcs.items():
        lines.append("        Function : %s" % name)
        lines.append("    .headerflags    @\"EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)\"")
        for i, x in enumerate(ins):
            lines.append("        /*%04x*/                   %s ;   /* 0x000fe20000000f00 */" % (16 * i, x))
            lines.append("                                                   /* 0x000fc40000000000 */")
    f = tempfile.NamedTemporaryFile("w", suffix=".sass", delete=False)
    f.write("\n".join(lines) + "\n")
    f.close()
    return f.name


LOOP = ["S2R R0, SR_TID.X", "QGMMA.64x128x32.F32.E4M3.E4M3 R24, gdesc[UR32], RZ, !UPT", "UIADD3 UR28, UR20, 0x2, URZ",
        "QGMMA.64x128x32.F32.E4M3.E4M3 R24, gdesc[UR28], R24",
        "QGMMA.64x128x32.F32.E4M3.E4M3 R24, gdesc[UR24], R24, gsb0"] + ["FFMA R1, R2, R3, R1"] * 70 + [
        "QGMMA.64x128x32.F32.E4M3.E4M3 R24, gdesc[UR32], RZ, !UPT", "EXIT"]


class SassDiff(unittest.TestCase):
    def test_reads_functions_with_addresses(self):
        funcs = sd.read(listing({"k1": LOOP, "k2": ["EXIT"]}))
        self.assertEqual(list(funcs), ["k1", "k2"])
        self.assertEqual(funcs["k1"][1], (0x10, "QGMMA.64x128x32.F32.E4M3.E4M3 R24, gdesc[UR32], RZ, !UPT"))
        self.assertEqual(funcs["k2"], [(0, "EXIT")])

    def test_same_different_and_counts(self):
        spilled = LOOP[:-1] + ["STL [R1], R2", "LDL R2, [R1]", "SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [UR4], R2", "EXIT"]
        a = sd.read(listing({"k1": LOOP, "k2": ["EXIT"], "k3": ["NOP"]}))
        b = sd.read(listing({"k1": spilled, "k2": ["EXIT"]}))
        lines = {line[0]: line for line in sd.compare(a, b)}
        self.assertEqual(lines["k2"][1:4], (1, 1, True))
        name, na, nb, same, ca, cb = lines["k1"]
        self.assertEqual((na, nb, same), (len(LOOP), len(LOOP) + 3, False))
        self.assertEqual(ca, {"QGMMA": 4, "spills": 0, "TRYWAIT": 0})
        self.assertEqual(cb, {"QGMMA": 4, "spills": 2, "TRYWAIT": 1})
        self.assertIsNone(lines["k3"][2])  # only in A

    def test_pairs_functions_across_namespaces(self):
        # The same kernel in an anonymous namespace (its mangled name holds the file) and in
        # gemmd::wgmma pairs up; a kernel of another name does not.
        old = "_ZN51_GLOBAL__N__fbc4a741_18_sm90_gemm_wgmma_cu_b34d92ba23wgmma_gemm_kernel_jointEPKhPf"
        new = "_ZN5gemmd5wgmma23wgmma_gemm_kernel_jointEPKhPf"
        a = sd.read(listing({old: LOOP, "k9": ["EXIT"]}))
        b = sd.read(listing({new: LOOP}))
        lines = {line[0]: line for line in sd.compare(a, b)}
        if sd.stable_names([new])[new] != new:  # c++filt is there
            self.assertEqual(lines[old][1:4], (len(LOOP), len(LOOP), True))
        self.assertIsNone(lines["k9"][2])

    def test_qgmma_runs_and_gaps(self):
        funcs = sd.read(listing({"k1": LOOP}))
        self.assertEqual(sd.runs(funcs["k1"]), [(0x10, [1, 0]), (0x10 * 75, [])])

    def test_cli(self):
        tool = os.path.join(HERE, "sass_diff.py")
        a, b = listing({"k1": LOOP}), listing({"k1": LOOP})
        out = subprocess.run([sys.executable, tool, a, b], capture_output=True, text=True, check=True).stdout
        self.assertIn("same", out)
        out = subprocess.run([sys.executable, tool, "--runs", a, "--function", "k1"], capture_output=True, text=True,
                             check=True).stdout
        self.assertIn("+0x00010 3 QGMMA, gaps [1, 0]", out)
        bad = subprocess.run([sys.executable, tool, a], capture_output=True, text=True)
        self.assertNotEqual(bad.returncode, 0)


if __name__ == "__main__":
    unittest.main()
