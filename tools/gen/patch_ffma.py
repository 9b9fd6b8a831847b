#!/usr/bin/env python3
"""Rewrites the scheduling hints of the promotion FFMAs in a compiled sm_90a object.

    patch_ffma.py --mode yield|yield_half|noyield [--kernel SUBSTRING] in.o out.o

An experiment for issue 6 (docs/bench/kernels.md): the WGMMA kernel's promotion
(total += block * scale, 64 FFMAs per thread per K block at width 128) overlaps the other
warpgroup's WGMMAs only partly. Every SASS instruction carries control bits besides its
operation; two of them are hints the scheduler may take: "yield" (let another warp issue
next) and per-operand "reuse" (keep a source operand in the operand cache for the next
instruction). Changing hints cannot change results, only the order warps issue in.

The object's .nv_fatbin section holds the sm_90a cubin uncompressed (nvcc's default);
this finds it, and in the text sections of kernels whose name contains --kernel, finds
runs of register-form FFMAs (the promotion: at least MIN_RUN of them, at most MAX_GAP
other instructions between two) and rewrites, per --mode:
  yield       every FFMA of a run may yield: reuse hints cleared, yield allowed;
  yield_half  every other FFMA that has a reuse hint, the same;
  noyield     no FFMA of a run yields (reuse hints kept).
Bytes are rewritten in place, so every offset in the object stays valid. Fails when it
finds no cubin or no run, so a build whose code changed shape does not pass silently.

Encoding (128-bit instructions, the high 64-bit word): bits 41-44 stall count, bit 45
yield (0 = the warp may yield here; ptxas sets 1 on every instruction with a reuse hint,
since a yield drops the operand cache), bits 58-61 reuse hints. The operation's low 12
bits are 0x223 for FFMA with three register sources.
"""
import argparse
import struct
import sys

ELF_MAGIC = b"\x7fELF"
EM_CUDA = 190
FFMA_RRR = 0x223
YIELD_BIT = 1 << 45
REUSE_BITS = 0xF << 58
MIN_RUN = 16
MAX_GAP = 3


def sections(elf, base=0):
    """(name, offset, size) of every section of the ELF64 image at elf[base:]."""
    shoff = struct.unpack_from("<Q", elf, base + 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", elf, base + 0x3A)
    heads = []
    for i in range(shnum):
        name, _typ, _flags, _addr, off, size = struct.unpack_from("<IIQQQQ", elf, base + shoff + i * shentsize)
        heads.append((name, off, size))
    strtab = heads[shstrndx][1]
    out = []
    for name, off, size in heads:
        start = base + strtab + name
        out.append((bytes(elf[start:elf.index(b"\0", start)]).decode(), base + off, size))
    return out


def cubins(obj):
    """Offsets in `obj` of the sm_90 cubins inside its .nv_fatbin section."""
    fat = [(off, size) for name, off, size in sections(obj) if name == ".nv_fatbin"]
    if not fat:
        return []
    off, size = fat[0]
    found, at = [], off
    while True:
        at = obj.find(ELF_MAGIC, at, off + size)
        if at < 0:
            return found
        if obj[at + 4] == 2 and struct.unpack_from("<H", obj, at + 0x12)[0] == EM_CUDA:
            found.append(at)
        at += 4


def ffma_runs(text_off, text_size, obj):
    """Lists of instruction offsets, one list per run of register-form FFMAs."""
    runs, run, gap = [], [], 0
    for at in range(text_off, text_off + text_size - 15, 16):
        lo = struct.unpack_from("<Q", obj, at)[0]
        if lo & 0xFFF == FFMA_RRR:
            run.append(at)
            gap = 0
        else:
            gap += 1
            if run and gap > MAX_GAP:
                runs.append(run)
                run = []
    if run:
        runs.append(run)
    return [r for r in runs if len(r) >= MIN_RUN]


def patch(obj, mode, kernel):
    """Rewrites obj (a bytearray) in place; returns (runs, instructions changed)."""
    n_runs = changed = 0
    images = cubins(obj)
    if not images:
        raise SystemExit("patch_ffma: no sm_90 cubin in the object's .nv_fatbin (compressed?)")
    for base in images:
        for name, off, size in sections(obj, base):
            if not name.startswith(".text.") or kernel not in name:
                continue
            for run in ffma_runs(off, size, obj):
                n_runs += 1
                reused = 0
                for at in run:
                    hi = struct.unpack_from("<Q", obj, at + 8)[0]
                    new = hi
                    if mode == "noyield":
                        new = hi | YIELD_BIT
                    elif hi & REUSE_BITS:
                        reused += 1
                        if mode == "yield" or reused % 2 == 1:
                            new = hi & ~REUSE_BITS & ~YIELD_BIT
                    else:
                        new = hi & ~YIELD_BIT
                    if new != hi:
                        struct.pack_into("<Q", obj, at + 8, new)
                        changed += 1
    return n_runs, changed


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mode", required=True, choices=["yield", "yield_half", "noyield"])
    ap.add_argument("--kernel", default="wgmma_gemm_kernel")
    ap.add_argument("input")
    ap.add_argument("output")
    a = ap.parse_args()
    with open(a.input, "rb") as f:
        obj = bytearray(f.read())
    runs, changed = patch(obj, a.mode, a.kernel)
    if runs == 0 or changed == 0:
        raise SystemExit("patch_ffma: %d FFMA runs, %d instructions changed in kernels matching %r"
                         % (runs, changed, a.kernel))
    with open(a.output, "wb") as f:
        f.write(obj)
    print("patch_ffma: mode %s: %d FFMA runs, %d instructions changed" % (a.mode, runs, changed), file=sys.stderr)


if __name__ == "__main__":
    main()
