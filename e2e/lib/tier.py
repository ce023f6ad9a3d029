#!/usr/bin/env python3
"""The tiers of e2e/test-all: one test pass against one set of real parts, counted.

  tier.py count TIER LOG SUMMARY [--only-target NAME]...
      sum the libtest `test result:` lines of a `cargo test` log into
      `TIER<TAB>passed<TAB>failed<TAB>NOT_RUN_FILE<TAB>SKIPPED<TAB>ONLY`, appended to SUMMARY
      (NOT_RUN_FILE: the tier's $LINKERD_MULTUS_NOT_RUN_FILE, where linkerd_multus_e2e::not_run
      recorded its cases; ONLY: the test targets the log covers, empty for all).
  tier.py run TIER SUMMARY [--skip-target NAME]... [--only-target NAME]... [--beside-target NAME]...
          [--executables FILE] -- [ARGS...]
      build the workspace's test executables (`cargo test --no-run`; with --only-target those alone,
      as `--test NAME`: integration test targets), or with --executables read them from FILE (the
      JSON lines of a `cargo test --no-run --message-format=json` that built them: no cargo run, so
      no wait on the target directory's lock that clippy holds beside), run each of the named targets
      (all when none is named) but the skipped ones, as cargo would (from its package's directory,
      ARGS passed to each), and append the counts to SUMMARY. Tiers run side by side, and against
      other servers, this way: cargo test cannot leave out one test target of a package.
      The targets named by --beside-target run one after another in a second lane, beside the
      others' lane: targets that never use the tier's shared apiserver (they start control planes of
      their own, or none). They are fenced from it: no KUBECONFIG, and LINKERD_MULTUS_TESTBED_DIR an
      empty directory (only the testbed's kubectl-path), so one that reached for it fails, loudly.
      Their output is shown whole when each ends.
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
import shutil
import subprocess
import sys
import tempfile
import threading
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


def executables(only=(), listing=None):
    if listing:
        with open(listing) as f:
            out = f.read()
    else:
        # Only the named targets are built when there are some: the node tiers start before the rest
        # of the workspace's tests are built.
        targets = [arg for name in only for arg in ("--test", name)]
        out = subprocess.run(
            ["cargo", "test", "--workspace", "--no-run", *targets, "--message-format=json", "--quiet"],
            check=True, stdout=subprocess.PIPE, text=True,
        ).stdout
    for line in out.splitlines():
        if not line.startswith("{"):
            continue
        msg = json.loads(line)
        if msg.get("reason") == "compiler-artifact" and msg.get("executable") and msg["profile"]["test"]:
            yield msg["target"]["name"], msg["executable"], os.path.dirname(msg["manifest_path"])


def run_target(tier, name, exe, pkg_dir, args, env=None, out_lock=None):
    """One test executable: (passed, failed). Streamed as it goes, or with `out_lock` (the beside
    lane) its stdout and stderr kept and written whole at its end."""
    started = time.monotonic()
    buffered = out_lock is not None
    proc = subprocess.Popen([exe, *args], cwd=pkg_dir, stdout=subprocess.PIPE, text=True, env=env,
                            stderr=subprocess.STDOUT if buffered else None)
    lines = []
    for line in proc.stdout:
        if not buffered:
            # Flushed at once: the tests' own stderr (the node's `--nocapture`) goes straight to the
            # same log, and the two stay in order.
            sys.stdout.write(line)
            sys.stdout.flush()
        lines.append(line)
    proc.wait()
    p, f = count_lines(lines)
    notes = [f"tier {tier}: {name}: {p} passed, {f} failed in {time.monotonic() - started:.0f} s"
             + (" (beside)" if buffered else "")]
    if proc.returncode != 0 and f == 0:
        f = 1  # a test binary that died without its summary line
        notes.append(f"tier {tier}: {name} exited with {proc.returncode}")
    if buffered:
        with out_lock:
            sys.stdout.write(f"--- {name} (beside) ---\n" + "".join(lines))
            sys.stdout.flush()
            print("\n".join(notes), file=sys.stderr, flush=True)
    else:
        print("\n".join(notes), file=sys.stderr, flush=True)
    return p, f


def fenced_env(fence):
    """The environment of the beside lane: the tier's shared apiserver out of reach."""
    env = dict(os.environ)
    env.pop("KUBECONFIG", None)
    shared = os.environ.get("LINKERD_MULTUS_TESTBED_DIR") or os.path.join(
        os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), ".testbed")
    kubectl = os.path.join(shared, "kubectl-path")
    if os.path.exists(kubectl):
        shutil.copy(kubectl, os.path.join(fence, "kubectl-path"))
    env["LINKERD_MULTUS_TESTBED_DIR"] = fence
    return env


def run(tier, summary, skip, only, beside, args, listing=None):
    chosen = [(name, exe, pkg_dir) for name, exe, pkg_dir in executables(only, listing)
              if name not in skip and (not only or name in only)]
    lock = threading.Lock()
    totals = [0, 0]
    fence = tempfile.mkdtemp(prefix="linkerd-multus-fence.")

    def add(pf):
        with lock:
            totals[0] += pf[0]
            totals[1] += pf[1]

    lanes = {}

    def beside_lane():
        started = time.monotonic()
        env = fenced_env(fence)
        for name, exe, pkg_dir in chosen:
            if name in beside:
                try:
                    add(run_target(tier, name, exe, pkg_dir, args, env, lock))
                except Exception as e:  # counted, never lost with the thread
                    print(f"tier {tier}: {name}: could not run: {e}", file=sys.stderr, flush=True)
                    add((0, 1))
        lanes["beside"] = time.monotonic() - started

    lane = threading.Thread(target=beside_lane)
    lane.start()
    started = time.monotonic()
    try:
        for name, exe, pkg_dir in chosen:
            if name not in beside:
                add(run_target(tier, name, exe, pkg_dir, args))
    finally:
        lanes["shared"] = time.monotonic() - started
        lane.join()
        shutil.rmtree(fence, ignore_errors=True)
    if beside:
        print(f"tier {tier}: the shared apiserver's lane took {lanes['shared']:.0f} s, the lane "
              f"beside it {lanes.get('beside', 0):.0f} s", file=sys.stderr, flush=True)
    return record(summary, tier, totals[0], totals[1], skip, only)


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
    """The --skip-target, --only-target, --beside-target and --executables values before `--`, and
    what follows it."""
    named = {"--skip-target": [], "--only-target": [], "--beside-target": [], "--executables": []}
    while len(rest) >= 2 and rest[0] in named:
        named[rest[0]].append(rest[1])
        rest = rest[2:]
    if rest and rest[0] == "--":
        rest = rest[1:]
    listing = named["--executables"][-1] if named["--executables"] else None
    return named["--skip-target"], named["--only-target"], named["--beside-target"], listing, rest


def main(argv):
    if len(argv) >= 5 and argv[1] == "count":
        _, only, _, _, _ = targets(argv[5:])
        with open(argv[3], errors="replace") as log:
            return record(argv[4], argv[2], *count_lines(log), only=only)
    if len(argv) >= 4 and argv[1] == "run":
        skip, only, beside, listing, rest = targets(argv[4:])
        rc = run(argv[2], argv[3], skip, only, set(beside), rest, listing)
        # For e2e/test-all, whose `wait` can lose a tier's status (a reused pid).
        status = os.environ.get("LINKERD_MULTUS_TIER_STATUS_FILE")
        if status:
            with open(status, "w") as f:
                f.write(f"{rc}\n")
        return rc
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
