"""docs/api.md states the contract: its flag table names exactly the options `gemmd --help`
lists (with the same defaults), and its metric table names exactly the metric families that
/metrics exports, with the same types and labels."""

import re
import subprocess
import time
import unittest

import numpy as np

import harness as H


def section(text, heading):
    """The lines of a markdown section, from its heading to the next heading of its level
    or above."""
    level = len(heading) - len(heading.lstrip("#"))
    lines = text.splitlines()
    start = lines.index(heading) + 1
    end = next((i for i in range(start, len(lines))
                if re.match("#{1,%d} " % level, lines[i])), len(lines))
    return lines[start:end]


def table_rows(lines):
    """Cells of each data row of the markdown tables in lines (separators and headers out)."""
    rows = []
    for line in lines:
        if not line.startswith("|") or re.match(r"^\|[\s:|-]+\|$", line):
            continue
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        rows.append(cells)
    return rows[1:] if rows else rows  # the first row of each table is its header


def help_options():
    """{option: default or None} from `gemmd --help`."""
    text = subprocess.run([H.repo_path("daemon/gemmd"), "--help"], capture_output=True,
                          text=True, timeout=30).stdout
    out = {}
    for line in text.splitlines():
        m = re.match(r"^  --([a-z0-9-]+) ", line)
        if m:
            d = re.search(r"\[default: ([^\]]*)\]$", line)
            out[m.group(1)] = d.group(1) if d else None
    return out


def exported_families(text):
    """{name: (type, label names)} of a Prometheus exposition."""
    types, labels = {}, {}
    for line in text.splitlines():
        m = re.match(r"^# TYPE (\S+) (\S+)$", line)
        if m:
            types[m.group(1)] = m.group(2)
            labels.setdefault(m.group(1), set())
            continue
        if not line or line.startswith("#"):
            continue
        m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{([^}]*)\})? ", line)
        name, lab = m.group(1), m.group(2) or ""
        family = next((f for f in (name, re.sub(r"_(bucket|sum|count)$", "", name)) if f in types), None)
        names = {kv.split("=", 1)[0] for kv in re.findall(r'[a-z_]+="', lab)}
        labels[family] |= {n.rstrip('="') for n in names} - {"le"}
    return {n: (types[n], labels[n]) for n in types}


class ApiDoc(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with open(H.repo_path("docs/api.md")) as f:
            cls.doc = f.read()

    def test_flags_match_help(self):
        rows = table_rows(section(self.doc, "## 5. Command line"))
        documented = {}
        for cells in rows:
            names = re.findall(r"--([a-z0-9-]+)", cells[0])
            self.assertTrue(names, cells)
            for n in names:
                documented[n] = cells[1].strip("`")
        options = help_options()
        self.assertGreater(len(options), 40)
        self.assertEqual(set(options) - set(documented), set(), "flags missing from docs/api.md")
        self.assertEqual(set(documented) - set(options), set(),
                         "docs/api.md names flags gemmd does not have")
        for name, default in options.items():
            if default is not None:
                self.assertEqual(documented[name], default,
                                 "--%s: the default in docs/api.md and in gemmd --help" % name)

    def test_metrics_match_export(self):
        rows = table_rows(section(self.doc, "### Metrics"))
        documented = {}
        for cells in rows:
            name = cells[0].strip("`")
            labels = {x.strip() for x in cells[2].split(",") if x.strip()}
            documented[name] = (cells[1], labels)
        self.assertGreater(len(documented), 25)
        pb, _, _, _ = H.stubs()
        rng = np.random.default_rng()
        with H.Gemmd() as d:
            stub = d.stub()
            # A batch large enough to leave the loop thread, so every family is exported.
            a = H.make_matrix(pb, rng, 64, 256, H.DT_E4M3, H.SL_NONE)
            b = H.make_matrix(pb, rng, 256, 256, H.DT_E4M3, H.SL_NONE)
            stub.Gemm(pb.GemmRequest(a=a, b=b))
            # The answer leaves before the loop counts its batch (docs/api.md): wait for it.
            deadline = time.monotonic() + 10
            while True:
                status, body, _ = d.http("/metrics")
                text = body.decode() if isinstance(body, bytes) else body
                if "gemmd_batch_stage_seconds_total" in text or time.monotonic() > deadline:
                    break
                time.sleep(0.01)
        self.assertEqual(status, 200)
        exported = exported_families(body.decode() if isinstance(body, bytes) else body)
        self.assertEqual(set(exported) - set(documented), set(), "metrics missing from docs/api.md")
        self.assertEqual(set(documented) - set(exported), set(),
                         "docs/api.md names metrics gemmd does not export")
        for name, (mtype, labels) in exported.items():
            self.assertEqual(documented[name], (mtype, labels), name)


if __name__ == "__main__":
    unittest.main(verbosity=2)
