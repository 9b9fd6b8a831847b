"""Kubernetes, checked offline (deploy/kustomization.yaml, deploy/k8s/).

kustomize is not packaged for Debian 12, so the test renders the kustomization itself, as
kustomize would for the features it uses (resources, a configMapGenerator without hash
suffixes, labels), and then:
- validates every built-in object against the Kubernetes API schemas (kubernetes-validate,
  strict: unknown fields are errors) for the oldest and newest versions it supports here;
- checks what ties the objects together: the Service, PodDisruptionBudget and
  ServiceMonitor select the pods; probes and ports name the container's ports; the probes
  are grpc.health.v1 on the services gemmd answers (readiness "", liveness "liveness"),
  with a start-up window for checkpoint loading; the grace period outlasts the drain; the
  ConfigMap is deploy/gemmd.conf.example and the pod's environment names real options;
- the PrometheusRule carries exactly deploy/monitoring/gemmd-alerts.rules.yaml's groups."""

import os
import re
import subprocess
import sys
import unittest

import harness as H

K8S_VALIDATE = os.environ.get("GEMMD_K8S_VALIDATE", "/opt/gemmd-tools/k8s-validate")
VERSIONS = ("1.29.0", "1.33.0")  # gRPC probes are GA since 1.27


def deploy_path(rel):
    return H.repo_path("deploy/" + rel)


def render():
    import yaml

    with open(deploy_path("kustomization.yaml")) as f:
        k = yaml.safe_load(f)
    objs = []
    for rel in k["resources"]:
        with open(deploy_path(rel)) as f:
            objs += [d for d in yaml.safe_load_all(f) if d]
    assert k["generatorOptions"]["disableNameSuffixHash"] is True
    for gen in k["configMapGenerator"]:
        data = {}
        for spec in gen["files"]:
            key, _, rel = spec.partition("=")
            with open(deploy_path(rel)) as f:
                data[key] = f.read()
        objs.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": gen["name"]}, "data": data})
    extra = {}
    for group in k.get("labels", []):
        extra.update(group["pairs"])
    for o in objs:
        o["metadata"].setdefault("labels", {}).update(extra)
    return {(o["kind"], o["metadata"]["name"]): o for o in objs}


class Kubernetes(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        sys.path.insert(0, K8S_VALIDATE)
        try:
            import kubernetes_validate  # noqa: F401
        except ImportError as e:
            raise AssertionError("kubernetes-validate is not at %s: run deploy/bootstrap.sh (%s)" % (K8S_VALIDATE, e))
        cls.objs = render()

    def test_builtin_objects_validate(self):
        import kubernetes_validate

        builtin = [o for o in self.objs.values() if "monitoring.coreos.com" not in o["apiVersion"]]
        self.assertEqual(sorted(o["kind"] for o in builtin),
                         ["ConfigMap", "Deployment", "PodDisruptionBudget", "Service"])
        for version in VERSIONS:
            for o in builtin:
                try:
                    kubernetes_validate.validate(o, version, strict=True)
                except kubernetes_validate.ValidationError as e:
                    self.fail("%s/%s on Kubernetes %s: %s" % (o["kind"], o["metadata"]["name"], version, e))

    def test_objects_fit_together(self):
        dep = self.objs[("Deployment", "gemmd")]
        pod = dep["spec"]["template"]
        labels = pod["metadata"]["labels"]
        c = pod["spec"]["containers"][0]
        ports = {p["name"]: p["containerPort"] for p in c["ports"]}
        self.assertEqual(ports, {"grpc": 50051, "metrics": 9464})
        for kind in ("Service", "PodDisruptionBudget", "ServiceMonitor"):
            o = self.objs[(kind, "gemmd")]
            sel = o["spec"]["selector"]
            sel = sel.get("matchLabels", sel)
            self.assertTrue(sel and all(labels.get(k) == v for k, v in sel.items()), "%s selects the pods" % kind)
        svc = self.objs[("Service", "gemmd")]
        self.assertEqual(svc["spec"]["clusterIP"], "None", "headless: the clients balance")
        self.assertEqual({p["targetPort"] for p in svc["spec"]["ports"]}, set(ports))
        mon = self.objs[("ServiceMonitor", "gemmd")]
        self.assertEqual([e["port"] for e in mon["spec"]["endpoints"]], ["metrics"])
        self.assertTrue(all(labels.get(k) == v for k, v in mon["spec"]["selector"]["matchLabels"].items()))
        # Probes: grpc.health.v1 on the port gemmd listens on, the services it answers.
        probes = {name: c[name]["grpc"] for name in ("startupProbe", "readinessProbe", "livenessProbe")}
        self.assertEqual({p["port"] for p in probes.values()}, {50051})
        self.assertEqual((probes["readinessProbe"]["service"], probes["startupProbe"]["service"],
                          probes["livenessProbe"]["service"]), ("", "", "liveness"))
        start = c["startupProbe"]
        self.assertGreaterEqual(start["periodSeconds"] * start["failureThreshold"], 1800, "30 min to load")
        # The grace period outlasts the drain gemmd's own unit allows (TimeoutStopSec).
        with open(deploy_path("systemd/gemmd@.service")) as f:
            stop = int(re.search(r"^TimeoutStopSec=(\d+)", f.read(), re.M).group(1))
        self.assertGreater(pod["spec"]["terminationGracePeriodSeconds"], stop)
        self.assertEqual(c["resources"]["limits"]["nvidia.com/gpu"], 1, "one gemmd per GPU")
        # The environment moves the listeners to the pod IP, and names gemmd options.
        env = {e["name"]: e["value"] for e in c["env"]}
        self.assertEqual(env["GEMMD_METRICS_LISTEN"], "0.0.0.0:9464")
        self.assertEqual(env["GEMMD_GRPC_LISTEN"], "0.0.0.0:50051")
        helptext = subprocess.run([H.repo_path("daemon/gemmd"), "--help"], capture_output=True, text=True,
                                  timeout=30).stdout
        for name in env:
            self.assertIn("--%s " % name[len("GEMMD_"):].lower().replace("_", "-"), helptext, name)
        # The ConfigMap is the example configuration, mounted where the args read it.
        cm = self.objs[("ConfigMap", "gemmd-config")]
        with open(deploy_path("gemmd.conf.example")) as f:
            self.assertEqual(cm["data"]["gemmd.conf"], f.read())
        vols = {v["name"]: v for v in pod["spec"]["volumes"]}
        mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
        self.assertEqual(vols["config"]["configMap"]["name"], "gemmd-config")
        self.assertIn(mounts["config"] + "/gemmd.conf", c["args"])

    def test_prometheus_rule_is_the_rules_file(self):
        import yaml

        with open(deploy_path("monitoring/gemmd-alerts.rules.yaml")) as f:
            rules = yaml.safe_load(f)
        self.assertEqual(self.objs[("PrometheusRule", "gemmd")]["spec"], rules)


if __name__ == "__main__":
    unittest.main(verbosity=2)
