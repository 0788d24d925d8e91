"""Mutation testing of the NumPy reference: mutants nobody chose (docs/mutation-testing.md).

    python scripts/mutation_testing.py [--report reports/mutation-testing.md] [--work DIR] [--lock FILE]
                                       [--reuse OLD_WORK/session.sqlite]

The kill matrix (tests/test_kill_matrix.py) is a catalogue written by hand. This runs cosmic-ray
(8.7, the `mutation` extra) over backends/numpy/adapter.py and the input checks in
conformance/api/validation.py, with the conformance suite on the numpy backend as the test
command, and writes the report: every mutant with its outcome, the first suite test that failed
on each killed one, and each survivor with the rule of EXPLAINED that says why no clause fails it
(equivalent, unreachable by the spec's inputs, or an input GPT-2 leaves open: outside the spec by
design), or listed as unexplained, which makes the command exit 1.

cosmic-ray writes each mutant into the file it mutates, so the run works on a copy of the tree
(conformance/, backends/, fixtures/ and the .typecheck link that names conformance/ as
gpt2_conformance) in --work (default: a fresh temporary folder); the working tree is never
touched. --resume continues a --work folder's session. --lock FILE: the runs hold that flock (a
shared machine's heavy-job lock) a few minutes at a time (--lock-hold), letting other jobs in
between. --reuse SESSION: a new session takes an earlier session's result for each mutant that is
the same mutation of the same line in the same function (the killed ones, and the survivors a rule
of EXPLAINED calls equivalent) and runs only the rest: the mutants of lines changed since, and every
survivor not explained as equivalent (a clause may kill it now). Valid while the suite only gains
cases: a mutant it killed stays killed. cosmic-ray enumerates the mutants (`cosmic-ray init`) and applies each one
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

# Why a survivor survives: (module, a piece of the line as written, a regex the mutated line matches
# or None for every mutation of that line, kind, reason). Kinds: "equivalent" (no answer of the
# protocol changes, only time or memory), "unreachable" (the path is not reached by any input the
# spec's clauses use), "outside the spec" (it changes only what happens on an input GPT-2 leaves
# open: a malformed h_final or table, the words of an error about one, an integral float or bool
# past_length; by design no clause judges it, spec 1.6), "gap" (a bad input still raises, from a
# later error). A survivor no rule explains makes the run exit 1.
ADAPTER, VALIDATION = MODULES
_THREADS = "gather_add's choice of how many threads and how to split h among them"
EXPLAINED: tuple[tuple[str, str, str | None, str, str], ...] = (
    (
        ADAPTER,
        "_THREADED_MIN_ELEMENTS = 1 << 20",
        None,
        "equivalent",
        "the output size above which gather_add splits its work over threads: every element of h is "
        "still one IEEE addition of the same two values on either path (gather_add's docstring), so "
        "only the time changes",
    ),
    (
        ADAPTER,
        "_HEAD_ROWS = 4096",
        None,
        "equivalent",
        "how many wte rows a float16 head converts to float32 at a time: each logit is still the float32 "
        "product of h with one whole row, rounded once to float16",
    ),
    (ADAPTER, "n = 1 if h.size < _THREADED_MIN_ELEMENTS", None, "equivalent", _THREADS + ": any split is exact"),
    (ADAPTER, "if n < 2:", None, "equivalent", _THREADS + ": one piece or n, each element written once"),
    (
        ADAPTER,
        "elif batch > 1:",
        None,
        "equivalent",
        _THREADS + ": splitting a batch by positions instead of rows (or back) still writes each element once",
    ),
    (
        ADAPTER,
        "if len(pieces) == 1:",
        None,
        "equivalent",
        "a single piece runs on a pool thread instead of the calling one: the same writes",
    ),
    (ADAPTER, "piece(pieces[0])", None, "equivalent", "the list has one piece: pieces[-1] is pieces[0]"),
    (
        ADAPTER,
        "capabilities = Capabilities(",
        r"gradients=False",
        "equivalent",
        "a claim, not an answer: without gradients claimed, TIED-GRAD is reported as not claimed (never "
        "as passed), which is the scorecard's job to show, not a clause's to fail",
    ),
    (
        ADAPTER,
        "wte.astype(self._dtype, copy=False), wpe.astype(self._dtype, copy=False)",
        None,
        "equivalent",
        "init_tables copies a table it has just drawn: the same values, one more array",
    ),
    (
        ADAPTER,
        ".reshape(-1",
        r"reshape\((- 2|~1)",
        "equivalent",
        "numpy reads any negative size in reshape as the one to infer: reshape(-2) and reshape(~1) are "
        "reshape(-1) on the installed numpy 2",
    ),
    (
        ADAPTER,
        "slice(i * seq // n, (i + 1) * seq // n)",
        r"\(i \+ 2\) \* seq // n|\(i \+ 1\) \* seq [-+^] n|i // seq // n|i >> seq // n|i \* seq % n|"
        r"i \* seq >> n|i & seq // n|\(i \+ 1\) << seq // n|\(i \+ 1\) \* seq (\||<<|\*|\*\*) n|i \* seq & n|"
        r"i % seq // n|i \*\* seq // n",
        "equivalent",
        "the split of one sequence (B = 1, reached by LOOKUP-EXACT's case at d = 1600) into pieces that "
        "overlap and still cover every position (a piece that ends past T or starts at 0; with the two "
        "threads of these machines, n = 2): each piece writes the finished sum of the same two values "
        "into its slice of h once, so the positions two pieces share get the same bits",
    ),
    (
        ADAPTER,
        "slice(i * batch // n, (i + 1) * batch // n)",
        r"i \^ batch // n|i & batch // n|i - batch // n|\(i \+ 1\) \| batch // n",
        "equivalent",
        "with the two threads of these machines (n = 2) the first piece is empty and the second covers "
        "every row: each element is still written once, by one thread",
    ),
    (
        ADAPTER,
        "slice(i * batch // n, (i + 1) * batch // n)",
        r"i \* batch % n|\(i \+ 1\) \+ batch // n|i >> batch // n|\(i \+ 1\) \* batch (\*|\+|<<) n|"
        r"i \* batch >> n|i \*\* batch // n|\(i \+ 2\) \* batch // n|\(i \+ 1\) \* batch (\||\*\*) n|i // batch // n|"
        r"\(i \+ 1\) << batch // n|i % batch // n",
        "equivalent",
        "two pieces overlap (share a row at B = 2 or 3) and every row is still covered: each piece writes "
        "the finished sum of the same two values into its slice of h once (np.add(..., out=)), so a row "
        "both write gets the same bits whichever writes last (before spec 1.5 the reference gathered, "
        "then added in place, and such an overlap was a data race); some cover every row only with the two "
        "threads of these machines (n = 2): with more, a row left unwritten fails LOOKUP-EXACT",
    ),
    (
        ADAPTER,
        "return (h_flat.astype(np.float32, copy=False) @ self.wte.T).reshape(shape)",
        None,
        "equivalent",
        "the head multiplies a copy of h: the same values",
    ),
    (
        VALIDATION,
        "if seq_len > 0 and past_length + seq_len > n_ctx:",
        r"seq_len != 0 and",
        "equivalent",
        "T is a length, never negative: != 0 is > 0",
    ),
    (
        ADAPTER,
        "wte = self.wte.astype(np.float32, copy=False)",
        None,
        "equivalent",
        "gradients reads a float32 copy of wte instead of wte itself: the same values",
    ),
    (
        VALIDATION,
        "past_length.ndim == 0",
        r"ndim <= 0",
        "equivalent",
        "an array's ndim is never negative: <= 0 is == 0",
    ),
    (
        VALIDATION,
        "past_length.ndim == 0",
        r"ndim >= 0",
        "equivalent",
        "an integer array of rank >= 1 indexed with () is still an array, not an integer, so the next "
        "check refuses it with the same error",
    ),
    (
        VALIDATION,
        "if seq_len > 0 and past_length + seq_len > n_ctx:",
        r"seq_len >= 0|seq_len > -1",
        "equivalent",
        "T = 0 reads no position: an empty sequence at past_length > 1024 raising or returning [B, 0, d] "
        "is not fixed by the spec (BOUNDS-POSITION's cases have T >= 1, SHAPE-EMPTY's past_length 0)",
    ),
    (
        VALIDATION,
        "last = past_length + seq_len - 1",
        None,
        "equivalent",
        "a number in the position error's text: BOUNDS-MESSAGE asks for the offending value and the "
        "table size, which the text still names ('[0, 1024)', and 1024 is the first offending "
        "position); which other numbers it shows is wording",
    ),
    (
        VALIDATION,
        "at most {n_ctx - 1} allowed",
        None,
        "equivalent",
        "a number in the position error's text (as above): the value and the table size are still named",
    ),
    (
        VALIDATION,
        'if not is_integer or dtype_name == "bool":',
        None,
        "equivalent",
        "numpy does not count bool as an integer dtype (np.issubdtype(np.bool_, np.integer) is False), "
        "so `not is_integer` refuses bool ids whatever the name test does; and float ids that pass "
        "this check (or -> and) are refused by numpy's own take (IndexError: arrays used as indices "
        "must be of integer type), so BOUNDS-INPUT still sees a raise",
    ),
    (
        VALIDATION,
        "where = tuple(int(i) for i in np.argwhere(bad)[0])",
        None,
        "equivalent",
        "the error names the last offending id instead of the first: still an offending value and "
        "where it sits, which is what BOUNDS-MESSAGE asks",
    ),
    (
        VALIDATION,
        "if ids.size == 0:",
        None,
        "equivalent",
        "a shortcut for empty ids: without it the mask of an empty array has no True either",
    ),
    (
        ADAPTER,
        "== np.float32",
        r"is np\.float32",
        "equivalent",
        "the dtype compared is the class np.float32 itself (the _NUMPY_DTYPES value the adapter keeps): "
        "`is` is `==` here",
    ),
    (
        ADAPTER,
        "h = self.embed(ids, past_length).astype(np.float32, copy=False)",
        None,
        "equivalent",
        "gradients reads a copy of its own h: the same values",
    ),
    (
        VALIDATION,
        "bad = (ids < 0) | (ids >= n_vocab)",
        r"\) \+ \(",
        "equivalent",
        "numpy adds booleans as a logical or",
    ),
    (
        VALIDATION,
        "bad = (ids < 0) | (ids >= n_vocab)",
        r"\^",
        "equivalent",
        "ids < 0 and ids >= 50257 are never both true: xor is or",
    ),
    # -- what GPT-2 leaves open (spec 1.6): by design no clause judges these inputs ------------------
    *(
        (
            VALIDATION,
            written,
            None,
            "outside the spec",
            "load_tables' check of a table's type, shape and dtype: GPT-2 leaves open what an implementation "
            "does with a table of another shape or dtype (torch's load_state_dict refuses a shape and casts a "
            "float64 table, Keras' set_weights likewise); the suite loads float32 tables of the model's shapes",
        )
        for written in (
            "for name, table, rows in",
            "isinstance(table, np.ndarray)",
            "table.shape != (rows, n_embd)",
            "table.dtype != np.float32",
            "raise TableShapeError",
        )
    ),
    (
        ADAPTER,
        "h_final.ndim != 3 or h_final.shape[-1] != self.config.n_embd",
        None,
        "outside the spec",
        "the head's check of h_final's rank and width: GPT-2 leaves open the leading dimensions the head "
        "takes (nn.Linear and Keras' Dense take any), and logits of the wrong width fail in the matmul anyway",
    ),
    (
        ADAPTER,
        'raise ValueError(f"h_final.shape=',
        None,
        "outside the spec",
        "the words of the head's error for a malformed h_final: left open (no clause hands one in)",
    ),
    (
        VALIDATION,
        'raise EmbeddingInputError(f"ids must have rank 2',
        None,
        "outside the spec",
        "the words of the error for ids of another rank: BOUNDS-INPUT asks only that it raises",
    ),
    (
        VALIDATION,
        'raise TypeError(f"ids must be',
        None,
        "outside the spec",
        "the words of the error for ids that are not an integer array: BOUNDS-INPUT asks only that it raises",
    ),
    (
        VALIDATION,
        "must be an integer >= 0",
        None,
        "outside the spec",
        "the words of the error for a past_length that is not an integer: BOUNDS-PAST-LENGTH asks only that it raises",
    ),
    (
        VALIDATION,
        'raise EmbeddingInputError(f"past_length={past_length} must be >= 0")',
        None,
        "outside the spec",
        "the words of the error for a negative past_length: BOUNDS-PAST-LENGTH asks only that it raises",
    ),
    (
        VALIDATION,
        "if isinstance(past_length, (bool, np.bool_)) or not isinstance(past_length, numbers.Integral):",
        r"not isinstance\(past_length, \(bool|isinstance\(past_length, \(bool, np\.bool_\)\) and",
        "outside the spec",
        "a bool past_length accepted as the integer it equals reads the right rows: left open (spec 1.6)",
    ),
)


def explain(module: str, old: str, new: str) -> tuple[str, str] | None:
    """(kind, reason) of the first rule that matches a survivor, or None."""
    for rule_module, written, mutated, kind, reason in EXPLAINED:
        if rule_module == module and written in old and (mutated is None or re.search(mutated, new)):
            return kind, reason
    return None


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


def _mutated_lines(work: Path, spec) -> tuple[str, str] | None:
    """(the line as written, as mutated) of a mutation not yet run, or None if it mutates nothing."""
    from cosmic_ray import plugins
    from cosmic_ray.mutating import _make_diff, mutate_code

    source = (work / spec.module_path).read_text(encoding="utf-8")
    operator = plugins.get_operator(spec.operator_name)(**(spec.operator_args or {}))
    mutated = mutate_code(source, operator, spec.occurrence)
    if mutated is None:
        return None
    return diff_lines("\n".join(_make_diff(source, mutated, spec.module_path)))


def _definitions(path: Path, name: str | None) -> list[str]:
    """The code (its AST: comments aside) of every function or class named `name` in the file, or
    of the module itself for None."""
    import ast

    tree = ast.parse(path.read_text(encoding="utf-8") if path.exists() else "")
    if name is None:
        return [ast.dump(tree)]
    return [
        ast.dump(node)
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name
    ]


def reuse(session: Path, earlier: Path, work: Path) -> int:
    """Store in `session` an earlier session's result for each pending mutant that is the same
    mutation (module, function, operator, line as written and as mutated) of a function whose
    source is unchanged (the earlier session's copy beside it), and was killed or is explained as
    equivalent; returns how many. The rest stay pending."""
    from cosmic_ray.work_db import WorkDB, use_db

    found: dict[tuple, list] = collections.defaultdict(list)
    with use_db(str(earlier), WorkDB.Mode.open) as db:
        for item, result in db.completed_work_items:
            spec = item.mutations[0]
            old, new = diff_lines(result.diff)
            found[(str(spec.module_path), spec.definition_name, spec.operator_name, old, new)].append(result)
    taken = 0
    with use_db(str(session), WorkDB.Mode.open) as db:
        for item in list(db.pending_work_items):
            spec = item.mutations[0]
            lines = _mutated_lines(work, spec)
            if lines is None:
                continue
            same = found.get((str(spec.module_path), spec.definition_name, spec.operator_name, *lines))
            if not same or _definitions(work / spec.module_path, spec.definition_name) != _definitions(
                earlier.parent / spec.module_path, spec.definition_name
            ):
                continue
            result = same.pop(0)
            why = explain(str(spec.module_path), *lines)
            if result.is_killed or (why is not None and why[0] == "equivalent"):
                db.set_result(item.job_id, result)
                taken += 1
    return taken


def execute(work: Path, session: Path, lock: str | None, hold_s: float, survivors: bool = False) -> None:
    """Every pending mutant of the session (survivors: every unexplained survivor), one at a time:
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
            if survivors:  # those no rule of EXPLAINED explains: a clause may have changed since
                pending = []
                for item, result in db.completed_work_items:
                    old, new = diff_lines(result.diff)
                    if not result.is_killed and explain(str(item.mutations[0].module_path), old, new) is None:
                        pending.append(item)
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
    """The markdown report and the survivors that are not equivalent (gaps, named or not)."""
    unexplained = []
    counts: collections.Counter = collections.Counter()
    for row in rows:
        if row["outcome"] == "survived":
            found = explain(row["module"], row["old"], row["new"])
            kind, reason = found or ("unexplained", "no clause fails it and no reason is recorded")
            row["reason"] = f"{kind}: {reason}"
            counts[f"survived, {kind}"] += 1
            if kind != "equivalent":  # a gap, named: not yet killed by any clause
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
        "--reuse",
        type=Path,
        help="an earlier session.sqlite: reuse its kills and equivalent survivors, run only the rest",
    )
    parser.add_argument(
        "--retest-survivors",
        action="store_true",
        help="with --resume: copy the tree's suite into --work again and rerun the unexplained survivors",
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
        if args.reuse:
            print(f"{reuse(session, args.reuse.resolve(), work)} results taken from {args.reuse}", flush=True)
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
        print(f"not killed: {row['module']}:{row['line']} {row['old']!r} -> {row['new']!r}", file=sys.stderr)
    if pending:
        print(f"{pending} mutants not run yet", file=sys.stderr)
    return 1 if unexplained or pending else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
