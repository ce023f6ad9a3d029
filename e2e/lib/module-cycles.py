#!/usr/bin/env python3
"""Lists cycles among sibling modules (`a` names `crate::b`, `super::b` or a grouped
`use crate::{b, c::d}`, `b` names `a`, directly or around a longer loop), in every crate's src/. A
name in a child module counts for its ancestor below the two modules' common parent; a module naming
its own ancestor or descendant is no cycle. Production code only: comments, `*_tests.rs` files and
everything after a file's `#[cfg(test)]` are ignored (a test module's `super::` is its own file).
Binaries under src/bin are skipped. Exit 1 when a cycle exists, naming it; 0 otherwise."""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()


def code(text):
    text = text.split("#[cfg(test)]", 1)[0]
    return "\n".join(line.split("//", 1)[0] for line in text.splitlines())


def modules(src):
    """Module path (tuple) -> its production code."""
    found = {}
    for f in src.rglob("*.rs"):
        parts = list(f.relative_to(src).with_suffix("").parts)
        if parts[0] == "bin" or parts[-1].endswith("_tests"):
            continue
        if parts[-1] in ("mod", "lib", "main"):
            parts = parts[:-1]
        found[tuple(parts)] = code(f.read_text())
    return found


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
