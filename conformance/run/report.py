"""Reports of a suite run: the console scorecard, JSON, JUnit XML and Markdown."""

from __future__ import annotations

import json
import os
from xml.etree import ElementTree as ET

from gpt2_conformance import results as res
from gpt2_conformance.run import console


def scorecard(result: res.SuiteResult) -> str:
    """One line per clause: ID, title, verdict, and the reason for anything but PASS (never
    cut: the reason names the input and expected vs actual)."""
    lines = [f"gpt2-conformance spec {result.spec_version}: backend {result.backend} on {result.device}"]
    if result.environment.get("golden_data"):
        lines.append(f"  golden data: {result.environment['golden_data']}")
    draws = result.environment.get("draws", {})
    if draws.get("mode") == "thorough":
        lines.append(
            f"  draws: thorough ({draws['examples_factor']}x the examples), seed {draws['seed']}; "
            f"replay with {draws['replay']}"
        )
    if result.error:
        lines.append(f"  ERROR: {result.error}")
    for c in result.clauses:
        reason = "" if c.status == res.PASS else f"  {c.message}"
        lines.append(f"  {c.clause.id:<26} {c.status:<12} {c.clause.title}{reason}")
    for stale in result.stale_waivers:
        lines.append(f"  STALE WAIVER: {stale}")
    lines.append(f"  {counts_line(result)}")
    return "\n".join(lines)


def counts_line(result: res.SuiteResult) -> str:
    """The scorecard's last line: its clauses by verdict, and the time."""
    counts = result.by_status()
    waived = f"{counts[res.WAIVED]} waived, " if counts[res.WAIVED] else ""
    errors = f"{counts[res.ERROR]} suite error(s) (not the implementation's), " if counts[res.ERROR] else ""
    return (
        f"{counts[res.PASS]} passed, {counts[res.FAIL]} failed, {waived}{errors}{counts[res.NOT_CLAIMED]} "
        f"not claimed, {counts[res.SKIPPED]} skipped in {result.duration:.1f} s"
    )


def slowest(result: res.SuiteResult, count: int) -> str:
    """The `count` slowest tests of a run, with their clause and outcome: where a verdict's time
    went (each test's time is in the JSON report too)."""
    tests = sorted((t for c in result.clauses for t in c.tests), key=lambda t: t.duration, reverse=True)[:count]
    if not tests:
        return ""
    lines = [
        f"  slowest {len(tests)} test(s) of {result.backend} (shards run side by side: they may add up to more "
        "than the run)"
    ]
    lines += [f"  {t.duration:8.2f} s  {t.clause:<26} {t.nodeid} ({t.outcome})" for t in tests]
    return "\n".join(lines)


def to_json(result: res.SuiteResult) -> str:
    return json.dumps(result.to_dict(), indent=2)


def to_junit(result: res.SuiteResult) -> str:
    """One <testsuite> per backend, one <testcase> per clause (what CI dashboards show)."""
    counts = result.by_status()
    suite = ET.Element(
        "testsuite",
        name=f"gpt2-conformance[{result.backend}-{result.device}]",
        tests=str(len(result.clauses)),
        failures=str(counts[res.FAIL]),
        skipped=str(counts[res.NOT_CLAIMED] + counts[res.SKIPPED]),
        errors=str(counts[res.ERROR] + (1 if result.error else 0)),
        time=f"{result.duration:.3f}",
    )
    if result.error:
        ET.SubElement(suite, "error", message=result.error)
    for c in result.clauses:
        case = ET.SubElement(
            suite,
            "testcase",
            classname=f"{result.backend}.{c.clause.group}",
            name=c.clause.id,
            time=f"{sum(t.duration for t in c.tests):.3f}",
        )
        if c.status == res.FAIL:
            ET.SubElement(case, "failure", message=c.message).text = "\n".join(
                f"{t.nodeid}: {t.message}" for t in c.tests if t.status == res.FAIL
            )
        elif c.status == res.ERROR:  # JUnit's own word for "the harness failed", not the code under test
            ET.SubElement(case, "error", message=c.message)
        elif c.status == res.WAIVED:
            ET.SubElement(case, "skipped", message=f"deviation (waived): {c.message}")
        elif c.status in (res.NOT_CLAIMED, res.SKIPPED):
            ET.SubElement(case, "skipped", message=f"{c.status.lower()}: {c.message}")
    return ET.tostring(suite, encoding="unicode", xml_declaration=True)


def to_markdown(result: res.SuiteResult) -> str:
    counts = result.by_status()
    lines = [
        f"# gpt2-conformance: {result.backend} on {result.device}",
        "",
        f"Spec {result.spec_version}. {counts[res.PASS]} passed, {counts[res.FAIL]} failed, "
        f"{counts[res.WAIVED]} waived, {counts[res.ERROR]} suite errors, "
        f"{counts[res.NOT_CLAIMED]} not claimed, {counts[res.SKIPPED]} skipped in {result.duration:.1f} s.",
        "",
    ]
    if result.environment.get("golden_data"):
        lines += [f"Golden data: {result.environment['golden_data']}.", ""]
    if result.error:
        lines += [f"**Error:** {result.error}", ""]
    lines += ["| Clause | Title | Verdict | Detail |", "|---|---|---|---|"]
    for c in result.clauses:
        detail = "" if c.status == res.PASS else c.message.replace("|", "\\|")
        lines.append(f"| {c.clause.id} | {c.clause.title} | {c.status} | {detail} |")
    return "\n".join(lines) + "\n"


def write_all(result: res.SuiteResult, directory: str) -> list[str]:
    """JSON, JUnit XML and Markdown for one backend run; returns the paths written."""
    os.makedirs(directory, exist_ok=True)
    stem = os.path.join(directory, console.file_stem(result.backend, result.device))
    paths = []
    for ext, text in (("json", to_json(result)), ("xml", to_junit(result)), ("md", to_markdown(result))):
        with open(f"{stem}.{ext}", "w", encoding="utf-8") as f:
            f.write(text)
        paths.append(f"{stem}.{ext}")
    return paths


def matrix(results: list[res.SuiteResult], missing: dict[str, str]) -> str:
    """Clause x backend verdicts of a `--backend all` run, in Markdown."""
    names = [r.backend for r in results] + list(missing)
    short = {
        res.PASS: "PASS",
        res.FAIL: "FAIL",
        res.WAIVED: "waived",
        res.NOT_CLAIMED: "n/c",
        res.SKIPPED: "skip",
        res.ERROR: "ERROR",
    }
    lines = ["| Clause | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for i, c in enumerate(results[0].clauses if results else []):
        cells = [short[r.clauses[i].status] for r in results] + ["not installed"] * len(missing)
        lines.append(f"| {c.clause.id} | " + " | ".join(cells) + " |")
    lines.append("| time (s) | " + " | ".join(f"{r.duration:.1f}" for r in results) + " |" + " - |" * len(missing))
    return "\n".join(lines)
