"""examples/mlp_layer.py, the quickstart's worked example, runs against a real gemmd over
both transports and passes its own check (every GEMM within docs/api.md §1's bound)."""

import os
import subprocess
import sys
import unittest

import harness as H


class Example(unittest.TestCase):
    def test_mlp_layer_over_both_transports(self):
        script = H.repo_path("examples/mlp_layer.py")
        env = dict(os.environ, PYTHONPATH=H.package_path())
        with H.Gemmd() as d:
            for addr in (d.address, "unix://" + d.shm_socket):
                p = subprocess.run([sys.executable, script, "--addr", addr, "--steps", "2"],
                                   capture_output=True, text=True, timeout=120, env=env)
                self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
                self.assertIn("OK: worst GEMM relative error", p.stdout)
                self.assertIn("over %s" % ("grpc" if addr == d.address else "shm"), p.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
