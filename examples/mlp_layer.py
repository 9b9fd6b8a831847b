"""A model layer whose GEMMs run in gemmd: the feed-forward block of a transformer
(gate, up and down projections with SiLU), weights registered once in FP8 with 128x128
block scales, as FP8 checkpoints store them, then a few decode steps sent through gemmd
and checked against the same math done here with numpy.

    # terminal 1: gemmd (the CPU backend if there is no GPU)
    deploy/bootstrap.sh && bazel run -c opt //daemon:gemmd
    # terminal 2
    pip install client/python
    python3 examples/mlp_layer.py --addr localhost:50051    # or unix:///run/gemmd/gemmd.sock

Each GEMM's result is checked against float64 numpy on the same FP8 inputs; it exits 0 when
every one is within the contract's bound (docs/api.md §1: 1e-2 for BF16 output). It also
prints how far the whole layer is from float64 with unquantized activations: the cost of
FP8 itself, not of gemmd.
"""

import argparse
import sys
import time

import numpy as np

import gemmd


class FeedForward:
    """y = W_down · (silu(W_gate · x) * (W_up · x)), each product an FP8 GEMM in gemmd.

    Weights are stored as a model checkpoint would hold them: E4M3 with one scale per
    128x128 block (gemmd.quantize(w, "128x128")). Activations go to gemmd as float32;
    gemmd quantizes them per 1x128 block, as DeepGEMM's FP8 GEMMs expect."""

    def __init__(self, client: gemmd.Client, prefix: str, hidden: int, inner: int, rng):
        self.client = client
        self.names = {}
        self.weights = {}
        for part, shape in (("gate", (inner, hidden)), ("up", (inner, hidden)), ("down", (hidden, inner))):
            w = gemmd.quantize(rng.standard_normal(shape).astype(np.float32) / np.sqrt(shape[1]), "128x128")
            name = "%s.%s" % (prefix, part)
            try:
                client.unregister_weight(name)  # a rerun against the same gemmd
            except gemmd.GemmdError as e:
                if e.code != gemmd.StatusCode.NOT_FOUND:
                    raise
            client.register_weight(name, w)
            self.names[part] = name
            self.weights[part] = w

    def __call__(self, x: np.ndarray) -> tuple[np.ndarray, list]:
        """x: tokens x hidden, float32 -> (tokens x hidden float32, and each GEMM as
        (A sent, weight part, D received) for checking)."""
        g = self.client.gemm(x, self.names["gate"], out_dtype="bf16").astype(np.float32)
        u = self.client.gemm(x, self.names["up"], out_dtype="bf16").astype(np.float32)
        h = g / (1.0 + np.exp(-g)) * u
        y = self.client.gemm(h, self.names["down"], out_dtype="bf16").astype(np.float32)
        return y, [(x, "gate", g), (x, "up", u), (h, "down", y)]

    def reference_gemm(self, a: np.ndarray, part: str) -> np.ndarray:
        """One GEMM in float64 from what gemmd multiplies: A quantized as gemmd quantizes
        it (E4M3, 1x128 blocks) and the FP8 weight, dequantized."""
        qa = gemmd.dequantize(gemmd.quantize(a, "1x128")).astype(np.float64)
        return qa @ gemmd.dequantize(self.weights[part]).astype(np.float64).T

    def reference_layer(self, x: np.ndarray) -> np.ndarray:
        """The whole layer in float64 from the FP8 weights, activations unquantized: how far
        FP8 activations move the layer's output."""
        def mm(a, part):
            return a @ gemmd.dequantize(self.weights[part]).astype(np.float64).T
        g, u = mm(x.astype(np.float64), "gate"), mm(x.astype(np.float64), "up")
        return mm(g / (1.0 + np.exp(-g)) * u, "down")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--addr", default="localhost:50051", help="gemmd: host:port or unix:///path")
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--inner", type=int, default=2816)
    ap.add_argument("--tokens", type=int, default=8, help="rows per step (a decode batch)")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--token", default=None, help="bearer token, for a gemmd with --grpc-token-file")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    with gemmd.Client(args.addr, timeout=60, token=args.token) as c:
        layer = FeedForward(c, "example.ffn", args.hidden, args.inner, rng)
        print("registered %s over %s" % (", ".join(layer.names.values()), c.transport))
        worst = 0.0
        for step in range(args.steps):
            x = rng.standard_normal((args.tokens, args.hidden)).astype(np.float32)
            t = time.perf_counter()
            y, gemms = layer(x)
            ms = (time.perf_counter() - t) * 1e3
            errs = []
            for a, part, d in gemms:
                ref = layer.reference_gemm(a, part)
                errs.append(float(np.linalg.norm(d - ref) / np.linalg.norm(ref)))
            worst = max([worst] + errs)
            ref = layer.reference_layer(x)
            layer_err = float(np.linalg.norm(y - ref) / np.linalg.norm(ref))
            print("step %d: %d x %d -> %d x %d in %.1f ms; each GEMM against FP64: %s; the layer "
                  "against FP64 with unquantized activations: %.2e" % (
                      step, *x.shape, *y.shape, ms, ", ".join("%.1e" % e for e in errs), layer_err))
    ok = worst <= 1e-2
    print("%s: worst GEMM relative error %.2e (bound 1e-2 for BF16 output, docs/api.md §1)" % (
        "OK" if ok else "FAILED", worst))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
