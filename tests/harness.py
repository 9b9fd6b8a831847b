"""Test harness: starts the real gemmd on free ports and talks to it with clients no one
here wrote (Python grpcio, through the gemmd package's generated messages; urllib, promtool).

Also the tests' own FP64 reference: FP8 decoding, E4M3 quantization and the GEMM, written
from docs/api.md §1 with numpy, independent of kernels/ and of the gemmd package (whose own
codecs and quantizers, on ml_dtypes, client/python/tests checks against these).
"""

import os
import re
import signal as _signal
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.request

import numpy as np

# ---- Locating files under Bazel (runfiles) or in a checkout ---------------------------------


def _tsan_suppressions():
    """Under bazel test --config=tsan: the system libraries' suppressions for every process
    a test starts (gemmd, gemmctl, clients), through the environment they inherit."""
    if os.environ.get("GEMMD_TSAN") and "suppressions=" not in os.environ.get("TSAN_OPTIONS", ""):
        supp = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(__file__))),
                            "tools", "sanitizers", "tsan.supp")
        os.environ["TSAN_OPTIONS"] = os.environ.get("TSAN_OPTIONS", "") + ":suppressions=" + supp


_tsan_suppressions()


def repo_path(rel):
    """Path of a repository file or built target, under `bazel test` or from the tree.
    $GEMMD_BIN_DIR, when set, holds the binaries (gemmd, gemmctl): the GPU bundle."""
    bin_dir = os.environ.get("GEMMD_BIN_DIR")
    if bin_dir and rel in ("daemon/gemmd", "client/gemmctl/gemmctl"):
        return os.path.join(bin_dir, os.path.basename(rel))
    srcdir = os.environ.get("TEST_SRCDIR")
    if srcdir:
        p = os.path.join(srcdir, os.environ.get("TEST_WORKSPACE", "gemmd"), rel)
        if os.path.exists(p):
            return p
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(here)
    for cand in (os.path.join(root, rel), os.path.join(root, "bazel-bin", rel)):
        if os.path.exists(cand):
            return cand
    raise FileNotFoundError(rel)


# The backend the tests expect gemmd to report, and extra gemmd flags for every daemon
# the tests start ($GEMMD_TEST_ARGS="--backend cuda" runs the suites on the GPU).
BACKEND = os.environ.get("GEMMD_TEST_BACKEND", "cpu")
EXTRA_ARGS = os.environ.get("GEMMD_TEST_ARGS", "").split()


def tmpdir():
    return os.environ.get("TEST_TMPDIR") or tempfile.mkdtemp(prefix="gemmd-test-")


# ---- The Python package's stubs -------------------------------------------------------------


def package_path():
    """client/python, the directory holding the `gemmd` package (put on sys.path)."""
    return os.path.dirname(os.path.dirname(repo_path("client/python/gemmd/__init__.py")))


def stubs():
    """(gemm_pb2, gemm stubs, health messages, health stubs), from the gemmd package:
    its gemm_pb2 is protoc's output for proto/gemmd/v1/gemm.proto (checked against the file
    by client/python/tests/test_proto.py); its stubs are grpcio's generic calls. The
    second and fourth have GemmServiceStub(channel) and HealthStub(channel), the third
    HealthCheckRequest and HealthCheckResponse."""
    if package_path() not in sys.path:
        sys.path.insert(0, package_path())
    from gemmd import rpc  # noqa: E402
    return rpc.gemm_pb2, rpc, rpc, rpc


# ---- The daemon ----------------------------------------------------------------------------

# The daemons started by the test now running: a failing or erroring test prints the end
# of each one's log, which is where the daemon's side of the failure is.
_test_daemons = []
_LOG_TAIL_LINES = 60


def _print_daemon_logs():
    for d in _test_daemons:
        try:
            lines = d.log_text().splitlines()[-_LOG_TAIL_LINES:]
        except OSError as e:
            lines = ["(log unreadable: %s)" % e]
        sys.stderr.write("---- gemmd log %s (last %d lines)\n%s\n----\n"
                         % (d.log_path, len(lines), "\n".join(lines)))


def _wrap_result(name, before):
    orig = getattr(unittest.TestResult, name)

    def wrapped(self, *args):
        if before:
            _test_daemons.clear()
        else:
            _print_daemon_logs()
        return orig(self, *args)
    setattr(unittest.TestResult, name, wrapped)


_wrap_result("startTest", True)
_wrap_result("addFailure", False)
_wrap_result("addError", False)


class Gemmd:
    """A gemmd process on free ports. Use as a context manager or call stop()."""

    def __init__(self, *args, env=None, wait_ready=True, preexec_fn=None):
        self.binary = repo_path("daemon/gemmd")
        self.log_path = os.path.join(tmpdir(), "gemmd-%d-%d.log" % (os.getpid(), time.monotonic_ns()))
        self.log = open(self.log_path, "w+")
        # Unix socket paths must stay under 108 bytes: not in Bazel's long TEST_TMPDIR.
        self.shm_socket = "/tmp/gemmd-test-%d-%d.sock" % (os.getpid(), time.monotonic_ns() % 10**9)
        cmd = [self.binary, "--grpc-listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0",
               "--shm-socket", self.shm_socket] + EXTRA_ARGS
        cmd += list(args)
        full_env = dict(os.environ)
        full_env.update(env or {})
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, env=full_env,
                                     preexec_fn=preexec_fn)
        self.grpc_port = self.metrics_port = None
        self._channels = []
        _test_daemons.append(self)
        if wait_ready:
            self.wait_serving()

    def log_text(self):
        with open(self.log_path) as f:
            return f.read()

    def wait_listening(self, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            m = re.search(r'msg="listening" grpc_port=(\d+) metrics_port=(\d+)', self.log_text())
            if m:
                self.grpc_port, self.metrics_port = int(m.group(1)), int(m.group(2))
                return
            if self.proc.poll() is not None:
                raise RuntimeError("gemmd exited with %s:\n%s" % (self.proc.returncode, self.log_text()))
            time.sleep(0.02)
        raise RuntimeError("gemmd did not listen in time:\n" + self.log_text())

    def wait_serving(self, timeout=60):
        """Listening, and its start-up weights loaded (the log's "serving" line)."""
        deadline = time.time() + timeout
        self.wait_listening(timeout)
        while time.time() < deadline:
            if 'msg="serving"' in self.log_text():
                return
            if self.proc.poll() is not None:
                raise RuntimeError("gemmd exited with %s:\n%s" % (self.proc.returncode, self.log_text()))
            time.sleep(0.02)
        raise RuntimeError("gemmd did not finish loading in time:\n" + self.log_text())

    @property
    def address(self):
        return "127.0.0.1:%d" % self.grpc_port

    def channel(self, **options):
        import grpc

        opts = [("grpc.max_receive_message_length", 1 << 30),
                ("grpc.max_send_message_length", 1 << 30)]
        opts += list(options.items())
        ch = grpc.insecure_channel(self.address, options=opts)
        self._channels.append(ch)
        return ch

    def stub(self):
        pb, pbg, _, _ = stubs()
        return pbg.GemmServiceStub(self.channel())

    def http(self, path, timeout=10):
        """(status, body bytes, content type) of GET path on the metrics port."""
        url = "http://127.0.0.1:%d%s" % (self.metrics_port, path)
        try:
            with urllib.request.urlopen(url, timeout=timeout) as r:
                return r.status, r.read(), r.headers.get("Content-Type")
        except urllib.error.HTTPError as e:
            return e.code, e.read(), e.headers.get("Content-Type")

    def signal(self, sig=_signal.SIGTERM):
        self.proc.send_signal(sig)

    def wait_inflight(self, n, futures=(), timeout=60):
        """Until the daemon holds at least n admitted requests (GetStats' inflight_requests).
        A drain test signals after this: a request still arriving at SIGTERM is new work
        and is refused, and a fixed sleep does not say when a large one has arrived.
        Fails if one of `futures` ends first (it was not held long enough to be seen)."""
        pb, _, _, _ = stubs()
        stub = self.stub()
        deadline = time.monotonic() + timeout
        while stub.GetStats(pb.GetStatsRequest()).inflight_requests < n:
            if any(f.done() for f in futures):
                raise AssertionError("a request ended before %d were seen in flight" % n)
            if time.monotonic() > deadline:
                raise AssertionError("the daemon never held %d requests in %g s" % (n, timeout))
            time.sleep(0.01)

    def wait(self, timeout=60):
        return self.proc.wait(timeout=timeout)

    def open_fds(self):
        return len(os.listdir("/proc/%d/fd" % self.proc.pid))

    def fd_targets(self):
        """What each open fd of the daemon points at (a socket, a file, an eventfd), by fd."""
        out = {}
        for fd in os.listdir("/proc/%d/fd" % self.proc.pid):
            try:
                out[int(fd)] = os.readlink("/proc/%d/fd/%s" % (self.proc.pid, fd))
            except OSError:
                pass
        return out

    def rss_bytes(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        return 0

    def stop(self, sig=_signal.SIGTERM, timeout=60):
        for ch in self._channels:
            ch.close()
        self._channels = []
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise RuntimeError("gemmd did not stop after %s:\n%s" % (sig, self.log_text()))
        self.log.close()
        return self.proc.returncode

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def as_nobody(fn):
    """Runs fn() in a forked child as uid and gid 65534 (the caller must be root); returns
    what it returned as a string, or the text of what it raised."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            os.setgid(65534)
            os.setuid(65534)
            out = str(fn())
        except Exception as e:  # noqa: BLE001 - reported to the parent
            out = "%s: %s" % (type(e).__name__, e)
        os.write(w, out.encode())
        os._exit(0)
    os.close(w)
    os.waitpid(pid, 0)
    with os.fdopen(r) as f:
        return f.read()


# ---- Numbers (docs/api.md §1), independent of kernels/ ---------------------------------------------

DT_E4M3, DT_E5M2, DT_BF16, DT_FP16, DT_FP32 = 1, 2, 3, 4, 5
SL_NONE, SL_TENSOR, SL_ROW, SL_1X128, SL_128X128 = 0, 1, 2, 3, 4
ELEM_SIZE = {DT_E4M3: 1, DT_E5M2: 1, DT_BF16: 2, DT_FP16: 2, DT_FP32: 4}


def _fp8_table(ebits, mbits, bias, ieee):
    vals = np.zeros(256, dtype=np.float64)
    for c in range(256):
        s = -1.0 if c & 0x80 else 1.0
        e = (c >> mbits) & ((1 << ebits) - 1)
        m = c & ((1 << mbits) - 1)
        if ieee and e == (1 << ebits) - 1:
            vals[c] = s * np.inf if m == 0 else np.nan
        elif not ieee and (c & 0x7F) == 0x7F:
            vals[c] = np.nan
        elif e == 0:
            vals[c] = s * m * 2.0 ** (1 - bias - mbits)
        else:
            vals[c] = s * (1 + m / 2.0 ** mbits) * 2.0 ** (e - bias)
    return vals


E4M3 = _fp8_table(4, 3, 7, ieee=False)
E5M2 = _fp8_table(5, 2, 15, ieee=True)
E4M3_MAX, E5M2_MAX = 448.0, 57344.0


def decode(dtype, data, rows, cols):
    """Stored values as float64, rows x cols."""
    raw = np.frombuffer(data, dtype=np.uint8)
    if dtype == DT_E4M3:
        v = E4M3[raw]
    elif dtype == DT_E5M2:
        v = E5M2[raw]
    elif dtype == DT_BF16:
        v = (np.frombuffer(data, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    elif dtype == DT_FP16:
        v = np.frombuffer(data, dtype=np.float16).astype(np.float64)
    elif dtype == DT_FP32:
        v = np.frombuffer(data, dtype=np.float32).astype(np.float64)
    else:
        raise ValueError(dtype)
    return v.reshape(rows, cols)


def scale_grid(layout, scales, rows, cols):
    """Per-element multipliers as float64, rows x cols."""
    s = np.asarray(scales, dtype=np.float32).astype(np.float64)
    if layout == SL_NONE:
        return np.ones((rows, cols))
    if layout == SL_TENSOR:
        return np.full((rows, cols), s[0])
    if layout == SL_ROW:
        return np.repeat(s.reshape(rows, 1), cols, axis=1)
    kb = (cols + 127) // 128
    if layout == SL_1X128:
        g = s.reshape(rows, kb)
        return np.repeat(g, 128, axis=1)[:, :cols]
    if layout == SL_128X128:
        g = s.reshape((rows + 127) // 128, kb)
        return np.repeat(np.repeat(g, 128, axis=0), 128, axis=1)[:rows, :cols]
    raise ValueError(layout)


def scale_count(layout, rows, cols):
    kb = (cols + 127) // 128
    return {SL_NONE: 0, SL_TENSOR: 1, SL_ROW: rows, SL_1X128: rows * kb,
            SL_128X128: ((rows + 127) // 128) * kb}[layout]


def _e4m3_encode(x):
    """float32 array -> E4M3 codes, round to nearest even, saturating (docs/api.md's quantizer)."""
    x = np.asarray(x, dtype=np.float64)
    pos = np.array([E4M3[c] for c in range(0x7F)])  # 0 .. 448, ascending codes 0x00..0x7E
    a = np.minimum(np.abs(x), 448.0)
    i = np.clip(np.searchsorted(pos, a), 1, 0x7E)
    lo, hi = pos[i - 1], pos[i]
    pick_hi = (a - lo > hi - a) | ((a - lo == hi - a) & ((i % 2) == 0))
    code = np.where(pick_hi, i, i - 1).astype(np.uint8)
    code = np.where(a <= pos[0], 0, code).astype(np.uint8)
    return code | np.where(np.signbit(x), 0x80, 0).astype(np.uint8)


def quantize_e4m3(values, rows, cols, block_rows, block_cols):
    """Real values -> (E4M3 codes, scales) with scale = amax/448 per block, as docs/api.md §1."""
    v = np.asarray(values, dtype=np.float32).reshape(rows, cols)
    rb, cb = (rows + block_rows - 1) // block_rows, (cols + block_cols - 1) // block_cols
    codes = np.zeros((rows, cols), dtype=np.uint8)
    scales = np.zeros(rb * cb, dtype=np.float32)
    for i in range(rb):
        for j in range(cb):
            blk = v[i * block_rows:(i + 1) * block_rows, j * block_cols:(j + 1) * block_cols]
            amax = np.float32(np.max(np.abs(blk))) if blk.size else np.float32(0)
            s = np.float32(1.0) if amax == 0 else max(amax / np.float32(448.0), np.float32(2.0 ** -126))
            scales[i * cb + j] = s
            codes[i * block_rows:(i + 1) * block_rows, j * block_cols:(j + 1) * block_cols] = \
                _e4m3_encode(blk / s)
    return codes, scales


def real_values(dtype, data, layout, scales, rows, cols, role):
    """What gemmd computes with: FP8 as given; other dtypes quantized to E4M3 with 1x128
    (A) or 128x128 (B) scales, as docs/api.md §1 says. Returns float64 rows x cols."""
    v = decode(dtype, data, rows, cols) * scale_grid(layout, scales, rows, cols)
    if dtype in (DT_E4M3, DT_E5M2):
        return v
    br = 1 if role == "a" else 128
    codes, s = quantize_e4m3(v.astype(np.float32), rows, cols, br, 128)
    return E4M3[codes] * scale_grid(SL_1X128 if role == "a" else SL_128X128, s, rows, cols)


def rel_error(out, ref):
    out, ref = np.asarray(out, np.float64), np.asarray(ref, np.float64)
    den = np.linalg.norm(ref)
    return np.linalg.norm(out - ref) / den if den > 0 else np.linalg.norm(out)


def output_error(out, ref, dtype):
    """rel_error of an output of `dtype`, forgiving what rounding to FP16's subnormals must
    lose: up to 2^-25 per element (half the subnormal spacing), however small the value, so
    a tiny result (a 1x1x1 product of small draws) is not a relative-error failure."""
    out, ref = np.asarray(out, np.float64), np.asarray(ref, np.float64)
    slack = 2.0 ** -25 * np.sqrt(out.size) if dtype == DT_FP16 else 0.0
    den = np.linalg.norm(ref)
    diff = max(0.0, np.linalg.norm(out - ref) - slack)
    return diff / den if den > 0 else diff


def decode_output(matrix):
    return decode(matrix.dtype, matrix.data, matrix.rows, matrix.cols)


# ---- Random operands ---------------------------------------------------------------------------


def random_matrix(rng, rows, cols, dtype, layout, mag=1.0):
    """(data bytes, scales list) for a random rows x cols matrix."""
    x = (rng.standard_normal((rows, cols)) * mag).astype(np.float32)
    if dtype == DT_E4M3:
        data = _e4m3_encode(np.clip(x, -448, 448)).tobytes()
    elif dtype == DT_E5M2:
        # Codes near the values (E5M2 = top byte of FP16, truncated), finite only.
        h = x.astype(np.float16).view(np.uint16)
        data = (h >> 8).astype(np.uint8).tobytes()
    elif dtype == DT_BF16:
        data = (x.view(np.uint32) >> 16).astype(np.uint16).tobytes()
    elif dtype == DT_FP16:
        data = x.astype(np.float16).tobytes()
    else:
        data = x.tobytes()
    n = scale_count(layout, rows, cols)
    scales = [float(s) for s in (0.5 + rng.random(n)) * 2.0 ** rng.integers(-3, 4, n)]
    return data, scales


def make_matrix(pb, rng, rows, cols, dtype, layout, mag=1.0):
    data, scales = random_matrix(rng, rows, cols, dtype, layout, mag)
    return pb.Matrix(rows=rows, cols=cols, dtype=dtype, data=data, scale_layout=layout, scales=scales)


def metric(d, name):
    """The value of an unlabelled metric on gemmd d's /metrics, or None."""
    _, body, _ = d.http("/metrics")
    for line in body.decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    return None


def shm_weight(c, pb, rng, name, n, k):
    """A random E4M3 N x K weight with 128x128 scales, registered through client c's arena
    (client/python/gemmd_shm.py): (B as a Matrix, its id)."""
    b = make_matrix(pb, rng, n, k, DT_E4M3, SL_128X128)
    return b, c.register_weight(name, n, k, b.data, DT_E4M3, SL_128X128, list(b.scales))


def reference(a, b):
    """FP64 D for protobuf Matrix a and b (the values gemmd computes with)."""
    av = real_values(a.dtype, a.data, a.scale_layout, a.scales, a.rows, a.cols, "a")
    bv = real_values(b.dtype, b.data, b.scale_layout, b.scales, b.rows, b.cols, "b")
    return av @ bv.T


TOLERANCE = {DT_FP32: 1e-4, DT_BF16: 1e-2, DT_FP16: 1e-2}


def promtool_check(text):
    """(exit code, output) of `promtool check metrics` on text. Where promtool cannot be
    installed (the GPU machine) and $GEMMD_TEST_NO_PROMTOOL is set, the check is skipped."""
    import shutil
    import unittest
    if shutil.which("promtool") is None and os.environ.get("GEMMD_TEST_NO_PROMTOOL"):
        raise unittest.SkipTest("promtool is not installed here")
    p = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True)
    return p.returncode, (p.stdout + p.stderr).decode()


def write_safetensors(path, tensors):
    """tensors: {name: (dtype string, shape, bytes)} -> a safetensors file."""
    import json
    import struct
    header, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
    for name, (dtype, shape, data) in tensors.items():
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
