#!/usr/bin/env python3
"""Writes the seed corpus of every fuzz target under fuzz/corpus/<target>/: small valid
inputs and near-valid ones (one field off), in each target's input format (see the
comment at the top of fuzz/<target>_fuzz.c). Standard library only; deterministic.

    python3 fuzz/make_corpus.py            # rewrites fuzz/corpus/
"""
import json
import os
import shutil
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")

# gemm.proto numbers (DType, ScaleLayout) and shm_v1.h opcodes.
E4M3, E5M2, BF16, FP16, FP32 = 1, 2, 3, 4, 5
NONE, TENSOR, ROW, BLOCK_1X128, BLOCK_128X128 = 0, 1, 2, 3, 4
OP_GEMM, OP_REGISTER, OP_UNREGISTER, OP_INFO = 1, 2, 3, 4
ESZ = {E4M3: 1, E5M2: 1, BF16: 2, FP16: 2, FP32: 4}


def write(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def pattern(n, salt=0):
    """n bytes that are finite values in every dtype (small, positive)."""
    return bytes((0x30 + (i * 7 + salt) % 16) for i in range(n))


def floats(vals):
    return struct.pack("<%df" % len(vals), *vals)


# ---- shared memory: HELLO ---------------------------------------------------------------

def hello(magic=b"GEMMDSH1", version=1, flags=0, arena=0, entries=0, reserved=0):
    return magic + struct.pack("<IIQII", version, flags, arena, entries, reserved)


def shm_hello():
    write("shm_hello", "default", hello())
    write("shm_hello", "small", hello(arena=1 << 20, entries=8))
    write("shm_hello", "largest", hello(arena=1 << 36, entries=65536))
    write("shm_hello", "v2", hello(version=2))
    write("shm_hello", "flags", hello(flags=1))
    write("shm_hello", "reserved", hello(reserved=0x80000000))
    write("shm_hello", "entries_7", hello(entries=7))
    write("shm_hello", "entries_12", hello(entries=12))
    write("shm_hello", "arena_unaligned", hello(arena=(1 << 20) + 1))
    write("shm_hello", "arena_too_small", hello(arena=8192, entries=8))
    write("shm_hello", "arena_too_large", hello(arena=(1 << 36) + 4096))
    write("shm_hello", "short", hello()[:31])
    write("shm_hello", "long", hello() + b"\0")
    write("shm_hello", "magic", hello(magic=b"GEMMDSH2"))


# ---- shared memory: control messages (version 2) ------------------------------------------

def ctl(op=1, kind=1, nbytes=1 << 20, tag=7, region_id=0, reserved0=0, handle=b"", reserved1=b"",
        truncated=0):
    m = struct.pack("<IIQQII", op, kind, nbytes, tag, region_id, reserved0)
    m += handle.ljust(64, b"\0") + reserved1.ljust(32, b"\0")
    assert len(m) == 128
    return bytes([truncated]) + m


def shm_control():
    write("shm_control", "open_fd", ctl())
    write("shm_control", "open_ipc", ctl(kind=2, handle=bytes(range(64))))
    write("shm_control", "close", ctl(op=2, kind=0, nbytes=0, region_id=3))
    write("shm_control", "op_unknown", ctl(op=3))
    write("shm_control", "kind_unknown", ctl(kind=9))
    write("shm_control", "reserved0", ctl(reserved0=1))
    write("shm_control", "reserved1", ctl(reserved1=b"\0" * 31 + b"\1"))
    write("shm_control", "truncated", ctl(truncated=1))
    write("shm_control", "short", ctl()[:100])
    write("shm_control", "long", ctl() + b"\0")


# ---- shared memory: ring entries ----------------------------------------------------------

DATA_OFFSET = 4096 + 2 * 8 * 128  # shm_entry_fuzz.c: the data region's offset


def sqe(opcode, a_dtype=0, a_layout=0, out_dtype=0, b_source=0, b_dtype=0, b_layout=0, m=0, n=0,
        k=0, timeout_us=0, request_id=1, weight_id=0, a_off=0, a_scales_off=0, b_off=0,
        b_scales_off=0, d_off=0, d_cap=0, reserved0=0, reserved1=b""):
    e = struct.pack("<8B4IQQ6Q", opcode, a_dtype, a_layout, out_dtype, b_source, b_dtype, b_layout,
                    reserved0, m, n, k, timeout_us, request_id, weight_id, a_off, a_scales_off,
                    b_off, b_scales_off, d_off, d_cap)
    e += reserved1.ljust(40, b"\0")
    assert len(e) == 128
    return e


class Region:
    """The data region of an entry input: pieces placed at increasing offsets."""

    def __init__(self):
        self.data = bytearray()

    def put(self, b, align=16):
        while len(self.data) % align:
            self.data.append(0)
        off = DATA_OFFSET + len(self.data)
        self.data += b
        return off

    def room(self, n):
        return self.put(bytes(n))


def entry(name, e, region, settings=0):
    write("shm_entry", name, e + bytes([settings]) + bytes(region.data))


def shm_entry():
    # GEMM with registered weight 1 (16 x 32): A 4 x 32 E4M3, D 4 x 16 BF16.
    r = Region()
    a = r.put(pattern(4 * 32))
    d = r.room(4 * 16 * 2)
    entry("gemm_weight", sqe(OP_GEMM, E4M3, NONE, m=4, k=32, weight_id=1, a_off=a, d_off=d,
                             d_cap=4 * 16 * 2), r)
    entry("gemm_weight_d_short", sqe(OP_GEMM, E4M3, NONE, m=4, k=32, weight_id=1, a_off=a, d_off=d,
                                     d_cap=4 * 16 * 2 - 1), r)
    entry("gemm_weight_missing", sqe(OP_GEMM, E4M3, NONE, m=4, k=32, weight_id=9, a_off=a, d_off=d,
                                     d_cap=128), r)
    entry("gemm_a_below_region", sqe(OP_GEMM, E4M3, NONE, m=4, k=32, weight_id=1, a_off=DATA_OFFSET - 64,
                                     d_off=d, d_cap=128), r)
    entry("gemm_reserved", sqe(OP_GEMM, E4M3, NONE, m=4, k=32, weight_id=1, a_off=a, d_off=d, d_cap=128,
                               reserved1=b"\1"), r)
    # Weight 2 (130 x 256, 128x128 scales): A 2 x 256 E4M3 with 1x128 scales, D FP32.
    r = Region()
    a = r.put(pattern(2 * 256))
    sa = r.put(floats([1.0, 0.5, 0.25, 2.0]))
    d = r.room(2 * 130 * 4)
    entry("gemm_weight_blocks", sqe(OP_GEMM, E4M3, BLOCK_1X128, FP32, m=2, k=256, weight_id=2, a_off=a,
                                    a_scales_off=sa, d_off=d, d_cap=2 * 130 * 4), r)
    entry("gemm_scales_unaligned", sqe(OP_GEMM, E4M3, BLOCK_1X128, FP32, m=2, k=256, weight_id=2, a_off=a,
                                       a_scales_off=sa + 2, d_off=d, d_cap=2 * 130 * 4), r)
    # The same in a version-2 session, A, its scales and D in region 1 (the data bytes).
    in_region = struct.pack("<III", 1, 1, 1)
    entry("gemm_regions_v2", sqe(OP_GEMM, E4M3, BLOCK_1X128, FP32, m=2, k=256, weight_id=2, a_off=a - DATA_OFFSET,
                                 a_scales_off=sa - DATA_OFFSET, d_off=d - DATA_OFFSET, d_cap=2 * 130 * 4,
                                 reserved1=in_region), r, settings=4)
    entry("gemm_regions_v2_d_past", sqe(OP_GEMM, E4M3, BLOCK_1X128, FP32, m=2, k=256, weight_id=2,
                                        a_off=a - DATA_OFFSET, a_scales_off=sa - DATA_OFFSET, d_off=d - DATA_OFFSET + 8,
                                        d_cap=2 * 130 * 4, reserved1=in_region), r, settings=4)
    entry("gemm_regions_v1", sqe(OP_GEMM, E4M3, BLOCK_1X128, FP32, m=2, k=256, weight_id=2, a_off=a - DATA_OFFSET,
                                 a_scales_off=sa - DATA_OFFSET, d_off=d - DATA_OFFSET, d_cap=2 * 130 * 4,
                                 reserved1=in_region), r)
    # Inline B: A 4 x 64 BF16 (quantized, or raw for an engine that quantizes), B 8 x 64 E4M3
    # with one tensor scale, D FP16.
    r = Region()
    a = r.put(pattern(4 * 64 * 2))
    b = r.put(pattern(8 * 64, 3))
    sb = r.put(floats([0.5]))
    d = r.room(4 * 8 * 2)
    e = sqe(OP_GEMM, BF16, NONE, FP16, 1, E4M3, TENSOR, m=4, n=8, k=64, a_off=a, b_off=b, b_scales_off=sb,
            d_off=d, d_cap=4 * 8 * 2)
    entry("gemm_inline", e, r)
    entry("gemm_inline_raw_a", e, r, settings=1)
    # Inline BF16 B (quantized to E4M3 128x128), A E5M2 with row scales.
    r = Region()
    a = r.put(pattern(3 * 40))
    sa = r.put(floats([1.0, 2.0, 0.5]))
    b = r.put(pattern(5 * 40 * 2, 1))
    d = r.room(3 * 5 * 2)
    entry("gemm_inline_bf16", sqe(OP_GEMM, E5M2, ROW, BF16, 1, BF16, NONE, m=3, n=5, k=40, a_off=a,
                                  a_scales_off=sa, b_off=b, d_off=d, d_cap=3 * 5 * 2), r)
    entry("gemm_b_source_2", sqe(OP_GEMM, E5M2, ROW, BF16, 2, BF16, NONE, m=3, n=5, k=40, a_off=a,
                                 a_scales_off=sa, b_off=b, d_off=d, d_cap=30), r)
    # REGISTER_WEIGHT: 8 x 16 E4M3 with row scales; a BF16 one; a name with a NUL.
    r = Region()
    w = r.put(pattern(8 * 16))
    sw = r.put(floats([1.0] * 8))
    name = r.put(b"fuzz-weight")
    entry("register", sqe(OP_REGISTER, E4M3, ROW, m=8, k=16, a_off=w, a_scales_off=sw, d_off=name,
                          d_cap=11), r)
    entry("register_over_budget", sqe(OP_REGISTER, E4M3, ROW, m=8, k=16, a_off=w, a_scales_off=sw,
                                      d_off=name, d_cap=11), r, settings=2)
    entry("register_name_nul", sqe(OP_REGISTER, E4M3, ROW, m=8, k=16, a_off=w, a_scales_off=sw,
                                   d_off=name, d_cap=12), r)
    r = Region()
    w = r.put(pattern(4 * 130 * 2))
    name = r.put(b"bf16")
    entry("register_bf16", sqe(OP_REGISTER, BF16, NONE, m=4, k=130, a_off=w, d_off=name, d_cap=4), r)
    entry("register_layout_1x128", sqe(OP_REGISTER, BF16, BLOCK_1X128, m=4, k=130, a_off=w, d_off=name,
                                       d_cap=4), r)
    # WEIGHT_INFO by id, by name, by a name not registered; UNREGISTER; an unknown opcode.
    r = Region()
    n1 = r.put(b"w1")
    n9 = r.put(b"nope")
    entry("info_id", sqe(OP_INFO, weight_id=2), r)
    entry("info_name", sqe(OP_INFO, d_off=n1, d_cap=2), r)
    entry("info_name_missing", sqe(OP_INFO, d_off=n9, d_cap=4), r)
    entry("info_name_outside", sqe(OP_INFO, d_off=n9, d_cap=255), r)
    entry("unregister", sqe(OP_UNREGISTER, weight_id=1), r)
    entry("opcode_9", sqe(9), r)


# ---- protobuf (gemm.proto), by hand ---------------------------------------------------------

def varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field_varint(num, v):
    return varint(num << 3) + varint(v) if v else b""


def field_bytes(num, b):
    return varint(num << 3 | 2) + varint(len(b)) + b


def matrix(rows, cols, dtype, data=None, layout=NONE, scales=()):
    """gemmd.v1.Matrix; data defaults to rows x cols elements of dtype."""
    if data is None:
        data = pattern(rows * cols * ESZ[dtype])
    m = field_varint(1, rows) + field_varint(2, cols) + field_varint(3, dtype)
    m += field_bytes(4, data) if data else b""
    m += field_varint(5, layout)
    if scales:
        m += field_bytes(6, floats(scales))
    return m


def gemm_request(request_id, a, weight_id=None, weight_name=None, b=None, out_dtype=0):
    msg = field_varint(1, request_id)
    if weight_id is not None:
        msg += varint(2 << 3) + varint(weight_id)
    if weight_name is not None:
        msg += field_bytes(3, weight_name.encode())
    if b is not None:
        msg += field_bytes(4, b)
    if a is not None:
        msg += field_bytes(5, a)
    return msg + field_varint(6, out_dtype)


def gemm_requests():
    t = "gemm_request"
    write(t, "weight_id", gemm_request(2, matrix(4, 32, E4M3), weight_id=1))
    write(t, "weight_name_blocks", gemm_request(4, matrix(2, 256, E4M3, layout=BLOCK_1X128,
                                                          scales=[1.0, 0.5, 0.25, 2.0]),
                                                weight_name="w2", out_dtype=FP32))
    write(t, "inline_raw_a", gemm_request(7, matrix(4, 64, BF16),
                                          b=matrix(8, 64, E4M3, layout=TENSOR, scales=[0.5]),
                                          out_dtype=FP16))
    write(t, "inline_quantized", gemm_request(8, matrix(3, 130, FP32), b=matrix(5, 130, BF16)))
    write(t, "row_scales_fp16", gemm_request(10, matrix(3, 16, FP16, layout=ROW, scales=[1, 2, 3]),
                                             weight_id=7, out_dtype=BF16))
    write(t, "e5m2_inline_rows", gemm_request(12, matrix(2, 8, E5M2, layout=ROW, scales=[1, 1]),
                                              b=matrix(3, 8, E5M2, layout=ROW, scales=[1, 2, 4])))
    write(t, "no_a", gemm_request(1, None, weight_id=1))
    write(t, "no_b", gemm_request(1, matrix(4, 32, E4M3)))
    write(t, "weight_id_0", gemm_request(1, matrix(4, 32, E4M3), weight_id=0))
    write(t, "data_short", gemm_request(2, matrix(4, 32, E4M3, data=pattern(127)), weight_id=1))
    write(t, "scales_count", gemm_request(2, matrix(2, 256, E4M3, layout=BLOCK_1X128, scales=[1.0]),
                                          weight_id=1))
    write(t, "out_fp8", gemm_request(2, matrix(4, 32, E4M3), weight_id=1, out_dtype=E4M3))
    write(t, "k_mismatch", gemm_request(2, matrix(4, 32, E4M3), b=matrix(4, 16, E4M3)))
    write(t, "b_block_1x128", gemm_request(2, matrix(4, 32, E4M3),
                                           b=matrix(4, 32, E4M3, layout=BLOCK_1X128, scales=[1] * 4)))


def register_message(name=None, weight=None):
    msg = b""
    if name is not None:
        msg += field_bytes(1, name.encode())
    if weight is not None:
        msg += field_bytes(2, weight)
    return msg


def stream(*messages):
    """register_weight_fuzz.c's framing: a 2-byte length before each message."""
    return b"".join(struct.pack("<H", len(m)) + m for m in messages)


def register_weights():
    t = "register_weight"
    write(t, "one_message", stream(register_message("w", matrix(8, 16, E4M3))))
    data = pattern(8 * 16)
    write(t, "two_messages_rows", stream(
        register_message("rows", matrix(8, 16, E4M3, data=data[:64], layout=ROW)),
        register_message(None, matrix(0, 0, 0, data=data[64:], scales=[1.0] * 8))))
    data = pattern(4 * 128 * 2)
    write(t, "bf16_three_messages", stream(
        register_message("bf16", matrix(4, 128, BF16, data=data[:300])),
        register_message(None, matrix(0, 0, 0, data=data[300:700])),
        register_message(None, matrix(0, 0, 0, data=data[700:]))))
    write(t, "fp32_tensor", stream(register_message("f", matrix(2, 4, FP32, layout=TENSOR, scales=[2.0]))))
    write(t, "blocks", stream(register_message("blk", matrix(129, 8, E4M3, layout=BLOCK_128X128,
                                                             scales=[1.0, 0.5]))))
    write(t, "no_name", stream(register_message(None, matrix(8, 16, E4M3))))
    write(t, "no_header", stream(register_message("w")))
    write(t, "data_overrun", stream(register_message("w", matrix(8, 16, E4M3, data=pattern(129)))))
    write(t, "incomplete", stream(register_message("w", matrix(8, 16, E4M3, data=pattern(100)))))
    write(t, "scales_overrun", stream(register_message("w", matrix(8, 16, E4M3, layout=TENSOR,
                                                                   scales=[1.0, 2.0]))))
    write(t, "layout_1x128", stream(register_message("w", matrix(8, 16, E4M3, layout=BLOCK_1X128,
                                                                 scales=[1.0] * 8))))
    write(t, "not_a_message", stream(b"\xff\xff\xff"))


# ---- HTTP -------------------------------------------------------------------------------------

def http_requests():
    t = "http_request"
    reqs = {
        "get_metrics": b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:9464\r\nAccept: */*\r\n\r\n",
        "head_query": b"HEAD /healthz?verbose=1#x HTTP/1.0\r\n\r\n",
        "get_stats_tab": b"GET /stats HTTP/1.1\r\nX-A:\tb c\r\n\r\n",
        "post_body": b"POST /metrics HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc",
        "absolute_form": b"GET http://h/metrics HTTP/1.1\r\n\r\n",
        "no_colon": b"GET / HTTP/1.1\r\nHost 1\r\n\r\n",
        "bad_version": b"GET / HTTP/x.1\r\n\r\n",
        "ctl_in_value": b"GET / HTTP/1.1\r\nA: \x01\r\n\r\n",
        "bare_lf": b"GET / HTTP/1.1\nHost: a\n\r\n\r\n",
        "no_end": b"GET / HTTP/1.1\r\nHost: a\r\n",
        "long_header": b"GET / HTTP/1.1\r\nX: " + b"a" * 2000 + b"\r\n\r\n",
    }
    for i, (name, req) in enumerate(sorted(reqs.items())):
        write(t, name, bytes([(i * 37) % 256]) + req)  # first byte: bytes per read - 1
    write(t, "byte_at_a_time", b"\x00" + reqs["get_metrics"])


# ---- safetensors -------------------------------------------------------------------------------

def safetensors_file(tensors, metadata=None, pad_to=8):
    """tensors: name -> (dtype, shape, bytes). Returns the file's bytes."""
    header, data = {}, bytearray()
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, (dtype, shape, b) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(b)]}
        data += b
    h = json.dumps(header, separators=(",", ":")).encode()
    if pad_to:
        h += b" " * (-len(h) % pad_to)
    return struct.pack("<Q", len(h)) + h + bytes(data)


def raw_file(header_text, data=b""):
    h = header_text.encode()
    return struct.pack("<Q", len(h)) + h + data


def safetensors():
    t = "safetensors"
    write(t, "plain", safetensors_file({"w": ("F8_E4M3", [2, 3], pattern(6))}))
    write(t, "row_scales", safetensors_file({
        "layers.0.w": ("F8_E4M3", [4, 8], pattern(32)),
        "layers.0.w_scale_inv": ("F32", [4], floats([1, 2, 3, 4])),
    }, metadata={"format": "pt"}))
    write(t, "block_scales", safetensors_file({
        "b": ("F8_E5M2", [130, 2], pattern(260)),
        "b_scale": ("F32", [2, 1], floats([0.5, 0.25])),
    }))
    write(t, "tensor_scale", safetensors_file({
        "t": ("F8_E4M3", [3, 3], pattern(9)),
        "t_scale": ("F32", [], floats([2.0])),
        "other": ("BF16", [2, 2], pattern(8)),
        "vec": ("F8_E4M3", [4], pattern(4)),
    }))
    write(t, "unaligned_scales", safetensors_file({
        "u": ("F8_E4M3", [3, 5], pattern(15)),
        "u_scale_inv": ("F32", [3, 1], floats([1, 1, 1])),
    }, pad_to=0))
    write(t, "scales_fit_nothing", safetensors_file({
        "x": ("F8_E4M3", [4, 4], pattern(16)),
        "x_scale": ("F32", [3], floats([1, 1, 1])),
    }))
    write(t, "offsets_outside", raw_file('{"w":{"dtype":"F8_E4M3","shape":[2,2],"data_offsets":[0,9]}}',
                                         pattern(4)))
    write(t, "header_too_long", struct.pack("<Q", 1 << 40) + b"{}")
    write(t, "short", b"\x02\0\0\0")
    write(t, "not_an_object", raw_file("[1,2,3]"))
    write(t, "unicode_names", raw_file(
        '{"\\u00e9\\ud83d\\ude00":{"dtype":"F8_E4M3","shape":[1,2],"data_offsets":[0,2]},'
        '"\\ud800x":{"dtype":"F8_E4M3","shape":[1,1],"data_offsets":[2,3]}}', pattern(3)))
    write(t, "numbers", raw_file('{"n":{"dtype":"F8_E4M3","shape":[1.0,2e0],"data_offsets":[0,2]},'
                                 '"__metadata__":{"a":[true,false,null,-1.5e3,"s\\n\\t\\"\\\\\\/"]}}',
                                 pattern(2)))
    write(t, "deep", raw_file("[" * 70 + "]" * 70))
    write(t, "trailing", raw_file('{} x'))


# ---- config ------------------------------------------------------------------------------------

def config():
    t = "config"

    def inp(text, *args):
        return text.encode() + b"\0" + b"\0".join(a.encode() for a in args)

    write(t, "file_and_flags", inp(
        "# gemmd\nmax-m = 1024\nlog-level = debug  # comment\nshm-socket = \"/tmp/g.sock\"\n",
        "--max-n=2048", "--backend", "cpu", "GEMMD_MAX_K=4096"))
    write(t, "sizes", inp("weight-memory-bytes = 8G\nshm-arena-bytes=64MiB\nstream-queue-bytes = 1tb\n",
                          "--preload", "/a.safetensors", "--preload=/b.safetensors", "--max-message-bytes=1k"))
    write(t, "bad_line", inp("max-m = 1024\nnonsense\n"))
    write(t, "unknown_option", inp("unknown-option = 1\n"))
    write(t, "below_min", inp("", "--max-m=0"))
    write(t, "not_integer", inp("", "--grpc-threads", "2x"))
    write(t, "enum", inp("gemm-kernel = wgmma\n", "--shm-pin-arenas=sometimes"))
    write(t, "help", inp("", "--help"))
    write(t, "version", inp("", "--version"))
    write(t, "env_only", inp("", "GEMMD_LOG_LEVEL=warn", "GEMMD_SHM_ALLOW_UIDS=1000,1001"))
    write(t, "missing_value", inp("", "--max-m"))
    write(t, "positional", inp("", "serve"))
    write(t, "long_value", inp("tls-cert = " + "x" * 1500 + "\n"))


def main():
    if os.path.isdir(CORPUS):
        shutil.rmtree(CORPUS)
    shm_hello()
    shm_control()
    shm_entry()
    gemm_requests()
    register_weights()
    http_requests()
    safetensors()
    config()
    for t in sorted(os.listdir(CORPUS)):
        print("%-16s %d files" % (t, len(os.listdir(os.path.join(CORPUS, t)))))


if __name__ == "__main__":
    main()
