"""deploy/gemmd.conf.example names every option that `gemmd --help` lists, and gemmd
starts with it as its --config."""

import re
import subprocess
import unittest

import harness as H


class ConfigExample(unittest.TestCase):
    def test_example_has_every_option_and_loads(self):
        example = H.repo_path("deploy/gemmd.conf.example")
        helptext = subprocess.run([H.repo_path("daemon/gemmd"), "--help"], capture_output=True,
                                  text=True, timeout=30).stdout
        options = set(re.findall(r"^  --([a-z0-9-]+) ", helptext, re.M)) - {"config", "help", "version"}
        self.assertGreater(len(options), 20)
        with open(example) as f:
            text = f.read()
        named = set(re.findall(r"^#? ?([a-z0-9-]+) =", text, re.M))
        self.assertEqual(options - named, set(), "options missing from the example")
        self.assertEqual(named - options, set(), "the example names options gemmd does not have")
        with H.Gemmd("--config", example) as d:  # flags (free ports) override the file
            self.assertIn('file="%s"' % example, d.log_text())
            self.assertEqual(d.http("/readyz")[0], 200)


if __name__ == "__main__":
    unittest.main(verbosity=2)
