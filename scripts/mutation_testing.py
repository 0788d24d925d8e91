"""Mutation testing of the NumPy reference: mutants nobody chose (docs/mutation-testing.md).

    python scripts/mutation_testing.py [--report reports/mutation-testing.md] [--work DIR] [--lock FILE]

The kill matrix (tests/test_kill_matrix.py) is a catalogue written by hand. This runs cosmic-ray
(8.7, the `mutation` extra) over backends/numpy/adapter.py and the input checks in
conformance/api/validation.py, with the conformance suite on the numpy backend as the test
command, and writes the report: every mutant with its outcome, the first suite test that failed
on each killed one, and each survivor either matched by an entry of EQUIVALENT (the reason it
cannot change any answer) or listed as unexplained, which makes the command exit 1.

cosmic-ray writes each mutant into the file it mutates, so the run works on a copy of the tree
(conformance/, backends/, fixtures/ and the .typecheck link that names conformance/ as
gpt2_conformance) in --work (default: a fresh temporary folder); the working tree is never
touched. --resume continues a --work folder's session. --lock FILE: the runs hold that flock (a
shared machine's heavy-job lock) a few minutes at a time (--lock-hold), letting other jobs in
between. cosmic-ray enumerates the mutants (`cosmic-ray init`) and applies each one
(cosmic_ray.mutating.mutate_and_test); this script is its distributor, one mutant at a time.

    python scripts/mutation_testing.py test WORK    # one suite run on the mutant now in WORK
"""

from __future__ import annotations

import argparse
import collections
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODULES = ("backends/numpy/adapter.py", "conformance/api/validation.py")
COPIED = ("conformance", "backends", "fixtures", ".typecheck")
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc")
COSMIC_RAY = str(Path(sys.executable).with_name("cosmic-ray"))  # installed beside this Python
SUITE_TIMEOUT_S = 600  # one suite run on a mutant (the reference takes seconds); a hang past it is a kill
SUITE = (
    "-m",
    "pytest",
    "--pyargs",
    "gpt2_conformance.suite",
    "--gpt2c-backend",
    "numpy",
    "--gpt2c-no-shrink",  # a failing example as first drawn: the verdict, sooner
    "-p",
    "no:cacheprovider",
    "-x",  # the first failure kills the mutant; the rest of the suite would add nothing
    "-q",
    "-rfE",
    "--tb=line",
    "-o",
    "addopts=",
)

# Survivors that cannot change any answer the adapter protocol gives, keyed by (module, the line
# as written, the line as mutated), each with the reason. A survivor without an entry fails the run.
EQUIVALENT: dict[tuple[str, str, str], str] = {}


def copy_tree(work: Path) -> None:
    for name in COPIED:
        source = ROOT / name
        shutil.copytree(source, work / name, symlinks=True, ignore=IGNORED)


def test_command(work: Path) -> str:
    return subprocess.list2cmdline([sys.executable, str(Path(__file__).resolve()), "test", str(work)])


def config_text(work: Path) -> str:
    modules = ", ".join(f'"{m}"' for m in MODULES)
    return (
        "[cosmic-ray]\n"
        f"module-path = [{modules}]\n"
        # the suite's own limit is SUITE_TIMEOUT_S; cosmic-ray counts its timeout as a kill too
        f"timeout = {float(SUITE_TIMEOUT_S + 60)}\n"
        "excluded-modules = []\n"
        f"test-command = {json.dumps(test_command(work))}\n"  # a JSON string is a TOML string
        "\n[cosmic-ray.distributor]\n"
        'name = "local"\n'
    )


def execute(work: Path, session: Path, lock: str | None, hold_s: float, survivors: bool = False) -> None:
    """Every pending mutant of the session (survivors: every one that survived), one at a time:
    applied in `work`, the suite run, the file restored, the result stored (over the old one).
    With a lock, it is held for up to hold_s of runs at a time."""
    from cosmic_ray.mutating import mutate_and_test
    from cosmic_ray.work_db import WorkDB, use_db

    os.chdir(work)  # cosmic-ray's module paths are relative to the copy
    command = test_command(work)
    handle = open(lock, "a") if lock else None  # noqa: SIM115 - closed below
    held_since: float | None = None
    try:
        with use_db(str(session), WorkDB.Mode.open) as db:
            if survivors:
                pending = [item for item, result in db.completed_work_items if not result.is_killed]
            else:
                pending = list(db.pending_work_items)
            for n, item in enumerate(pending, 1):
                if handle and held_since is None:
                    fcntl.flock(handle, fcntl.LOCK_EX)
                    held_since = time.monotonic()
                result = mutate_and_test(item.mutations, command, SUITE_TIMEOUT_S + 60)
                db.set_result(item.job_id, result)
                spec = item.mutations[0]
                outcome = result.test_outcome.value if result.test_outcome else result.worker_outcome.value
                print(f"{n}/{len(pending)} {spec.module_path}:{spec.start_pos[0]} {spec.operator_name}: {outcome}")
                if handle and held_since is not None and time.monotonic() - held_since > hold_s:
                    fcntl.flock(handle, fcntl.LOCK_UN)
                    held_since = None
                    time.sleep(2)  # a job waiting for the lock takes it now
    finally:
        if handle:
            handle.close()


def run_suite(work: Path) -> int:
    """One suite run on the mutant now in `work`: 0 if every claimed clause passed."""
    env = dict(os.environ, PYTHONPATH=str(work / ".typecheck"), PYTHONDONTWRITEBYTECODE="1")
    command = [sys.executable, *SUITE, "--rootdir", str(work / "conformance" / "suite")]
    try:
        done = subprocess.run(command, cwd=work, env=env, timeout=SUITE_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        print(f"the suite ran past {SUITE_TIMEOUT_S} s on this mutant")
        return 1
    return done.returncode


def first_failure(output: str | None) -> str:
    """The first failing suite test in pytest's short summary, or what ended the run."""
    text = output or ""
    found = re.search(r"^(?:FAILED|ERROR) (\S+)", text, re.M)
    if found:
        return found.group(1).rpartition("/")[2]
    if "ran past" in text:
        return "timeout"
    return "no test failed: the suite did not run (import or collection error)"


def diff_lines(diff: str | None) -> tuple[str, str]:
    """(the line as written, the line as mutated) from cosmic-ray's unified diff."""
    old = [
        line[1:].strip() for line in (diff or "").splitlines() if line.startswith("-") and not line.startswith("---")
    ]
    new = [
        line[1:].strip() for line in (diff or "").splitlines() if line.startswith("+") and not line.startswith("+++")
    ]
    return " / ".join(old), " / ".join(new)


def collect(session: Path) -> tuple[list[dict], int]:
    """Every completed mutant as a row, and how many are still pending."""
    from cosmic_ray.work_db import WorkDB, use_db

    rows = []
    with use_db(str(session), WorkDB.Mode.open) as db:
        pending = db.num_work_items - db.num_results
        for item, result in db.completed_work_items:
            spec = item.mutations[0]
            old, new = diff_lines(result.diff)
            rows.append(
                {
                    "module": str(spec.module_path),
                    "line": spec.start_pos[0],
                    "operator": spec.operator_name.rpartition("/")[2],
                    "old": old,
                    "new": new,
                    "outcome": str(result.test_outcome.value if result.test_outcome else result.worker_outcome.value),
                    "killed_by": first_failure(result.output) if result.is_killed else "",
                }
            )
    return sorted(rows, key=lambda r: (r["module"], r["line"], r["operator"], r["new"])), pending


def _cell(text: str) -> str:
    return "`" + text.replace("|", "\\|").replace("`", "'") + "`" if text else ""


def report(rows: list[dict], pending: int = 0) -> tuple[str, list[dict]]:
    """The markdown report and the survivors EQUIVALENT does not explain."""
    unexplained = []
    counts: collections.Counter = collections.Counter()
    for row in rows:
        if row["outcome"] == "survived":
            reason = EQUIVALENT.get((row["module"], row["old"], row["new"]))
            row["reason"] = reason or "UNEXPLAINED: no clause fails it and no reason is recorded"
            counts["survived, equivalent" if reason else "survived, unexplained"] += 1
            if not reason:
                unexplained.append(row)
        else:
            counts[row["outcome"]] += 1
    lines = [
        "# Mutation testing of the NumPy reference",
        "",
        "Generated by `python scripts/mutation_testing.py` (cosmic-ray "
        f"{_version('cosmic-ray')}, every operator, over {', '.join(MODULES)}); do not edit by hand. "
        "The test command is the conformance suite on the numpy backend (`pytest --pyargs "
        "gpt2_conformance.suite --gpt2c-backend numpy -x`): a mutant is killed when a clause fails on it. "
        "How to read it: docs/mutation-testing.md.",
        "",
        f"{len(rows)} mutants: " + ", ".join(f"{n} {what}" for what, n in sorted(counts.items())) + ".",
        "",
        *(
            [
                f"**Incomplete: {pending} more mutants were not run** (the run was stopped; "
                "`python scripts/mutation_testing.py --work DIR --resume` continues it).",
                "",
            ]
            if pending
            else []
        ),
        "## Survivors",
        "",
    ]
    survivors = [r for r in rows if r["outcome"] == "survived"]
    if survivors:
        lines += ["| module:line | operator | written | mutated | why no clause fails it |", "|---|---|---|---|---|"]
        lines += [
            f"| {r['module']}:{r['line']} | {r['operator']} | {_cell(r['old'])} | {_cell(r['new'])} | {r['reason']} |"
            for r in survivors
        ]
    else:
        lines.append("None: every mutant was killed.")
    lines += ["", "## Killed", "", "| module:line | operator | written | mutated | first failing suite test |"]
    lines.append("|---|---|---|---|---|")
    lines += [
        f"| {r['module']}:{r['line']} | {r['operator']} | {_cell(r['old'])} | {_cell(r['new'])} | {r['killed_by']} |"
        for r in rows
        if r["outcome"] != "survived"
    ]
    return "\n".join(lines) + "\n", unexplained


def _version(name: str) -> str:
    from importlib.metadata import version

    return version(name)


def main(argv: list[str]) -> int:
    if argv[:1] == ["test"]:
        parser = argparse.ArgumentParser(prog="mutation_testing.py test")
        parser.add_argument("work", type=Path)
        args = parser.parse_args(argv[1:])
        return run_suite(args.work)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--report", type=Path, default=ROOT / "reports" / "mutation-testing.md")
    parser.add_argument("--work", type=Path, help="the folder of the copy and the session (default: a new one)")
    parser.add_argument("--resume", action="store_true", help="continue --work's session where it stopped")
    parser.add_argument("--lock", help="flock this file while the suite runs, --lock-hold seconds at a time")
    parser.add_argument("--lock-hold", type=float, default=180.0, help="seconds of runs per hold of --lock")
    parser.add_argument("--report-only", action="store_true", help="write the report of --work's session as it is")
    parser.add_argument(
        "--retest-survivors",
        action="store_true",
        help="with --resume: copy the tree's suite into --work again and rerun every survivor (a clause changed)",
    )
    args = parser.parse_args(argv)
    if args.report_only:
        if args.work is None:
            raise SystemExit("--report-only reads the session of --work DIR")
        return write_report(args.work / "session.sqlite", args.report)
    work = (args.work or Path(tempfile.mkdtemp(prefix="gpt2c-mutation-"))).resolve()
    args.report = args.report.resolve()  # the runs work in the copy
    session, config = work / "session.sqlite", work / "cosmic-ray.toml"
    if not args.resume:
        if work.exists() and any(work.iterdir()):
            raise SystemExit(f"--work {work} is not empty (add --resume to continue its session)")
        work.mkdir(parents=True, exist_ok=True)
        copy_tree(work)
        config.write_text(config_text(work))
        subprocess.run([COSMIC_RAY, "init", str(config), str(session)], cwd=work, check=True)
    print(f"mutation testing in {work}", flush=True)
    if args.retest_survivors:
        shutil.rmtree(work / "conformance" / "suite")
        shutil.copytree(ROOT / "conformance" / "suite", work / "conformance" / "suite", ignore=IGNORED)
        shutil.copytree(
            ROOT / "conformance" / "runtime", work / "conformance" / "runtime", ignore=IGNORED, dirs_exist_ok=True
        )
        execute(work, session, args.lock, args.lock_hold, survivors=True)
    execute(work, session, args.lock, args.lock_hold)
    return write_report(session, args.report)


def write_report(session: Path, path: Path) -> int:
    """The report of the session's completed mutants; 1 if a survivor is unexplained or some are pending."""
    rows, pending = collect(session)
    text, unexplained = report(rows, pending)
    path.write_text(text)
    print(f"wrote {path}")
    for row in unexplained:
        print(f"unexplained survivor: {row['module']}:{row['line']} {row['old']!r} -> {row['new']!r}", file=sys.stderr)
    if pending:
        print(f"{pending} mutants not run yet", file=sys.stderr)
    return 1 if unexplained or pending else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
