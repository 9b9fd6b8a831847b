#!/usr/bin/env python3
"""patch_ffma.py on a synthetic object: a host ELF whose .nv_fatbin holds a cuda ELF with a
kernel text section of FFMA runs. Checks what each mode changes and what it must leave."""
import os
import struct
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import patch_ffma as P  # noqa: E402

REUSE_B = 1 << 59  # the reuse hint of the second source (the scale in the promotion)


def ffma(reuse):
    """An FFMA R,R,R with stall 1 and, as ptxas emits it, no-yield set where a reuse hint is."""
    lo = 0x000000D418CC7223
    hi = 0x000FC200000000CC | (P.YIELD_BIT | REUSE_B if reuse else 0)
    return struct.pack("<QQ", lo, hi)


def other():
    """A non-FFMA instruction (IMAD.MOV), reuse and no-yield bits set: never touched."""
    return struct.pack("<QQ", 0x000000FFFF007424, 0x000FE20000000F00 | P.YIELD_BIT | REUSE_B)


def elf(sections, machine):
    """A minimal ELF64 image with the named sections (name, bytes), section names in .shstrtab."""
    names = b"\0" + b"".join(n.encode() + b"\0" for n, _ in sections) + b".shstrtab\0"
    body, offsets, name_at = b"", [], 1
    data_start = 64
    for n, data in sections:
        offsets.append((name_at, data_start + len(body), len(data)))
        name_at += len(n) + 1
        body += data + b"\0" * (-len(data) % 16)
    shstr_off = data_start + len(body)
    body += names + b"\0" * (-len(names) % 16)
    shoff = data_start + len(body)
    head = bytearray(64)
    head[0:4] = P.ELF_MAGIC
    head[4] = 2  # 64-bit
    head[5] = 1  # little endian
    struct.pack_into("<H", head, 0x12, machine)
    struct.pack_into("<Q", head, 0x28, shoff)
    struct.pack_into("<HHH", head, 0x3A, 64, len(sections) + 2, len(sections) + 1)
    shdrs = bytes(64)  # the null section
    for name, off, size in offsets:
        shdrs += struct.pack("<IIQQQQIIQQ", name, 1, 0, 0, off, size, 0, 0, 16, 0)
    shdrs += struct.pack("<IIQQQQIIQQ", name_at, 3, 0, 0, shstr_off, len(names), 0, 0, 1, 0)
    return bytes(head) + body + shdrs


def host_object(text):
    cubin = elf([(".text._Z17wgmma_gemm_kernelPKh", text), (".text._Z5otherv", text)], P.EM_CUDA)
    fatbin = struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(cubin)) + bytes(96) + cubin
    return elf([(".text", b"\x90" * 16), (".nv_fatbin", fatbin)], 62)


def run_mode(obj, mode):
    with tempfile.TemporaryDirectory() as d:
        src, dst = os.path.join(d, "in.o"), os.path.join(d, "out.o")
        with open(src, "wb") as f:
            f.write(obj)
        tool = os.path.join(os.path.dirname(os.path.abspath(__file__)), "patch_ffma.py")
        p = subprocess.run([sys.executable, tool, "--mode", mode, src, dst], capture_output=True, text=True)
        if p.returncode != 0:
            return p.returncode, None, p.stderr
        with open(dst, "rb") as f:
            return 0, f.read(), p.stderr


def words(obj, start, count):
    return [struct.unpack_from("<QQ", obj, start + 16 * i) for i in range(count)]


class PatchFfma(unittest.TestCase):
    def setUp(self):
        # A promotion run of 20 FFMAs (every other one reused, one other instruction among
        # them), then a short run of 4 that is not a promotion.
        run = [ffma(i % 2 == 1) for i in range(10)] + [other()] + [ffma(i % 2 == 1) for i in range(10)]
        self.text = b"".join(run) + other() * 4 + b"".join(ffma(True) for _ in range(4))
        self.obj = host_object(self.text)
        self.at = self.obj.find(self.text)  # the kernel's section comes first in the cubin
        self.n = len(self.text) // 16

    def test_yield_clears_reuse_and_lets_every_run_ffma_yield(self):
        rc, out, err = run_mode(self.obj, "yield")
        self.assertEqual(rc, 0, err)
        self.assertEqual(len(out), len(self.obj))
        before, after = words(self.obj, self.at, self.n), words(out, self.at, self.n)
        for i in range(21):
            lo, hi = after[i]
            self.assertEqual(lo, before[i][0])  # the operation is never touched
            if i == 10:
                self.assertEqual(after[i], before[i], "a non-FFMA instruction changed")
            else:
                self.assertEqual(hi & (P.YIELD_BIT | P.REUSE_BITS), 0, i)
        self.assertEqual(after[21:], before[21:], "a short run or other instructions changed")
        # The other kernel's identical text is not this kernel's: untouched.
        self.assertEqual(out.count(self.text), 1)
        self.assertIn("1 FFMA runs, 10 instructions changed", err)

    def test_yield_half_changes_every_other_reused_ffma(self):
        rc, out, err = run_mode(self.obj, "yield_half")
        self.assertEqual(rc, 0, err)
        after = words(out, self.at, self.n)
        reused = [i for i in range(21) if i != 10 and (i if i < 10 else i - 11) % 2 == 1]
        changed = [i for i in reused if after[i][1] & P.REUSE_BITS == 0]
        self.assertEqual(changed, reused[0::2])

    def test_noyield_sets_no_yield_and_keeps_reuse(self):
        rc, out, err = run_mode(self.obj, "noyield")
        self.assertEqual(rc, 0, err)
        before, after = words(self.obj, self.at, self.n), words(out, self.at, self.n)
        for i in range(21):
            if i != 10:
                self.assertTrue(after[i][1] & P.YIELD_BIT, i)
                self.assertEqual(after[i][1] & P.REUSE_BITS, before[i][1] & P.REUSE_BITS, i)

    def test_fails_without_a_run_or_a_cubin(self):
        rc, _, err = run_mode(host_object(other() * 8), "yield")
        self.assertNotEqual(rc, 0)
        self.assertIn("0 FFMA runs", err)
        rc, _, err = run_mode(elf([(".text", b"\x90" * 16)], 62), "yield")
        self.assertNotEqual(rc, 0)
        self.assertIn("no sm_90 cubin", err)


if __name__ == "__main__":
    unittest.main(verbosity=2)
