"""`gpt2-conformance merge FILE.json... [--out-dir DIR]`: one verdict from many machines.

Reads conformance reports (`run --report-dir`) and bench JSON (`bench --out-dir`) from any
number of machines, devices and versions, in any order (a folder stands for every *.json under
it but the bench's raw bench-results.json; see inputs.py), and writes one clause x column
matrix, one parity table (parity.py) and one bench table (document.py): merged.md
(markdown.py), merged.json and scoreboard.html (scoreboard.py) in --out-dir (without it, the
Markdown goes to stdout). None of them carries a machine-local path (see document.py).

Exit codes: 0 merged, no run failed, parity holds; 1 merged, but a run failed or h differs
between columns of one backend; 2 unreadable, malformed or conflicting inputs (nothing written);
4 merged, no run failed, but a run could not judge some clauses (ERROR).
"""

from __future__ import annotations

import json
import os
import sys

from gpt2_conformance.merge import document, inputs, markdown, scoreboard
from gpt2_conformance.merge.model import NEITHER, RAW_BENCH, MergeError


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "merge",
        help="merge conformance and bench JSON from many machines into one matrix, "
        "parity table, bench table and scoreboard page",
    )
    p.add_argument(
        "files",
        nargs="+",
        metavar="FILE.json",
        help="reports of `run --report-dir` and `bench --out-dir` (a folder: every *.json under it)",
    )
    p.add_argument(
        "--out-dir", help="write merged.md, merged.json and scoreboard.html here (default: print the Markdown)"
    )
    p.add_argument(
        "--upstream-dir",
        help="link the scoreboard's waived cells to the issue drafts "
        "`gpt2-conformance upstream` wrote here (e.g. reports/upstream)",
    )


def write_all(doc: dict, out_dir: str, upstream_dir: str | None = None) -> list[str]:
    os.makedirs(out_dir, exist_ok=True)
    paths = [os.path.join(out_dir, n) for n in ("merged.md", "merged.json", "scoreboard.html")]
    drafts = scoreboard.upstream_drafts(upstream_dir, out_dir) if upstream_dir else None
    for path, text in zip(
        paths, (markdown.render(doc), json.dumps(doc, indent=2), scoreboard.html(doc, drafts)), strict=True
    ):
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    return paths


def run(args) -> int:
    upstream_dir = getattr(args, "upstream_dir", None)
    problem = _bad_upstream_dir(upstream_dir, args.out_dir) if upstream_dir else None
    if problem:
        print(f"gpt2-conformance merge: error: --upstream-dir {upstream_dir}: {problem}", file=sys.stderr)
        return 2
    try:
        runs, bench, ignored, raw = inputs.load(args.files)
        doc = document.merged(runs, bench, ignored, base=args.out_dir)
    except MergeError as exc:
        print(f"gpt2-conformance merge: error: {exc}", file=sys.stderr)
        return 2
    for path in raw:
        print(f"gpt2-conformance merge: skipped {path}: {RAW_BENCH}", file=sys.stderr)
    for path in ignored:
        print(f"gpt2-conformance merge: ignored {path}: {NEITHER}", file=sys.stderr)
    if args.out_dir:
        for path in write_all(doc, args.out_dir, upstream_dir):
            print(f"wrote {path}")
    else:
        print(markdown.render(doc))
    for problem in doc["parity"].get("problems", []):
        print(f"gpt2-conformance merge: parity problem: {problem}", file=sys.stderr)
    for line in document.why_exit(doc):  # an exit code of 1 or 4 says which run(s) made it so
        print(f"gpt2-conformance merge: {line}", file=sys.stderr)
    return document.exit_code(doc)


def _bad_upstream_dir(upstream_dir: str, out_dir: str | None) -> str | None:
    """Why the drafts folder cannot link the scoreboard (it once linked nothing, silently)."""
    if not out_dir:
        return "it links the scoreboard's waived cells, and only --out-dir writes the scoreboard"
    if not os.path.isdir(upstream_dir):
        return "no such folder"
    if not any(os.path.isfile(os.path.join(upstream_dir, f, "status.json")) for f in os.listdir(upstream_dir)):
        return "no <backend>/status.json in it: write the drafts there with `gpt2-conformance upstream --out-dir`"
    return None
