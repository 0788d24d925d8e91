"""The README's promises: its first two commands are what CI runs, its minimal adapter runs as
written and passes every clause it claims, its backend table says what the registry, the
adapters' Capabilities and the waiver files say, and the results it links to in reports/ agree
with their sources."""

import pathlib
import re
import sys
import tomllib

import pytest

from gpt2_conformance import registry, spec
from gpt2_conformance.results import FAIL, NOT_CLAIMED, STATUSES
from gpt2_conformance.run.runner import run_in_process

ROOT = pathlib.Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
REPORTS = ROOT / "reports"
BUILTINS = registry.shipped()
BOOLEAN_CLAIMS = ("kv_cache", "tied_head", "init", "gradients", "mutable_tables")


def table(text: str, header_start: str) -> list[list[str]]:
    """The rows (cells stripped) of the Markdown table whose header line starts with header_start."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header_start))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows


def table_lines(text: str, header_start: str) -> list[str]:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header_start))
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    return lines[start:end]


def waiver_clauses(entry) -> list[str]:
    path = entry.waivers_path()
    if path is None:
        return []
    with open(path, "rb") as f:
        return [w["clause"] for w in tomllib.load(f).get("waiver", [])]


def test_readme_starts_with_the_two_commands_and_ci_runs_the_second():
    bash = re.search(r"```bash\n(.*?)```", README, re.S).group(1)
    commands = [line for line in bash.splitlines() if line and not line.startswith("#")]
    assert len(commands) == 2
    assert "gpt2-conformance run --backend all" in commands[0]
    assert commands[1] == (
        "python3 -m venv .venv && .venv/bin/pip install -c constraints.txt -e '.[all,test]' "
        "&& .venv/bin/python -m pytest --slow -n auto"
    )
    ci_lines = (ROOT / ".ci" / "run").read_text().splitlines()
    assert commands[1] in ci_lines, ".ci/run must run the README's test command verbatim"


def test_minimal_adapter_runs_as_written(tmp_path, monkeypatch):
    code = re.search(r"```python\n(# my_gpt2_adapter.py\n.*?)```", README, re.S).group(1)
    assert len(code.splitlines()) < 30
    (tmp_path / "my_gpt2_adapter.py").write_text(code)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("my_gpt2_adapter", None)
    from my_gpt2_adapter import MyAdapter

    result = run_in_process(MyAdapter, "readme-example")
    statuses = {c.clause.id: c.status for c in result.clauses}
    assert result.error == ""
    assert [c for c, s in statuses.items() if s == FAIL] == []
    assert {c for c, s in statuses.items() if s == NOT_CLAIMED} == {
        "INIT-WTE",
        "INIT-WPE",
        "INIT-DISTINCT",
        "TIED-STORAGE",
        "TIED-GRAD",
        "DTYPE-FLOAT16",
        "DTYPE-BFLOAT16",
    }


SCORECARD_PAGE = (ROOT / "docs" / "scorecard.md").read_text()


def _clause_rows(text: str) -> list[tuple[str, str, str]]:
    status = "|".join(re.escape(s) for s in STATUSES)
    return re.findall(rf"^  ([A-Z0-9]+(?:-[A-Z0-9]+)+) +({status}) +(.+)$", text, re.M)


def _assert_rows_are_this_spec(where: str, rows) -> None:
    assert len(rows) >= 4, f"{where} shows no clause rows"
    for clause_id, _, rest in rows:
        assert clause_id in spec.BY_ID, f"{where} shows clause {clause_id}, which spec {spec.SPEC_VERSION} lacks"
        title = spec.BY_ID[clause_id].title
        assert rest.startswith(title), f"{where} shows {clause_id} as {rest[:60]!r}, but its title is {title!r}"


def test_scorecard_excerpts_show_the_spec_as_it_is():
    """docs/scorecard.md's console excerpt: each clause row names a clause of this spec with its
    title, and the summary line counts every clause once (an excerpt from an older spec, or a run
    that lost clauses, fails here)."""
    _assert_rows_are_this_spec("docs/scorecard.md", _clause_rows(SCORECARD_PAGE))
    assert re.search(rf"spec {re.escape(spec.SPEC_VERSION)}: backend ", SCORECARD_PAGE), (
        "the excerpt is of another spec"
    )
    counts = re.search(r"^  (\d+) passed, (\d+) failed, (\d+) not claimed, (\d+) skipped in ", SCORECARD_PAGE, re.M)
    assert counts, "docs/scorecard.md has no summary line ('N passed, N failed, ...')"
    counted = sum(map(int, counts.groups()))
    assert counted == len(spec.CLAUSES), (
        f"docs/scorecard.md's summary {counts.group(0).strip()!r} counts {counted} clauses, "
        f"but spec {spec.SPEC_VERSION} has {len(spec.CLAUSES)}"
    )


def test_readme_verdict_excerpt_is_this_spec_and_its_waivers():
    """The README's example verdict: rows of this spec's clauses with their titles, and each
    DEVIATION (WAIVED) row a clause that backend's waiver file does waive."""
    section = README.split("\n## What a verdict looks like\n", 1)[1].split("\n## ", 1)[0]
    rows = _clause_rows(section)
    _assert_rows_are_this_spec("README.md", rows)
    backend = re.search(r"spec [\d.]+: backend (\S+) on ", section).group(1)
    waived = set(waiver_clauses(BUILTINS[backend]))
    shown = {c for c, status, _ in rows if status.startswith("DEVIATION")}
    assert shown and shown <= waived, f"README shows {sorted(shown - waived)} waived, which {backend} does not waive"


def test_readme_fits_on_a_few_screens():
    assert len((ROOT / "README.md").read_bytes()) <= 15_000, "the rest belongs in docs/ (mkdocs.yml's nav)"


@pytest.mark.parametrize(
    "doc",
    [
        "README.md",
        "docs/contributing.md",
        "reports/README.md",
        "reports/parity.md",
        "reports/thirdparty.md",
        "reports/kill-matrix.md",
        "reports/bench/README.md",
        "reports/performance.md",
        "examples/README.md",
    ],
)
def test_relative_links_resolve(doc):
    path = ROOT / doc
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", path.read_text()):
        if not re.match(r"[a-z]+://", target):
            assert (path.parent / target).exists(), f"{doc} links to {target}, which does not exist"


def _prose_lines(text: str) -> list[str]:
    """The lines of a Markdown page outside its fenced code blocks."""
    out, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced:
            out.append(line)
    return out


@pytest.mark.parametrize("page", sorted(p.name for p in (ROOT / "docs").glob("*.md")))
def test_each_docs_image_is_markup_the_site_shows(page):
    """An image is `![alt](file)` with its file in docs/, where the site (mkdocs) has it:
    docs/merge.md's scoreboard had lost its brackets and showed as text (a file outside docs/ fails
    the strict build)."""
    path = ROOT / "docs" / page
    lines = _prose_lines(path.read_text(encoding="utf-8"))
    lost = [line for line in lines if re.match(r"!\s*[A-Za-z]", line)]
    assert not lost, f"{page}: image markup without its brackets: {lost}"
    for target in re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", "\n".join(lines)):
        file = (path.parent / target).resolve()
        assert file.is_file() and file.is_relative_to(ROOT / "docs"), f"{page}: image {target} is not a file in docs/"


def test_thirdparty_findings_list_each_waiver_file():
    rows = {
        row[0].strip("`"): row
        for row in table((REPORTS / "thirdparty.md").read_text(), "| Backend | Implementation | Waived clauses |")
    }
    judged = [n for n in BUILTINS if n in registry.judged()]
    assert list(rows) == judged
    for name, row in rows.items():
        listed = row[2].split(", ")
        assert sorted(listed) == sorted(waiver_clauses(BUILTINS[name])), name
        assert f"({name}.md)" in row[4] and (REPORTS / f"{name}.md").is_file(), name


def test_parity_report_is_merged_md_parity_table():
    header = "| Column | h_prefill | h_decode | logits |"
    assert table_lines((REPORTS / "parity.md").read_text(), header) == table_lines(
        (REPORTS / "merged.md").read_text(), header
    )


def test_kill_matrix_report_is_the_recorded_kills():
    from test_kill_matrix import EXPECTED_KILLS

    from helpers import kill_matrix

    matrix = {"NumpyAdapter": {"failed": []}}
    matrix.update({name: {"failed": sorted(EXPECTED_KILLS[name])} for name in sorted(EXPECTED_KILLS)})
    text = (REPORTS / "kill-matrix.md").read_text()
    assert table_lines(text, "| Mutant |") == kill_matrix.markdown(matrix).splitlines()
    mean = sum(len(k) for k in EXPECTED_KILLS.values()) / len(EXPECTED_KILLS)
    assert f"{len(EXPECTED_KILLS)} deliberately broken adapters" in text
    assert f"{mean:.1f} on average over the {len(EXPECTED_KILLS)}" in text
