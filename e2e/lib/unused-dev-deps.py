#!/usr/bin/env python3
"""Lists dev-dependencies no test, bench or source file of their crate names (cargo-machete checks
[dependencies] only). A dev-dependency counts as used when some .rs file of the crate mentions
`<name>::`, `<name>!` or `use <name>` (the key with - as _, or its [lib] name for a path dependency).
Exit 1 when one is unused, naming it; 0 otherwise."""
import pathlib
import re
import sys
import tomllib

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
workspace = tomllib.loads((root / "Cargo.toml").read_text())
aliases = workspace.get("workspace", {}).get("dependencies", {})


def code_name(key, spec, crate_dir):
    """The identifier code uses for the dependency `key`: a renamed one (`package = ...`) by its key,
    a path one by its [lib] name, any other by its key with - as _."""
    base = crate_dir
    if isinstance(spec, dict) and spec.get("workspace"):
        spec, base = aliases.get(key, {}), root
    if not isinstance(spec, dict) or "package" in spec or "path" not in spec:
        return key.replace("-", "_")
    lib = tomllib.loads((base / spec["path"] / "Cargo.toml").read_text()).get("lib", {})
    return lib.get("name", key.replace("-", "_"))


unused = []
for member in workspace["workspace"]["members"]:
    crate_dir = root / member
    manifest = tomllib.loads((crate_dir / "Cargo.toml").read_text())
    sources = "\n".join(p.read_text() for p in crate_dir.rglob("*.rs") if "target" not in p.parts)
    for key, spec in manifest.get("dev-dependencies", {}).items():
        name = code_name(key, spec, crate_dir)
        if not re.search(rf"\b{re.escape(name)}(::|!|\s*;)|\buse\s+{re.escape(name)}\b", sources):
            unused.append(f"{member}/Cargo.toml: dev-dependency `{key}` (used as `{name}`) is not used")

for line in unused:
    print(line)
sys.exit(1 if unused else 0)
