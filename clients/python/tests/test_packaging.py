"""The package as pip sees it: its docstring names modules that exist, its extras pin
the framework versions the adapters are tested with, and building it leaves the source
tree as it was (no build/ or *.egg-info written next to the code)."""

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
import zipfile

import primd_client

PKG = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(os.path.dirname(PKG))


class Packaging(unittest.TestCase):
    def test_the_docstring_names_modules_that_exist(self):
        named = set(re.findall(r"`(primd_client\.\w+)`", primd_client.__doc__))
        self.assertTrue(named, primd_client.__doc__)
        for name in named:
            self.assertIsNotNone(importlib.util.find_spec(name), f"{name} (docstring) does not exist")

    def test_extras_pin_the_tested_framework_versions(self):
        with open(os.path.join(ROOT, "tests", "python", "requirements.txt")) as f:
            tested = dict(re.findall(r"^([\w-]+)==(\S+)", f.read(), re.M))
        with open(os.path.join(PKG, "pyproject.toml")) as f:
            pyproject = f.read()
        for extra, package in [("pipecat", "pipecat-ai"), ("livekit", "livekit-agents")]:
            m = re.search(rf'^{extra} = \["{package}==([^"]+)"\]$', pyproject, re.M)
            self.assertIsNotNone(m, f"[{extra}] is not pinned to one version of {package}")
            self.assertEqual(m.group(1), tested[package], f"[{extra}]")

    def test_building_the_wheel_writes_nothing_into_the_source_tree(self):
        with tempfile.TemporaryDirectory() as tmp:
            src = os.path.join(tmp, "src")
            shutil.copytree(PKG, src, ignore=shutil.ignore_patterns("__pycache__", "tests"))
            before = sorted(os.listdir(src))
            out = os.path.join(tmp, "wheels")
            # The backend comes from this venv (tests/python/requirements.txt): no network.
            r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                                "--no-build-isolation", "--disable-pip-version-check",
                                "-w", out, src], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(sorted(os.listdir(src)), before, "files left in the source tree")
            (wheel,) = os.listdir(out)
            names = zipfile.ZipFile(os.path.join(out, wheel)).namelist()
            for module in ["__init__", "pipecat_adapter", "livekit_adapter", "turns"]:
                self.assertIn(f"primd_client/{module}.py", names)


if __name__ == "__main__":
    unittest.main()
