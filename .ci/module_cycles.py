#!/usr/bin/env python3
"""Import cycles between the modules of a Rust crate, read from its `crate::` / `super::` paths.

Usage: module_cycles.py SRC_DIR [--allow a::b,c::d ...]

A `src/main.rs` beside `src/lib.rs` is a second crate (the binary): the top-level modules it
declares (`mod cli;`) and the library does not are checked as its own tree, where `crate::` is
the binary (it names the library by its crate name, which is not followed). For each crate,
two graphs are checked, both on non-test code (`#[cfg(test)] mod ... { }` blocks, comments and
string literals are left out):
- top-level modules (`format`, `guard`, `server`, ...): one node per `src/NAME.rs` / `src/NAME/`;
- files: one node per file, edges between siblings and cousins only (a child naming its parent
  module, or a `mod.rs` re-exporting its children, is the usual facade and not counted).
Prints every cycle with its edges and exits 1 when one is found that `--allow` does not list
(an allowed cycle is given as its members, comma separated).
"""

import os
import re
import sys


def modules(src):
    """Module path (tuple of names) -> file, for every `.rs` file under `src`."""
    found = {}
    for root, _, files in os.walk(src):
        for f in files:
            if not f.endswith(".rs"):
                continue
            path = os.path.join(root, f)
            parts = os.path.relpath(path, src)[:-3].split(os.sep)
            if parts[-1] == "mod":
                parts = parts[:-1]
            if parts in (["lib"], ["main"]):
                parts = []
            found[tuple(parts)] = path
    return found


MOD_DECL = re.compile(r"^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;", re.M)


def crates(src, mods):
    """(label, module path -> file) per crate: the library (or the lone root), then the binary
    `src/main.rs` when a `src/lib.rs` stands beside it, holding the top-level modules main.rs
    declares and lib.rs does not (the rest stays with the library, as before)."""
    lib, main = os.path.join(src, "lib.rs"), os.path.join(src, "main.rs")
    if not (os.path.exists(lib) and os.path.exists(main)):
        return [(None, mods)]

    def declared(root):
        with open(root, encoding="utf-8") as f:
            return set(MOD_DECL.findall(code_of(f.read())))

    binary = declared(main) - declared(lib)
    in_bin = {p: f for p, f in mods.items() if p and p[0] in binary}
    in_lib = {p: f for p, f in mods.items() if p not in in_bin}
    in_bin[()] = main
    in_lib[()] = lib
    return [(None, in_lib), (f"binary {main}", in_bin)]


TEST_MOD = re.compile(r"#\[cfg\(test\)\]\s*(?:#\[[^\]]*\]\s*)*mod\s+\w+\s*\{")


def code_of(text):
    """The text without string literals, comments and test modules."""
    text = re.sub(r'r#+"[\s\S]*?"#+', '""', text)
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', text)
    text = re.sub(r"'(?:\\.|[^'\\])'", "' '", text)
    text = re.sub(r"//[^\n]*", "", text)
    out, i = [], 0
    m = TEST_MOD.search(text)
    while m:
        out.append(text[i : m.start()])
        depth, j = 1, m.end()
        while j < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        i = j
        m = TEST_MOD.search(text, i)
    out.append(text[i:])
    return "".join(out)


def expand(prefix, body):
    """Paths named by a use-group body (`a, b::{c, d}, e as f`)."""
    items, depth, cur = [], 0, ""
    for ch in body:
        if ch == "," and depth == 0:
            items.append(cur)
            cur = ""
            continue
        depth += (ch == "{") - (ch == "}")
        cur += ch
    items.append(cur)
    paths = []
    for item in (i.strip() for i in items):
        if not item:
            continue
        if "{" in item:
            head, rest = item.split("{", 1)
            paths += expand(prefix + [x for x in head.split("::") if x], rest[: rest.rfind("}")])
        else:
            name = item.split(" as ")[0]
            paths.append(prefix + [x for x in name.split("::") if x and x != "self"])
    return paths


def references(code):
    """(`crate` | `super`, path) for every path the code names."""
    for m in re.finditer(r"\b(crate|super)((?:::\w+)*)::\{", code):
        depth, j = 1, m.end()
        while depth and j < len(code):
            depth += (code[j] == "{") - (code[j] == "}")
            j += 1
        for path in expand(m.group(2).split("::")[1:], code[m.end() : j - 1]):
            yield m.group(1), path
    for m in re.finditer(r"\b(crate|super)((?:::\w+)+)(?!::\{)", code):
        yield m.group(1), m.group(2).split("::")[1:]


def graph(mods, per_file):
    def node(path):
        path = tuple(path)
        while path and path not in mods:
            path = path[:-1]
        return path if per_file else path[:1]

    edges = {}
    for me_path, file in mods.items():
        if not me_path:
            continue
        me = node(me_path)
        with open(file, encoding="utf-8") as f:
            code = code_of(f.read())
        for kind, path in references(code):
            base = [] if kind == "crate" else list(me_path[:-1])
            to = node(base + path)
            if not to or to == me:
                continue
            if per_file and (me[: len(to)] == to or to[: len(me)] == me):
                continue
            edges.setdefault(me, set()).add(to)
    return edges


def cycles(edges):
    """Strongly connected components of more than one node (Tarjan)."""
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
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
                found.append(comp)

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def main(argv):
    src = argv[1]
    allowed = [set(a.split(",")) for i, a in enumerate(argv) if i > 0 and argv[i - 1] == "--allow"]
    mods = modules(src)
    bad = 0
    for label, crate in crates(src, mods):
        where = f" ({label})" if label else ""
        for per_file in (False, True):
            edges = graph(crate, per_file)
            for comp in cycles(edges):
                names = {"::".join(c) for c in comp}
                ok = names in allowed
                bad += not ok
                print(f"{'allowed ' if ok else ''}import cycle{where}: {', '.join(sorted(names))}")
                for a in sorted(comp):
                    for b in sorted(edges.get(a, ())):
                        if b in comp:
                            print(f"    {'::'.join(a)} -> {'::'.join(b)}")
    if not bad:
        files = sum(len(crate) for _, crate in crates(src, mods))
        print(f"module_cycles: no import cycle in {src} ({files} files)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
