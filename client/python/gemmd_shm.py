"""The byte-level shared-memory client (offsets, raw entries) under the name that
tests/ and tools/bench import: the code is gemmd.shm (client/python/gemmd/shm.py), written
from docs/shm-protocol.md with Python's standard library only. Applications use
gemmd.Client("unix:///run/gemmd/gemmd.sock") instead.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gemmd.shm import *  # noqa: E402,F401,F403
