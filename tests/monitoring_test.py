"""The dashboards and alerts operators install (deploy/monitoring/): the rules pass
`promtool check rules` and their unit tests (`promtool test rules`); every dashboard query
is valid PromQL (checked by promtool as a recording rule); and every gemmd_* and process_*
metric that a query or a rule names exists in a live gemmd's /metrics."""

import json
import os
import re
import shutil
import subprocess
import time
import unittest

import harness as H

MONITORING = "deploy/monitoring"


def path(name):
    return H.repo_path("%s/%s" % (MONITORING, name))


def promtool():
    p = shutil.which("promtool")
    if p is None:
        raise unittest.SkipTest("promtool is not installed (deploy/bootstrap.sh installs prometheus)")
    return p


def dashboard_exprs():
    with open(path("grafana-dashboard.json")) as f:
        dash = json.load(f)
    return [t["expr"] for p in dash["panels"] for t in p["targets"]]


def rule_exprs():
    with open(path("gemmd-alerts.rules.yaml")) as f:
        text = f.read()
    # expr: one line, or a block after "expr: |"
    out, lines = [], text.splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"\s*expr:\s*(.*)$", line)
        if not m:
            continue
        if m.group(1).strip() != "|":
            out.append(m.group(1))
            continue
        indent, block = None, []
        for nxt in lines[i + 1:]:
            if not nxt.strip():
                break
            ind = len(nxt) - len(nxt.lstrip())
            indent = ind if indent is None else indent
            if ind < indent:
                break
            block.append(nxt.strip())
        out.append(" ".join(block))
    return out


class Monitoring(unittest.TestCase):
    def test_rules_check_and_unit_tests(self):
        for args in (["check", "rules", path("gemmd-alerts.rules.yaml")],
                     ["test", "rules", path("gemmd-alerts.test.yaml")]):
            p = subprocess.run([promtool()] + args, capture_output=True, text=True, timeout=120)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)

    def test_dashboard_queries_are_promql(self):
        tmp = os.path.join(H.tmpdir(), "dash-%d.yaml" % time.monotonic_ns())
        with open(tmp, "w") as f:
            f.write("groups:\n  - name: dashboard\n    rules:\n")
            for i, e in enumerate(dashboard_exprs()):
                e = e.replace("$__rate_interval", "5m").replace("$instance", ".*")
                f.write("      - record: dashboard:query_%d\n        expr: %s\n" % (i, json.dumps(e)))
        p = subprocess.run([promtool(), "check", "rules", tmp], capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)

    def test_every_metric_named_exists(self):
        pb, _, _, _ = H.stubs()
        with H.Gemmd() as d:
            # Some families (the per-stage times) appear once batches have run.
            stub = d.stub()
            for _ in range(3):
                stub.Gemm(pb.GemmRequest(a=pb.Matrix(rows=1, cols=8, dtype=1, data=bytes(8)),
                                         b=pb.Matrix(rows=2, cols=8, dtype=1, data=bytes(16))), timeout=10)
            _, body, _ = d.http("/metrics")
        names = set()
        for m in re.finditer(r"^# TYPE (\S+) (\S+)$", body.decode(), re.M):
            names.add(m.group(1))
            if m.group(2) == "histogram":
                names.update(m.group(1) + s for s in ("_bucket", "_sum", "_count"))
        used = set()
        for e in dashboard_exprs() + rule_exprs():
            used.update(re.findall(r"\b((?:gemmd|process)_[a-z0-9_]+)\b", e))
        self.assertGreater(len(used), 15)
        self.assertEqual(sorted(used - names), [], "named by a query or rule, absent from /metrics")


if __name__ == "__main__":
    unittest.main(verbosity=2)
