#!/usr/bin/env python3
"""Lists cycles among sibling modules (`a` names `crate::b`, `super::b` or a grouped
`use crate::{b, c::d}`, `b` names `a`, directly or around a longer loop), in every crate's src/. A
name in a child module counts for its ancestor below the two modules' common parent; a module naming
its own ancestor or descendant is no cycle. Production code only: comments, string literals,
`*_tests.rs` files, each `#[cfg(test)]` item (a test module's block, a `use`, a helper) and the files
of modules declared under `#[cfg(test)]` are ignored (a test module's `super::` is its own file); the
code after a test module is read like the code before it. Binaries under src/bin are skipped. Exit 1
when a cycle exists, naming it; 0 otherwise."""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()




def modules(src):
    """Module path (tuple) -> its production code."""
    found, tests = {}, set()
    for f in src.rglob("*.rs"):
        parts = list(f.relative_to(src).with_suffix("").parts)
        if parts[0] == "bin" or parts[-1].endswith("_tests"):
            continue
        if parts[-1] in ("mod", "lib", "main"):
            parts = parts[:-1]
        found[tuple(parts)], test_mods = code(f.read_text())
        tests |= {tuple(parts) + (name,) for name in test_mods}
    # A module declared under `#[cfg(test)]` is test code, with everything below it.
    return {m: t for m, t in found.items() if not any(m[: len(t)] == t for t in tests)}


def split_top(body):
    """The items of a use group, split at commas outside nested braces."""
    items, depth, start = [], 0, 0
    for i, c in enumerate(body):
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        elif c == "," and depth == 0:
            items.append(body[start:i])
            start = i + 1
    items.append(body[start:])
    return [i.strip() for i in items if i.strip()]


def closing(text, open_at):
    """Index of the brace closing the one at `open_at`."""
    depth = 0
    for i in range(open_at, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return i
    return len(text)


LITERAL = re.compile(
    r"""//[^\n]*"""  # line comment (doc comments too)
    r"""|/\*.*?\*/"""  # block comment (not nested; none are here)
    r"""|b?r(#*)".*?"\1"""  # raw string
    r"""|b?"(?:\\.|[^"\\])*\""""  # string
    r"""|b?'(?:\\(?:u\{[0-9a-fA-F]+\}|x[0-9a-fA-F]{2}|.)|[^\\'\n])'""",  # char, not a lifetime
    re.S,
)
TEST_ATTR = re.compile(r"#\[cfg\(test\)\]")


def blank(text):
    """`text` without comments and literals, newlines kept: a brace in a string or a `#[cfg(test)]` in a
    doc comment must not move an item's end."""
    return LITERAL.sub(lambda m: "\n" * m.group(0).count("\n") if m.group(0).startswith("/") else '""', text)


def item_end(text, at):
    """Index just past the item starting at `at`: its `;` or the `}` closing its first top-level brace
    (with a `;` right after it, as in `use a::{b};`). Leading attributes belong to the item."""
    depth = 0
    i = at
    while i < len(text):
        c = text[i]
        if c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
        elif c == ";" and depth == 0:
            return i + 1
        elif c == "{" and depth == 0:
            end = closing(text, i) + 1
            after = re.match(r"\s*;", text[end:])
            return end + (after.end() if after else 0)
        i += 1
    return len(text)


def code(text):
    """Production code of a file: each `#[cfg(test)]` item (a test module's block, a `mod x;`
    declaration, a test-only `use` or helper) is cut, the rest is kept. Also returns the names of
    modules declared test-only, whose own files are test code."""
    text = blank(text)
    if re.search(r"#!\[cfg\(test\)\]", text):
        return "", set()
    kept, test_mods, pos = [], set(), 0
    for hit in TEST_ATTR.finditer(text):
        if hit.start() < pos:
            continue  # inside an item already cut
        end = item_end(text, hit.end())
        declared = re.match(r"(?:\s*#\[[^\]]*\])*\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;", text[hit.end() : end])
        if declared:
            test_mods.add(declared.group(1))
        kept.append(text[pos : hit.start()])
        pos = end
    kept.append(text[pos:])
    return "".join(kept), test_mods


def expand(prefix, body):
    """Full paths of a use group `prefix::{body}`."""
    paths = []
    for item in split_top(body):
        item = re.sub(r"\s+as\s+\w+$", "", item)
        if "{" in item:
            head, _, rest = item.partition("{")
            segs = [s for s in head.strip().strip(":").split("::") if s]
            paths += expand(prefix + tuple(segs), rest.rsplit("}", 1)[0])
        else:
            segs = [s.strip() for s in item.split("::") if s.strip() and s.strip() not in ("self", "*")]
            paths.append(prefix + tuple(segs))
    return paths


def named_paths(m, text):
    """Every `crate::`/`super::` path module `m` names, grouped imports expanded."""
    paths = []
    for hit in re.finditer(r"\b(crate|super)((?:::\w+)*)::\{", text):
        base = () if hit.group(1) == "crate" else m[:-1]
        head = tuple(s for s in hit.group(2).split("::") if s)
        brace = hit.end() - 1
        paths += expand(base + head, text[brace + 1 : closing(text, brace)])
    for hit in re.finditer(r"\b(crate|super)((?:::\w+)+)", text):
        base = () if hit.group(1) == "crate" else m[:-1]
        paths.append(base + tuple(hit.group(2).strip(":").split("::")))
    return paths


def sibling_edge(a, b):
    """`a` naming `b` as an edge between their ancestors below the common parent, or None."""
    k = 0
    while k < min(len(a), len(b)) and a[k] == b[k]:
        k += 1
    if k == len(a) or k == len(b):
        return None  # one is the other's ancestor
    return a[: k + 1], b[: k + 1]


def cycles_of(graph):
    """Strongly connected components with more than one module (Tarjan), each sorted."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
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

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def loop_through(graph, comp):
    """One loop through a component's first module, for the message."""
    start, members = comp[0], set(comp)
    path, seen = [start], {start}
    while True:
        nxt = sorted(w for w in graph.get(path[-1], ()) if w in members)
        back = [w for w in nxt if w == start]
        fresh = [w for w in nxt if w not in seen]
        if back and len(path) > 1:
            return path + [start]
        if not fresh:
            return path + [start]
        path.append(fresh[0])
        seen.add(fresh[0])


found = []
for manifest in sorted(root.glob("*/Cargo.toml")):
    mods = modules(manifest.parent / "src")
    graph = {}
    for m, text in mods.items():
        for path in named_paths(m, text):
            for k in range(len(path), 0, -1):
                if path[:k] in mods:
                    edge = sibling_edge(m, path[:k])
                    if edge:
                        graph.setdefault(edge[0], set()).add(edge[1])
                    break
    for comp in cycles_of(graph):
        members = ", ".join("::".join(m) for m in comp)
        loop = " -> ".join("::".join(m) for m in loop_through(graph, comp))
        found.append(f"{manifest.parent.name}: {members} import each other (e.g. {loop})")

for line in found:
    print(line)
sys.exit(1 if found else 0)
