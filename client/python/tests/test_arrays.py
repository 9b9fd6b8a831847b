"""Without a daemon: FP8 encoding and the quantizers against the tests' independent
reference (tests/harness.py, written from docs/api.md §1 without ml_dtypes), dtype and layout
handling, torch tensors, errors."""

import pickle

import ml_dtypes
import numpy as np
import pytest

import gemmd
import harness as H
from gemmd import _arrays, quant
from gemmd.errors import StatusCode

E4M3, E5M2 = np.dtype(ml_dtypes.float8_e4m3fn), np.dtype(ml_dtypes.float8_e5m2)
LAYOUTS = {"tensor": None, "row": (1, None), "1x128": (1, 128), "128x128": (128, 128)}


def nearest_codes(x, table, max_code):
    """Round to nearest even over a decode table's finite positive codes 0..max_code,
    saturating: an encoder independent of ml_dtypes (and of harness's, for E5M2)."""
    x = np.asarray(x, np.float64)
    pos = table[: max_code + 1]
    a = np.minimum(np.abs(x), pos[-1])
    i = np.clip(np.searchsorted(pos, a), 1, max_code)
    lo, hi = pos[i - 1], pos[i]
    up = (a - lo > hi - a) | ((a - lo == hi - a) & (i % 2 == 0))
    code = np.where(up, i, i - 1)
    return (code | np.where(np.signbit(x), 0x80, 0)).astype(np.uint8)


def interesting_values(rng, top):
    """Random magnitudes over the whole range, exact ties, subnormals, past the max."""
    v = rng.standard_normal(20000).astype(np.float32) * np.float32(2.0) ** rng.integers(-20, 20, 20000)
    table = H.E4M3 if top == 448 else H.E5M2
    finite = table[np.isfinite(table)]
    mids = ((finite[:-1] + finite[1:]) / 2).astype(np.float32)  # ties, both signs
    return np.concatenate([v, mids, -mids, finite.astype(np.float32),
                           np.float32([0, -0.0, top * 1.03, top * 1.04, -top * 2, 1e30, 2.0 ** -30])])


@pytest.mark.parametrize("fp8,table,max_code,top", [
    ("e4m3", H.E4M3, 0x7E, 448.0), ("e5m2", H.E5M2, 0x7B, 57344.0)])
def test_encode_rounds_to_nearest_even_and_saturates(fp8, table, max_code, top):
    x = interesting_values(np.random.default_rng(1), top)
    x = x[np.isfinite(x)]
    np.testing.assert_array_equal(quant.encode(x, fp8).view(np.uint8), nearest_codes(x, table, max_code))


@pytest.mark.parametrize("fp8,nan,inf", [("e4m3", 0x7F, 0x7F), ("e5m2", 0x7F, 0x7C)])
def test_encode_nan_and_inf_as_gemmd(fp8, nan, inf):
    got = quant.encode(np.float32([np.nan, -np.nan, np.inf, -np.inf]), fp8).view(np.uint8)
    assert list(got) == [nan, nan, inf, inf | 0x80]


def harness_quantize(v, layout):
    rows, cols = v.shape
    br, bc = {"tensor": (rows, cols), "row": (1, cols), "1x128": (1, 128), "128x128": (128, 128)}[layout]
    return H.quantize_e4m3(v, rows, cols, br, bc)


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("shape", [(1, 1), (3, 300), (130, 129), (257, 256)])
def test_quantize_matches_reference(layout, shape):
    rng = np.random.default_rng(hash((layout, shape)) % 2**32)
    v = (rng.standard_normal(shape) * 2.0 ** rng.integers(-8, 8, shape)).astype(np.float32)
    v[0, 0] = 0
    if shape[0] > 2:
        v[1] = 0  # an all-zero row: scale 1
    q = gemmd.quantize(v, layout)
    codes, scales = harness_quantize(v, layout)
    assert q.layout == gemmd.ScaleLayout[{"tensor": "TENSOR", "row": "ROW", "1x128": "BLOCK_1X128",
                                          "128x128": "BLOCK_128X128"}[layout]]
    assert q.data.dtype == E4M3 and q.data.shape == shape
    assert q.scales.shape == q.layout.shape(*shape)
    np.testing.assert_array_equal(q.data.view(np.uint8), codes)
    np.testing.assert_array_equal(q.scales.reshape(-1), scales)
    back = gemmd.dequantize(q).astype(np.float64)
    assert H.rel_error(back, v) < 0.04


def test_quantize_e5m2_and_none():
    rng = np.random.default_rng(2)
    v = rng.standard_normal((9, 200)).astype(np.float32) * 1000
    q = gemmd.quantize(v, "row", "e5m2")
    assert q.data.dtype == E5M2
    np.testing.assert_array_equal(q.scales, np.abs(v).max(axis=1) / np.float32(57344))
    assert H.rel_error(gemmd.dequantize(q), v) < 0.1
    n = gemmd.quantize(v, "none")
    assert n.scales.size == 0 and float(n.data.astype(np.float32).max()) == 448.0


def test_quantize_special_values():
    v = np.float32([[1.0, np.inf, np.nan, -2.0, 1e-45]])
    q = gemmd.quantize(v, "tensor")
    assert q.scales == np.float32(2.0) / np.float32(448)  # amax of the finite values
    assert list(q.data.view(np.uint8)[0, 1:3]) == [0x7F, 0x7F]
    tiny = gemmd.quantize(np.float32([[1e-40, 0]]), "tensor")
    assert tiny.scales == np.float32(2.0 ** -126)


def test_operand_layout_inference_and_errors():
    a = np.zeros((4, 300), E4M3)
    for scales, want in ((2.0, "TENSOR"), (np.ones(4), "ROW"), (np.ones((4, 1)), "ROW"),
                         (np.ones((4, 3)), "BLOCK_1X128")):
        op, _ = _arrays.operand(a, scales, None, "a")
        assert op.layout == gemmd.ScaleLayout[want]
    b = np.zeros((130, 300), E4M3)
    for scales, want in ((np.ones(130), "ROW"), (np.ones((2, 3)), "BLOCK_128X128")):
        assert _arrays.operand(b, scales, None, "b")[0].layout == gemmd.ScaleLayout[want]
    op, _ = _arrays.operand(np.zeros((2, 3, 300), E4M3), np.ones((2, 3, 3)), None, "a")
    assert op.data.shape == (6, 300) and op.lead == (2, 3) and op.layout == gemmd.ScaleLayout.BLOCK_1X128
    bad = [
        (lambda: _arrays.operand(a, np.ones(5), None, "a"), "fit no scale layout"),
        (lambda: _arrays.operand(a, np.ones(5), "row", "a"), "has 5 values; SCALE_LAYOUT_ROW needs 4"),
        (lambda: _arrays.operand(a, None, "row", "a"), "needs a.scales"),
        (lambda: _arrays.operand(a, np.ones(4), "128x128", "a"), "not allowed for A"),
        (lambda: _arrays.operand(b, np.ones((130, 3)), "1x128", "b"), "not allowed for B"),
        (lambda: _arrays.operand(a.view(np.uint8), None, None, "a"), "view them as ml_dtypes"),
        (lambda: _arrays.operand(np.zeros((0, 4), np.float32), None, None, "a"), "at least one row"),
        (lambda: _arrays.operand(np.zeros(4, np.int32), None, None, "a"), "dtype int32"),
        (lambda: _arrays.operand(np.zeros(4, np.float32), None, None, "b"), "N x K"),
        (lambda: _arrays.operand(a, None, "diagonal", "a"), "unknown scale layout"),
        (lambda: _arrays.out_dtype("int8"), "out_dtype"),
        (lambda: gemmd.quantize(np.zeros(3), "row"), "matrix"),
    ]
    for fn, words in bad:
        with pytest.raises(gemmd.GemmdError) as e:
            fn()
        assert e.value.code == StatusCode.INVALID_ARGUMENT
        assert words in e.value.message


def test_out_dtypes_and_float64():
    for v, want in (("bf16", 3), ("float16", 4), ("FP32", 5), (np.float32, 5), (ml_dtypes.bfloat16, 3),
                    (gemmd.DType.FP16, 4), (None, 3), (0, 3)):
        assert _arrays.out_dtype(v) == want
    arr, dt = _arrays.wire_array(np.ones((2, 2)), "a")
    assert dt == gemmd.DType.FP32 and arr.dtype == np.float32


def test_errors_carry_codes():
    e = gemmd.GemmdError(5, "no weight")
    assert e.code == 5 and e.code is StatusCode.NOT_FOUND and str(e) == "NOT_FOUND: no weight"
    import grpc

    assert e.grpc_code is grpc.StatusCode.NOT_FOUND
    assert gemmd.GemmdError(grpc.StatusCode.UNAVAILABLE, "x").code == StatusCode.UNAVAILABLE
    back = pickle.loads(pickle.dumps(e))
    assert (back.code, back.message) == (e.code, e.message)


def test_torch_tensors_are_viewed_not_copied():
    torch = pytest.importorskip("torch")
    t = torch.randn(3, 5).to(torch.bfloat16)
    n = _arrays.to_numpy(t)
    assert n.dtype == ml_dtypes.bfloat16 and n.ctypes.data == t.data_ptr()
    back = _arrays.to_torch(n)
    assert back.dtype == torch.bfloat16 and torch.equal(back, t)
    strided = torch.randn(4, 6)[:, ::2]
    np.testing.assert_array_equal(_arrays.to_numpy(strided), strided.numpy())
    q = gemmd.quantize(torch.randn(4, 256), "1x128")
    assert tuple(q.scales.shape) == (4, 2)
    if hasattr(torch, "float8_e4m3fn"):  # torch >= 2.1: torch in, torch out
        assert q.data.dtype == torch.float8_e4m3fn and isinstance(q.scales, torch.Tensor)
        assert _arrays.to_numpy(q.data).dtype == E4M3
    else:
        assert q.data.dtype == E4M3
    with pytest.raises(gemmd.GemmdError):
        _arrays.out_dtype(torch.int8)
    assert _arrays.out_dtype(torch.float16) == gemmd.DType.FP16


def test_balanced_endpoints_parse():
    from gemmd._balanced import endpoints

    assert endpoints("localhost:50051") == ["localhost:50051"]
    assert endpoints("a:1,b:2,dns:///c:3") == ["a:1", "b:2", "dns:///c:3"]
    assert endpoints("ipv4:10.0.0.1:1,10.0.0.2:1") == ["ipv4:10.0.0.1:1,10.0.0.2:1"]  # gRPC's own list
    for bad in ("a:1,,b:2", "a:1,", "a:1,unix:///run/gemmd/gemmd.sock", ",".join("a:%d" % i for i in range(17))):
        with pytest.raises(gemmd.GemmdError) as e:
            endpoints(bad)
        assert e.value.code == gemmd.StatusCode.INVALID_ARGUMENT
