#!/usr/bin/env python3
"""The tiers of e2e/test-all: one test pass against one set of real parts, counted.

  tier.py count TIER LOG SUMMARY [--only-target NAME]...
      sum the libtest `test result:` lines of a `cargo test` log into
      `TIER<TAB>passed<TAB>failed<TAB>NOT_RUN_FILE<TAB>SKIPPED<TAB>ONLY`, appended to SUMMARY
      (NOT_RUN_FILE: the tier's $LINKERD_MULTUS_NOT_RUN_FILE, where linkerd_multus_e2e::not_run
      recorded its cases; ONLY: the test targets the log covers, empty for all).
  tier.py run TIER SUMMARY [--skip-target NAME]... [--only-target NAME]... -- [ARGS...]
      build the workspace's test executables (`cargo test --no-run`; with --only-target those alone,
      as `--test NAME`: integration test targets), run each of the named targets
      (all when none is named) but the skipped ones, as cargo would (from its package's directory,
      ARGS passed to each), and append the counts to SUMMARY. Tiers run side by side, and against
      other servers, this way: cargo test cannot leave out one test target of a package.
  tier.py skipped TIER REASON SUMMARY
      record a tier that was not run at all, and why.
  tier.py report SUMMARY
      per tier: `P passed, F failed, N cases not run` and each case with its reason, or `not run:
      REASON`; last, the cases no tier ran (`cases not run on any server: N`): a case one server
      lacks what it needs for but another ran counts as run.

Exit status of count/run: 1 when a test failed (or nothing ran at all: a pass that runs no test
proves nothing), else 0."""
import json
import os
import re
import subprocess
import sys
import time

RESULT = re.compile(r"^test result: \w+\. (\d+) passed; (\d+) failed;")


def count_lines(lines):
    passed = failed = 0
    for line in lines:
        m = RESULT.match(line.strip())
        if m:
            passed += int(m.group(1))
            failed += int(m.group(2))
    return passed, failed


def record(summary, tier, passed, failed, skipped=(), only=()):
    not_run = os.environ.get("LINKERD_MULTUS_NOT_RUN_FILE", "")
    with open(summary, "a") as f:
        f.write(f"{tier}\t{passed}\t{failed}\t{not_run}\t{','.join(skipped)}\t{','.join(only)}\n")
    print(f"tier {tier}: {passed} passed, {failed} failed", file=sys.stderr)
    return 1 if failed or not passed else 0


def executables(only=()):
    # Only the named targets are built when there are some: the node tiers start before the rest of
    # the workspace's tests are built.
    targets = [arg for name in only for arg in ("--test", name)]
    out = subprocess.run(
        ["cargo", "test", "--workspace", "--no-run", *targets, "--message-format=json", "--quiet"],
        check=True, stdout=subprocess.PIPE, text=True,
    ).stdout
    for line in out.splitlines():
        msg = json.loads(line)
        if msg.get("reason") == "compiler-artifact" and msg.get("executable") and msg["profile"]["test"]:
            yield msg["target"]["name"], msg["executable"], os.path.dirname(msg["manifest_path"])


def run(tier, summary, skip, only, args):
    passed = failed = 0
    for name, exe, pkg_dir in executables(only):
        if name in skip or (only and name not in only):
            continue
        started = time.monotonic()
        proc = subprocess.Popen([exe, *args], cwd=pkg_dir, stdout=subprocess.PIPE, text=True)
        lines = []
        for line in proc.stdout:
            # Flushed at once: the tests' own stderr (the node's `--nocapture`) goes straight to the
            # same log, and the two stay in order.
            sys.stdout.write(line)
            sys.stdout.flush()
            lines.append(line)
        proc.wait()
        p, f = count_lines(lines)
        print(f"tier {tier}: {name}: {p} passed, {f} failed in {time.monotonic() - started:.0f} s",
              file=sys.stderr)
        if proc.returncode != 0 and f == 0:
            f = 1  # a test binary that died without its summary line
            print(f"tier {tier}: {name} exited with {proc.returncode}", file=sys.stderr)
        passed += p
        failed += f
    return record(summary, tier, passed, failed, skip, only)


def not_run_cases(path):
    """case -> (reason, test target), from a file of `case<TAB>reason<TAB>target` lines."""
    cases = {}
    if path and os.path.exists(path):
        for line in open(path, errors="replace"):
            case, reason, target = (line.rstrip("\n").split("\t") + ["", ""])[:3]
            if case:
                cases[case] = (reason, target)
    return cases


def report(summary):
    ran = []  # (tier, cases not run in it, whether it ran a target)
    lines = open(summary).read().splitlines() if os.path.exists(summary) else []
    for line in lines:
        parts = line.split("\t")
        if len(parts) == 3 and parts[1] == "not run":
            print(f"tier {parts[0]}: not run: {parts[2]}")
            continue
        tier, passed, failed, path, skipped, only = (parts + ["", "", ""])[:6]
        cases = not_run_cases(path)
        skipped = set(filter(None, skipped.split(",")))
        only = set(filter(None, only.split(",")))
        ran.append((tier, cases, lambda t, s=skipped, o=only: t not in s and (not o or t in o)))
        print(f"tier {tier}: {passed} passed, {failed} failed, {len(cases)} cases not run")
        for case in sorted(cases):
            print(f"  - {case}: {cases[case][0]}")
    # A case ran somewhere when a tier that ran its target did not report it.
    every = {}
    for _, cases, _ in ran:
        for case, (_, target) in cases.items():
            every[case] = target
    nowhere = [
        case for case, target in sorted(every.items())
        if all(case in cases or not runs(target) for _, cases, runs in ran)
    ]
    print(f"cases not run on any server: {len(nowhere)}")
    for case in nowhere:
        why = "; ".join(f"{tier}: {cases[case][0]}" for tier, cases, _ in ran if case in cases)
        print(f"  - {case} ({why})")
    return 0


def targets(rest):
    """The --skip-target and --only-target names before `--`, and what follows it."""
    skip, only = [], []
    while len(rest) >= 2 and rest[0] in ("--skip-target", "--only-target"):
        (skip if rest[0] == "--skip-target" else only).append(rest[1])
        rest = rest[2:]
    if rest and rest[0] == "--":
        rest = rest[1:]
    return skip, only, rest


def main(argv):
    if len(argv) >= 5 and argv[1] == "count":
        _, only, _ = targets(argv[5:])
        with open(argv[3], errors="replace") as log:
            return record(argv[4], argv[2], *count_lines(log), only=only)
    if len(argv) >= 4 and argv[1] == "run":
        skip, only, rest = targets(argv[4:])
        return run(argv[2], argv[3], skip, only, rest)
    if len(argv) == 5 and argv[1] == "skipped":
        with open(argv[4], "a") as f:
            f.write(f"{argv[2]}\tnot run\t{argv[3]}\n")
        print(f"tier {argv[2]}: not run: {argv[3]}", file=sys.stderr)
        return 0
    if len(argv) == 3 and argv[1] == "report":
        return report(argv[2])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
