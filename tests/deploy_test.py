"""What operators install, checked offline: the systemd units (systemd-analyze verify with
no complaint; sysusers.d and tmpfiles.d applied to a scratch root make the gemmd user, its
video membership and the directories), and every variable of the per-GPU environment file
is one of gemmd's options."""

import os
import re
import shutil
import subprocess
import time
import unittest

import harness as H

SYSTEMD = "deploy/systemd"


def deploy_file(name):
    return H.repo_path("%s/%s" % (SYSTEMD, name))


def tool(name):
    path = shutil.which(name)
    if path is None:
        raise unittest.SkipTest("%s is not installed (deploy/bootstrap.sh installs systemd)" % name)
    return path


class Systemd(unittest.TestCase):
    def setUp(self):
        self.tmp = os.path.join(H.tmpdir(), "deploy-%d" % time.monotonic_ns())
        os.makedirs(os.path.join(self.tmp, "units"))

    def test_template_unit_verifies(self):
        with open(deploy_file("gemmd@.service")) as f:
            unit = f.read()
        self.assertIn("Type=notify", unit)
        # The binary and the environment file where this checkout has them.
        unit = unit.replace("/opt/gemmd/gemmd", H.repo_path("daemon/gemmd"))
        env = os.path.join(self.tmp, "gpu%i.env")
        unit = unit.replace("EnvironmentFile=/etc/gemmd/gpu%i.env", "EnvironmentFile=" + env)
        shutil.copy(deploy_file("gpu.env.example"), env.replace("%i", "0"))
        with open(os.path.join(self.tmp, "units", "gemmd@.service"), "w") as f:
            f.write(unit)
        p = subprocess.run([tool("systemd-analyze"), "verify", "--man=no", "gemmd@0.service"],
                           env=dict(os.environ, SYSTEMD_UNIT_PATH=os.path.join(self.tmp, "units") + ":"),
                           capture_output=True, text=True, timeout=60)
        complaints = [line for line in (p.stdout + p.stderr).splitlines() if "gemmd@" in line]
        self.assertEqual((p.returncode, complaints), (0, []), p.stdout + p.stderr)

    def test_sysusers_and_tmpfiles(self):
        root = os.path.join(self.tmp, "root")
        os.makedirs(os.path.join(root, "etc"))
        subprocess.run([tool("systemd-sysusers"), "--root=" + root, deploy_file("gemmd.sysusers")],
                       check=True, capture_output=True, timeout=60)
        with open(os.path.join(root, "etc/passwd")) as f:
            user = [line for line in f if line.startswith("gemmd:")]
        self.assertEqual(len(user), 1)
        uid = int(user[0].split(":")[2])
        with open(os.path.join(root, "etc/group")) as f:
            groups = f.read()
        self.assertRegex(groups, r"(?m)^video:x:\d+:gemmd$")
        subprocess.run([tool("systemd-tmpfiles"), "--root=" + root, "--create", deploy_file("gemmd.tmpfiles")],
                       check=True, capture_output=True, timeout=60)
        for path, mode in (("run/gemmd", 0o755), ("var/lib/gemmd", 0o750)):
            st = os.stat(os.path.join(root, path))
            self.assertEqual((st.st_uid, st.st_mode & 0o777), (uid, mode), path)

    def test_environment_file_names_options(self):
        p = subprocess.run([H.repo_path("daemon/gemmd"), "--help"], capture_output=True, text=True, timeout=30)
        options = set(re.findall(r"^  --([a-z0-9-]+) ", p.stdout, re.M))
        with open(deploy_file("gpu.env.example")) as f:
            names = re.findall(r"^GEMMD_([A-Z0-9_]+)=", f.read(), re.M)
        self.assertTrue(names)
        for name in names:
            self.assertIn(name.lower().replace("_", "-"), options, "GEMMD_%s is no gemmd option" % name)


if __name__ == "__main__":
    unittest.main(verbosity=2)
