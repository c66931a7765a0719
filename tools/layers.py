#!/usr/bin/env python3
"""The floor plan of the primd crate: which file uses which, cycles, and up-arrows.

Why: a cycle between two files is a missing third file, and a module that reaches up to
a higher layer drags that layer into everything below it (the fuzz crate, the index
tools). This script lists the `use` edges between the files of `src/` (the library,
rooted at src/lib.rs, and the binary, rooted at src/main.rs), resolves each imported
name to the file that defines it (through `pub use` re-exports, which are a module's
facade and not an edge of their own), and reports:

- cycles: strongly connected sets of files, each with one path around it;
- up-arrows: an edge from a module to a module of a higher layer in LAYERS below.

Code under `#[cfg(test)]` (inline test modules, `mod tests;` files) is left out: a test
may drive its module from above. Comments, doc links and strings are not code.

    python3 tools/layers.py            # report; exit 1 on a cycle or an up-arrow
    python3 tools/layers.py --edges    # also print every file -> file edge
    python3 tools/layers.py --check    # quiet unless something is wrong (CI)

The layer order (lowest first; a module may use its own layer and every layer below).
docs/architecture.md draws it.
"""

import argparse
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")

# Lowest first. A module path belongs to the layer of its longest listed prefix.
LAYERS = [
    # 0. ground floor: word rules, line sources, run-time kernel choice, small services
    ["simd", "parallel", "notify", "words", "input"],
    # 1. kernels (per-architecture inner loops, scalar twins) and the result type
    ["scan", "qgemm", "hits", "lexical::kernels", "lexical::bm25"],
    # 2. the lexical section: format, analyzer, reader, searcher, writer
    ["lexical"],
    # 3. the index file (dense part and lexical section)
    ["index"],
    # 4. the embedder
    ["embed"],
    # 5. results: fusion rules, which retriever, confidence of a top-1
    ["fusion", "ranking", "confidence"],
    # 6. retrievers over an open index: dense, and all three behind one searcher
    ["dense", "retriever"],
    # 7. what an answer carries beyond its passages: the sentences that answer, and the
    #    conversation a turn is retrieved in
    ["context", "conversation"],
    # 8. the streaming policy and the order of work
    ["stream", "scheduler"],
    # 9. settings, the service and what it writes
    ["config", "flags", "output", "hub", "daemon", "wyoming", "announce"],
    # 10. measuring, test helpers, the crate root
    ["eval", "bench", "testing", "lib.rs"],
    # 11. the binary: command line and commands
    ["bin"],
]


def strip_code(src):
    """Source with comments, strings and char literals blanked (newlines kept)."""
    out = []
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            i = j
        elif src.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if src.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif src.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append("\n" * src.count("\n", i, j))
            i = j
        elif c == "r" and re.match(r'r#*"', src[i:i + 10]) and (i == 0 or not (src[i - 1].isalnum() or src[i - 1] == "_")):
            m = re.match(r'r(#*)"', src[i:])
            end = '"' + m.group(1)
            j = src.find(end, i + len(m.group(0)))
            j = n if j < 0 else j + len(end)
            out.append('""' + "\n" * src.count("\n", i, j))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            out.append('""' + "\n" * src.count("\n", i, j))
            i = j + 1
        elif c == "'":
            m = re.match(r"'(\\.[^']*|[^\\'])'", src[i:])
            if m:
                out.append("' '")
                i += len(m.group(0))
            else:  # a lifetime
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def skip_item(code, i):
    """End of the item starting at i: its `;` at depth 0, or its first block's `}`."""
    depth = 0
    n = len(code)
    while i < n:
        c = code[i]
        if c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
        elif c == ";" and depth == 0:
            return i + 1
        elif c == "{":
            d, j = 1, i + 1
            while j < n and d:
                d += {"{": 1, "}": -1}.get(code[j], 0)
                j += 1
            return j
        i += 1
    return n


CFG_TEST = re.compile(r"#\[cfg\((test|all\(test\b[^\]]*)\)\]")


def strip_tests(code):
    """Code without `#[cfg(test)]` items; also returns the test-only child modules."""
    test_mods = set()
    while True:
        m = CFG_TEST.search(code)
        if not m:
            return code, test_mods
        j = m.end()
        while True:  # further attributes
            a = re.match(r"\s*#\[", code[j:])
            if not a:
                break
            d, j = 0, j + a.end() - 1
            while True:  # to the attribute's closing bracket
                d += {"[": 1, "]": -1}.get(code[j], 0)
                j += 1
                if d == 0:
                    break
        mm = re.match(r"\s*(pub(\([^)]*\))?\s+)?mod\s+(\w+)\s*;", code[j:])
        if mm:
            test_mods.add(mm.group(3))
        end = skip_item(code, j)
        code = code[:m.start()] + "\n" * code.count("\n", m.start(), end) + code[end:]


def split_use_tree(tree, prefix, out):
    """`a::{b, c::{d as e}, f::*}` -> [(path segments, local name or '*')]."""
    tree = tree.strip()
    # top-level split on `::{`
    depth = 0
    for k, ch in enumerate(tree):
        if ch == "{":
            if depth == 0:
                head = tree[:k].rstrip(":").strip()
                body = tree[k + 1:tree.rindex("}")]
                base = prefix + [s for s in head.split("::") if s]
                parts, d, last = [], 0, 0
                for q, c2 in enumerate(body):
                    d += {"{": 1, "}": -1}.get(c2, 0)
                    if c2 == "," and d == 0:
                        parts.append(body[last:q])
                        last = q + 1
                parts.append(body[last:])
                for p in parts:
                    if p.strip():
                        split_use_tree(p, base, out)
                return
            depth += 1
    m = re.match(r"(.*?)(?:\s+as\s+(\w+))?$", tree, re.S)
    segs = prefix + [s.strip() for s in m.group(1).split("::") if s.strip()]
    if segs and segs[-1] == "self":
        segs = segs[:-1]
    if not segs:
        return
    name = m.group(2) or segs[-1]
    out.append((segs, name))


ITEM = re.compile(
    r"^\s*(?:pub(?:\([^)]*\))?\s+)?(?:(?:async|unsafe|const|extern\s+\"C\")\s+)*"
    r"(fn|struct|enum|trait|type|const|static|union|macro_rules!)\s+(\w+)", re.M)
MOD = re.compile(r"^\s*(?:#\[path\s*=\s*\"([^\"]*)\"\]\s*)?(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*([;{])", re.M)
USE = re.compile(r"^\s*(pub(?:\([^)]*\))?\s+)?use\s+([^;]*);", re.M)
PATH = re.compile(r"(?<![\w:])((?:crate|super|self|primd|[a-z_]\w*)(?:::[A-Za-z_]\w*)+)")


class Module:
    def __init__(self, crate, path, file):
        self.crate, self.path, self.file = crate, path, file
        self.children = {}
        self.items = set()
        self.bindings = {}  # local name -> (absolute segments, is_pub)
        self.globs = []
        self.refs = []  # (segments relative-resolvable, origin module)
        self.parent = None


def load_crate(crate, root_file, modules):
    raw = open(root_file, encoding="utf-8").read()
    code = strip_code(raw)
    root = Module(crate, [], root_file)
    modules[(crate, ())] = root
    parse_module(root, code, modules)
    return root


def inline_super(code):
    """Inside an inline `mod x { ... }`, `super::` names this file's module: rewrite it
    as `self::` (this script resolves per file)."""
    for m in reversed(list(re.finditer(r"\bmod\s+\w+\s*\{", code))):
        end = skip_item(code, m.end() - 1)
        code = code[:m.end()] + code[m.end():end].replace("super::", "self::") + code[end:]
    return code


def parse_module(mod, code, modules):
    # Paths and attributes use raw text; strip_code blanked strings, so read #[path] from
    # the original file for this module's own `mod` lines.
    raw = open(mod.file, encoding="utf-8").read()
    code, test_mods = strip_tests(code)
    code = inline_super(code)
    # A macro's paths are resolved where it expands, not here.
    for m in reversed(list(re.finditer(r"\bmacro_rules!\s*(\w+)\s*\{", code))):
        mod.items.add(m.group(1))
        end = skip_item(code, m.end() - 1)
        code = code[:m.start()] + "\n" * code.count("\n", m.start(), end) + code[end:]
    paths = dict((m.group(2), m.group(1)) for m in MOD.finditer(raw) if m.group(1))
    for m in ITEM.finditer(code):
        mod.items.add(m.group(2))
    base = os.path.dirname(mod.file)
    own = os.path.basename(mod.file) in ("mod.rs", "lib.rs", "main.rs")
    for m in MOD.finditer(code):
        name, kind = m.group(2), m.group(3)
        if kind == "{":  # inline module: part of this file
            mod.items.add(name)
            continue
        if name in test_mods:
            continue
        if name in paths:
            f = os.path.normpath(os.path.join(base, paths[name]))
        else:
            d = base if own else mod.file[:-3]
            f = os.path.join(d, name + ".rs")
            if not os.path.exists(f):
                f = os.path.join(d, name, "mod.rs")
        child = Module(mod.crate, mod.path + [name], f)
        child.parent = mod
        mod.children[name] = child
        modules[(mod.crate, tuple(child.path))] = child
        parse_module(child, strip_code(open(f, encoding="utf-8").read()), modules)
    spans = []
    for m in USE.finditer(code):
        spans.append((m.start(), m.end()))
        out = []
        split_use_tree(m.group(2), [], out)
        is_pub = bool(m.group(1))
        for segs, name in out:
            absolute = absolutize(mod, segs)
            if absolute is None:
                continue
            if name == "*":
                mod.globs.append(absolute[:-1] if absolute[-1] == "*" else absolute)
            else:
                mod.bindings[name] = (absolute, is_pub)
            if not is_pub:
                mod.refs.append(absolute)
    rest = code
    for a, b in reversed(spans):
        rest = rest[:a] + rest[b:]
    for m in PATH.finditer(rest):
        segs = m.group(1).split("::")
        if segs[0] in ("crate", "super", "self", "primd") or segs[0] in mod.children:
            absolute = absolutize(mod, segs)
            if absolute is not None:
                mod.refs.append(absolute)


def absolutize(mod, segs):
    """Segments as ('crate'|'primd', ...) or None for paths outside primd."""
    if segs[0] == "crate":
        return [mod.crate] + segs[1:]
    if segs[0] == "primd":
        return ["lib"] + segs[1:]
    m, k = mod, 0
    while k < len(segs) and segs[k] in ("super", "self"):
        if segs[k] == "super":
            m = m.parent
        k += 1
    rest = segs[k:]
    if k == 0 and rest and rest[0] not in mod.children:
        return None  # std, a dependency, or a local binding (already an edge)
    return [m.crate] + m.path + rest


def resolve(modules, segs, seen=None):
    """The module whose file defines what `segs` (absolute) names."""
    seen = seen or set()
    key = tuple(segs)
    if key in seen:
        return None
    seen.add(key)
    m = modules.get((segs[0], ()))
    rest = segs[1:]
    while rest:
        name = rest[0]
        if name == "*":
            return m
        if name in m.children:
            m, rest = m.children[name], rest[1:]
            continue
        if name in m.items:
            return m
        if name in m.bindings:
            target = m.bindings[name][0] + rest[1:]
            r = resolve(modules, target, seen)
            return r if r is not None else m
        for g in m.globs:
            r = resolve(modules, g + rest, seen)
            if r is not None and r is not m:
                return r
        return m
    return m


def named(modules, segs):
    """The module a path names before any re-export is followed (its facade)."""
    m = modules.get((segs[0], ()))
    for name in segs[1:]:
        if name not in m.children:
            break
        m = m.children[name]
    return m


def layer_of(mod):
    if mod.crate == "bin":
        return len(LAYERS) - 1, "bin"
    if not mod.path:
        return len(LAYERS) - 2, "lib.rs"  # the crate root: it only declares the modules
    path = "::".join(mod.path)
    best = None
    for i, layer in enumerate(LAYERS):
        for prefix in layer:
            if path == prefix or path.startswith(prefix + "::"):
                if best is None or len(prefix) > len(best[1]):
                    best = (i, prefix)
    return best if best else (None, path)


def name(mod):
    return os.path.relpath(mod.file, ROOT)


def tarjan(nodes, edges):
    index, low, on, stack, out = {}, {}, set(), [], []
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def cycle_path(comp, edges):
    """One cycle through the component's first file, by breadth-first search."""
    start = comp[0]
    members = set(comp)
    prev, frontier = {start: None}, [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(edges.get(v, ())):
                if w == start:
                    path = [v]
                    while prev[path[-1]] is not None:
                        path.append(prev[path[-1]])
                    return list(reversed(path)) + [start]
                if w in members and w not in prev:
                    prev[w] = v
                    nxt.append(w)
        frontier = nxt
    return comp


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--edges", action="store_true", help="print every file -> file edge")
    ap.add_argument("--check", action="store_true", help="print only problems")
    args = ap.parse_args()
    modules = {}
    load_crate("lib", os.path.join(ROOT, "src/lib.rs"), modules)
    load_crate("bin", os.path.join(ROOT, "src/main.rs"), modules)
    edges, why, facades = {}, {}, set()
    for m in modules.values():
        for segs in m.refs:
            f = named(modules, segs)
            t = resolve(modules, segs)
            if (t is not None and f.file != t.file and f.file != m.file
                    and m.path[:len(f.path)] != f.path):
                facades.add((m.file, f.file, "::".join(segs[1:])))
            if t is None or t.file == m.file:
                continue
            edges.setdefault(m.file, set()).add(t.file)
            why.setdefault((m.file, t.file), "::".join(segs[1:]))
    by_file = {m.file: m for m in modules.values()}
    problems = 0
    if args.edges:
        for a in sorted(edges):
            for b in sorted(edges[a]):
                print(f"{name(by_file[a])} -> {name(by_file[b])}  ({why[(a, b)]})")
    unplaced = sorted({layer_of(m)[1] for m in modules.values() if layer_of(m)[0] is None})
    for u in unplaced:
        print(f"not in any layer: {u}")
        problems += 1
    ups = []
    for a in sorted(edges):
        la = layer_of(by_file[a])[0]
        for b in sorted(edges[a]):
            lb = layer_of(by_file[b])[0]
            if la is not None and lb is not None and lb > la:
                ups.append((a, b, la, lb))
    for a, b, la, lb in ups:
        print(f"up-arrow: {name(by_file[a])} (layer {la}) -> {name(by_file[b])} (layer {lb}): {why[(a, b)]}")
    problems += len(ups)
    # Reaching a lower module through a higher one's re-export still ties the two.
    for a, f, path in sorted(facades):
        la, lf = layer_of(by_file[a])[0], layer_of(by_file[f])[0]
        if la is not None and lf is not None and lf > la:
            print(f"up-arrow through a re-export: {name(by_file[a])} (layer {la}) names "
                  f"{name(by_file[f])} (layer {lf}): {path}")
            problems += 1
            ups.append((a, f, la, lf))
    # A file may use the declarations of the module it is part of (`super::`: a mod.rs
    # holds what its children share, as scan/mod.rs holds the kernels' types). Those
    # edges obey the layers, but a mod.rs dispatching to its children is not a cycle.
    def ancestor(a, b):
        ma, mb = by_file[a], by_file[b]
        return ma.crate == mb.crate and ma.path[:len(mb.path)] == mb.path
    cycle_edges = {a: {b for b in bs if not ancestor(a, b)} for a, bs in edges.items()}
    comps = tarjan(set(by_file), cycle_edges)
    for comp in comps:
        path = cycle_path(comp, cycle_edges)
        print(f"cycle of {len(comp)} files: " + " -> ".join(name(by_file[f]) for f in path))
        for a, b in zip(path, path[1:]):
            print(f"    {name(by_file[a])} -> {name(by_file[b])}: {why[(a, b)]}")
    problems += len(comps)
    if not args.check or problems:
        print(f"{len(by_file)} files, {sum(len(v) for v in edges.values())} edges, "
              f"{len(comps)} cycles, {len(ups)} up-arrows")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
