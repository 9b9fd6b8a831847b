"""Puts the gemmd package (client/python) and tests/harness.py (which starts the real gemmd
and holds the independent FP64 reference) on sys.path, from the source tree or from
Bazel's runfiles, which mirror it."""

import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))
_pkg_root = os.path.dirname(_here)
_repo = os.path.dirname(os.path.dirname(_pkg_root))
for _p in (os.path.join(_repo, "tests"), _pkg_root):
    if _p not in sys.path:
        sys.path.insert(0, _p)
