#!/usr/bin/env python3
"""Lists pairs of sibling modules that import each other (`a` names `crate::b`/`super::b` and `b`
names `a`), in every crate's src/. Production code only: comments, `*_tests.rs` files and everything
after a file's `#[cfg(test)]` are ignored (a test module's `super::` is its own file). Binaries under
src/bin are skipped. Exit 1 when a pair exists, naming it; 0 otherwise."""
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


cycles = []
for manifest in sorted(root.glob("*/Cargo.toml")):
    mods = modules(manifest.parent / "src")
    uses = {}
    for m, text in mods.items():
        named = set()
        for hit in re.finditer(r"\b(crate|super)((?:::\w+)+)", text):
            base = () if hit.group(1) == "crate" else m[:-1]
            path = base + tuple(hit.group(2).strip(":").split("::"))
            for k in range(len(path), 0, -1):
                if path[:k] in mods:
                    named.add(path[:k])
                    break
        uses[m] = named
    for a, named in uses.items():
        for b in named:
            if a < b and a[:-1] == b[:-1] and a in uses.get(b, ()):
                cycles.append(f"{manifest.parent.name}: {'::'.join(a)} and {'::'.join(b)} import each other")

for line in cycles:
    print(line)
sys.exit(1 if cycles else 0)
