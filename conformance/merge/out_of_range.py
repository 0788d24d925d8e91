"""`gpt2-conformance out-of-range --reports DIR... [--out FILE]`: what every backend does with a bad index.

One table: a row per conformance report (one backend on one device), a column per bad input,
each cell what the implementation did with it. Nothing in it is written by hand: each cell is
the observation the BOUNDS probe recorded in the report (runtime/observe.py, the test's
`observed` field), or, where the probe recorded none, what its outcome says (the process that
died in it and the signal that ended it, a test the backend does not claim). The phrases are
observe.py's; the page's explanation is docs/out-of-range.md.

Exit codes: 0 written; 1 written, but a probe of some report recorded no observation (a report
of a version before the field, or a probe that did not run); 2 no report could be read, or
--out cannot be written (cli checks it first, as it checks every command's output).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys

from gpt2_conformance import registry
from gpt2_conformance import results as res
from gpt2_conformance.merge import inputs
from gpt2_conformance.merge.model import MergeError

# column -> the BOUNDS probe whose first call is that bad input (conformance/suite/test_bounds.py),
# the test named as it follows the file's "::" in a nodeid
PROBES = (
    ("id -1", "test_sentinel_ids_raise[-1-int64-prefill]"),
    ("id -100", "test_sentinel_ids_raise[-100-int64-prefill]"),
    ("id 50257", "test_sentinel_ids_raise[50257..50303-int64-prefill]"),
    ("id 2^31-1", "test_sentinel_ids_raise[2^31-1-int64-prefill]"),
    ("position 1024", "test_error_names_value_and_rule[position]"),
    ("past_length -1", "test_bad_past_length_raises[-1]"),
    ("float ids", "test_malformed_ids_raise[float32]"),
)
NOT_RECORDED = "not recorded"
DOCS_PAGE = "docs/out-of-range.md"  # the explanation of the cells, in the suite's sources
# the cells that are an answer the caller cannot tell from a valid one: set in bold
_ANNOUNCED = ("raised", "process ", "hung", "not claimed", "skipped", "suite error", NOT_RECORDED, "not run")
_DIED = re.compile(r"died \((.*?)\) during")


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "out-of-range",
        help="one table of what every backend did with each bad index, from the BOUNDS "
        "probes' observations in conformance reports",
    )
    p.add_argument(
        "--reports",
        nargs="+",
        required=True,
        metavar="PATH",
        help="reports of `run --report-dir` (a folder: every conformance report under it)",
    )
    # a file, not a folder: its own dest, which cli.OUTPUTS checks as a file (every other command's --out is a folder)
    p.add_argument("--out", dest="out_file", metavar="FILE", help="write the Markdown table here (default: print it)")


def cell(test: dict | None) -> str:
    """What one probe's test says the implementation did."""
    if test is None:
        return "not run"
    if test.get("observed"):
        return str(test["observed"])
    status, message = test.get("status", ""), str(test.get("message", ""))
    died = _DIED.search(message)
    if message.startswith("crashed:") and died:
        how = died.group(1)
        return f"process aborted ({how.removeprefix('killed by signal ')})" if "signal" in how else f"process {how}"
    if message.startswith("hung"):
        return "hung (process killed)"
    if status == res.NOT_CLAIMED:
        return "not claimed"
    if status == res.SKIPPED:
        return "skipped"
    if status == res.ERROR:
        return "suite error"
    return NOT_RECORDED


def silent(text: str) -> bool:
    """An answer that came back as if the input were valid: no raise, no crash, no refusal."""
    return not text.startswith(_ANNOUNCED)


def read(paths: list[str]) -> list[dict]:
    """The conformance reports among `paths` (a folder: every report under it; its other JSON,
    such as bench.json, is passed over; a file given by name must be a report)."""
    reports = []
    for path, in_folder in inputs.expand(paths):
        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise MergeError(f"{path}: cannot read a report: {exc}") from None
        if not isinstance(data, dict) or data.get("format") != res.REPORT_FORMAT:
            if in_folder:
                continue
            raise MergeError(f"{path}: not a conformance report (format {res.REPORT_FORMAT!r})")
        reports.append(data)
    if not reports:
        raise MergeError(f"no conformance report in {', '.join(paths)}")
    return reports


def rows(reports: list[dict]) -> list[tuple[str, list[str], str]]:
    """[(row label, cells in PROBES' order, implementation)], in the registry's order of backends
    (others after it, by name)."""
    order = {name: i for i, name in enumerate(registry.available())}
    reports = sorted(reports, key=lambda r: (order.get(r["backend"], len(order)), r["backend"], r["device"]))
    labels = [r["backend"] + ("" if r["device"] == "cpu" else f" ({r['device']})") for r in reports]
    out = []
    for report, label in zip(reports, labels, strict=True):
        if labels.count(label) > 1:
            label += f" [{(report.get('environment') or {}).get('host', '?')}]"
        tests = {t["nodeid"].split("::", 1)[-1]: t for c in report["clauses"] for t in c["tests"]}
        cells = [cell(tests.get(probe)) for _, probe in PROBES]
        out.append((label, cells, str((report.get("environment") or {}).get("implementation", ""))))
    return out


def command_line(reports: list[str], out_file: str | None) -> str:
    """The command that makes this table: the one run, its arguments as given."""
    return shlex.join(
        ["gpt2-conformance", "out-of-range", "--reports", *reports, *(["--out", out_file] if out_file else [])]
    )


def docs_reference(out_file: str | None) -> str:
    """The docs page that explains the cells: a link relative to the output file where the page is
    found from there (a docs/ folder beside the output's folder or above it, as in a checkout), else
    its name alone; a link that resolves nowhere helps no reader."""
    if out_file:
        here = folder = os.path.dirname(os.path.abspath(out_file))
        while True:
            page = os.path.join(folder, DOCS_PAGE)
            if os.path.isfile(page):
                return f"[{DOCS_PAGE}]({os.path.relpath(page, here).replace(os.sep, '/')})"
            if os.path.dirname(folder) == folder:
                break
            folder = os.path.dirname(folder)
    return f"{DOCS_PAGE} in gpt2-conformance's sources"


def markdown(reports: list[dict], command: str, docs: str) -> str:
    """The page: `command` is the command line that makes it, `docs` how it names the docs page."""
    table = rows(reports)
    lines = [
        "# What each backend does with a bad index",
        "",
        f"Generated by `{command}` "
        "from what the suite's BOUNDS probes observed in each report; do not edit by hand. "
        "**Bold**: an answer returned as if the input were valid (no error). "
        f"How each cell is observed, and what each phrase means: {docs}.",
        "",
        "| backend | " + " | ".join(name for name, _ in PROBES) + " |",
        "|---|" + "---|" * len(PROBES),
    ]
    for label, cells, _ in table:
        shown = [f"**{c}**" if silent(c) else c for c in cells]
        lines.append(f"| {label} | " + " | ".join(shown) + " |")
    silent_rows = sum(any(silent(c) for c in cells) for _, cells, _ in table)
    lines += [
        "",
        f"{len(table)} backends; {silent_rows} return an answer for at least one bad input.",
        "",
        "## The implementations",
        "",
        "| backend | implementation (its report's own description) |",
        "|---|---|",
    ]
    lines += [f"| {label} | {implementation.replace('|', '/')} |" for label, _, implementation in table]
    versions = sorted({str(r.get("spec_version", "?")) for r in reports})
    lines += ["", f"Spec version of the reports: {', '.join(versions)}.", ""]
    return "\n".join(lines)


def run(args) -> int:
    try:
        reports = read(args.reports)
    except MergeError as exc:
        print(f"gpt2-conformance out-of-range: error: {exc}", file=sys.stderr)
        return res.EXIT_USAGE
    text = markdown(reports, command_line(args.reports, args.out_file), docs_reference(args.out_file))
    if args.out_file:
        try:  # cli checked it can be written; what only the write itself finds (a full disk, EIO) is one line too
            os.makedirs(os.path.dirname(os.path.abspath(args.out_file)), exist_ok=True)
            with open(args.out_file, "w", encoding="utf-8") as f:
                f.write(text)
        except OSError as exc:
            print(
                f"gpt2-conformance out-of-range: error: --out {args.out_file}: cannot write it ({exc.strerror or exc})",
                file=sys.stderr,
            )
            return res.EXIT_USAGE
        print(f"wrote {args.out_file}")
    else:
        sys.stdout.write(text)
    missing = [
        f"{label}: {name}"
        for label, cells, _ in rows(reports)
        for (name, _), text in zip(PROBES, cells, strict=True)
        if text in (NOT_RECORDED, "not run")
    ]
    for where in missing:
        print(f"gpt2-conformance out-of-range: no observation recorded for {where}", file=sys.stderr)
    return res.EXIT_FAIL if missing else res.EXIT_PASS
