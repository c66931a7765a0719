#!/usr/bin/env python3
"""Reference logits for the reader test (tests/reader.rs).

Scores question + sentence pairs made from the bundled museum demo (demo/questions.jsonl
against sentences of demo/corpus.jsonl: for each question, the sentences of its expected
passage and of two others) with onnxruntime on the reader's own file (models/reader/,
written by models/fetch), and writes tests/data/reader-reference.jsonl:
{"question", "sentence", "logit"}. primd runs the same int8 weights with per-token
activation scales where onnxruntime uses one per tensor, so the test compares with a
tolerance.

Run by hand (needs onnxruntime, tokenizers, numpy), never by CI:
    python3 -m venv /tmp/ref && /tmp/ref/bin/pip install onnxruntime tokenizers numpy
    /tmp/ref/bin/python tools/reference/make_reader_reference.py [MODELS_DIR]
"""

import json
import os
import re
import sys

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(os.path.dirname(here))
models = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "models")
reader = os.path.join(models, "reader")

tok = Tokenizer.from_file(os.path.join(reader, "tokenizer.json"))
tok.no_padding()
tok.no_truncation()
opts = ort.SessionOptions()
opts.intra_op_num_threads = 1
sess = ort.InferenceSession(os.path.join(reader, "model.onnx"), opts,
                            providers=["CPUExecutionProvider"])


def logit(question, sentence):
    enc = tok.encode(question, sentence)
    feed = {
        "input_ids": np.array([enc.ids], dtype=np.int64),
        "attention_mask": np.array([enc.attention_mask], dtype=np.int64),
        "token_type_ids": np.array([enc.type_ids], dtype=np.int64),
    }
    return float(sess.run(None, feed)[0][0][0])


def sentences(text):
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+", text) if s.strip()]


corpus = {}
with open(os.path.join(root, "demo/corpus.jsonl"), encoding="utf-8") as f:
    for line in f:
        d = json.loads(line)
        corpus[d["id"]] = d["text"]
ids = sorted(corpus)
pairs = []
with open(os.path.join(root, "demo/questions.jsonl"), encoding="utf-8") as f:
    for i, line in enumerate(f):
        q = json.loads(line)
        others = [ids[(i * 7 + 3) % len(ids)], ids[(i * 13 + 5) % len(ids)]]
        for pid in [q["expected_id"]] + [o for o in others if o != q["expected_id"]]:
            for s in sentences(corpus[pid])[:4]:
                pairs.append((q["final"], s))

out_path = os.path.join(root, "tests/data/reader-reference.jsonl")
with open(out_path, "w", encoding="utf-8") as out:
    for question, sentence in pairs:
        out.write(json.dumps({"question": question, "sentence": sentence,
                              "logit": round(logit(question, sentence), 5)}) + "\n")
print(f"wrote {len(pairs)} pairs to {out_path}")
