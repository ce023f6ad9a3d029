#!/usr/bin/env python3
"""mirror.py SRC DEST: make DEST hold the checkout SRC's source files, rewriting only those whose
content (or executable bit) differs, and removing those SRC no longer has.

Why: cargo judges a workspace crate's build fresh by its files' times, and a fresh clone's files are
all new, so building in each clone rebuilt every workspace crate. Built in one mirror instead, a file's
time there is when its content last changed there: cargo then rebuilds exactly what differs from the
last build, from whichever checkout it came, and never less.

The files are git's (tracked and untracked, not ignored); outside a git checkout, every file but
build outputs and testbed state."""
import os
import subprocess
import sys

SKIP_DIRS = {".git", "target"}
SKIP_PREFIXES = (".testbed", ".tools", "target-")


def listed(src):
    try:
        out = subprocess.run(
            ["git", "-C", src, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            check=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        ).stdout
        names = [n.decode() for n in out.split(b"\0") if n]
    except (OSError, subprocess.CalledProcessError):
        names = []
        for d, dirs, files in os.walk(src):
            dirs[:] = [x for x in dirs if x not in SKIP_DIRS and not x.startswith(SKIP_PREFIXES)]
            names += [os.path.relpath(os.path.join(d, f), src) for f in files]
    # A tracked file deleted in the working tree is listed by git but gone.
    return {n for n in names if os.path.lexists(os.path.join(src, n))}


def same(a, b):
    if os.path.islink(a) or os.path.islink(b):
        return os.path.islink(a) and os.path.islink(b) and os.readlink(a) == os.readlink(b)
    if not os.path.isfile(b) or os.path.getsize(a) != os.path.getsize(b):
        return False
    if os.access(a, os.X_OK) != os.access(b, os.X_OK):
        return False
    with open(a, "rb") as fa, open(b, "rb") as fb:
        return fa.read() == fb.read()


def copy(a, b):
    os.makedirs(os.path.dirname(b), exist_ok=True)
    tmp = b + ".mirror-tmp"
    if os.path.lexists(tmp):
        os.remove(tmp)
    if os.path.islink(a):
        os.symlink(os.readlink(a), tmp)
    else:
        with open(a, "rb") as fa, open(tmp, "wb") as fb:
            fb.write(fa.read())
        os.chmod(tmp, os.stat(a).st_mode & 0o777)
    if os.path.isdir(b) and not os.path.islink(b):
        raise SystemExit(f"mirror: {b} is a directory in the mirror, a file in the checkout")
    os.replace(tmp, b)


def mirror(src, dest):
    names = listed(src)
    if not names:
        raise SystemExit(f"mirror: no source files found in {src}")
    changed = 0
    for n in sorted(names):
        a, b = os.path.join(src, n), os.path.join(dest, n)
        if not same(a, b):
            copy(a, b)
            changed += 1
    removed = 0
    for d, dirs, files in os.walk(dest, topdown=False):
        for f in files:
            rel = os.path.relpath(os.path.join(d, f), dest)
            if rel not in names:
                os.remove(os.path.join(d, f))
                removed += 1
        if d != dest and not os.listdir(d):
            os.rmdir(d)
    return len(names), changed, removed


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    total, changed, removed = mirror(argv[1], argv[2])
    print(f"mirror: {total} files, {changed} rewritten, {removed} removed", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
