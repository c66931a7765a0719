"""A real `primd run --listen` for the live tests: the cargo-built binary (PRIMD_BIN, as
tools/python-tests sets it), the model in models/ (`models/fetch`), the demo index
tests/data/demo-x86.idx, a unix socket in a temporary folder. Ready when it greets:
the helper connects until the hello line comes (or primd exits, which fails the test
with its log)."""

import os
import shutil
import socket
import subprocess
import tempfile
import time
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
DEMO_INDEX = os.path.join(ROOT, "tests", "data", "demo-x86.idx")
MODEL = os.path.join(ROOT, "models")


def grow(text):
    """The growing hypotheses a recognizer prints for `text` (all but the whole)."""
    words = text.split()
    return [" ".join(words[:n]) for n in range(1, len(words))]


def primd_bin():
    path = os.environ.get("PRIMD_BIN") or os.path.join(
        os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "debug", "primd")
    if not os.access(path, os.X_OK):
        raise RuntimeError(f"no primd binary at {path}: run `cargo build` or set PRIMD_BIN "
                           "(tools/python-tests does both)")
    return path


class Primd:
    """`with Primd() as p: Client.connect(p.address)`; `p.index` is a private copy."""

    def __init__(self, extra=(), index=DEMO_INDEX):
        self.dir = tempfile.mkdtemp(prefix="primd-test-")
        self.index = os.path.join(self.dir, "index.idx")
        shutil.copyfile(index, self.index)
        self.sock = os.path.join(self.dir, "primd.sock")
        self.address = f"unix:{self.sock}"
        self.log_path = os.path.join(self.dir, "primd.log")
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [primd_bin(), "run", "--listen", self.address, "--index", self.index,
             "--model", MODEL, "--input", "none", *extra],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=self.log)
        self.hello = self._wait_for_hello()

    def _wait_for_hello(self, limit_s=120):
        deadline = time.monotonic() + limit_s
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"primd exited with {self.proc.returncode}: {self.read_log()}")
            try:
                with socket.socket(socket.AF_UNIX) as s:
                    s.settimeout(limit_s)
                    s.connect(self.sock)
                    with s.makefile("rb") as f:
                        line = f.readline()
                    if line:
                        return line
            except (FileNotFoundError, ConnectionRefusedError):
                pass  # not bound yet: primd is still loading the model
            if time.monotonic() > deadline:
                raise RuntimeError(f"primd did not greet within {limit_s} s: {self.read_log()}")
            time.sleep(0.05)

    def read_log(self):
        self.log.flush()
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")[-4000:]

    def stop(self):
        self.proc.stdin.close()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


class SharedPrimd(unittest.TestCase):
    """A test class whose tests share one daemon, `self.primd` (started once)."""

    @classmethod
    def setUpClass(cls):
        cls.primd = Primd()

    @classmethod
    def tearDownClass(cls):
        cls.primd.stop()
