"""The house rules a newcomer can rely on, checked with the tools themselves: ruff's lint and
format (pyproject.toml [tool.ruff]), mypy on conformance/ and backends/ by their installed names
(pyproject.toml [tool.mypy]: .typecheck/gpt2_conformance and conformance/backends are the links
that show it the wheel's layout), the docs site built with --strict (mkdocs.yml: a broken link or
anchor, a missing include or a page left out of the nav fails), and no dated measurement in the
code (a figure with a date belongs in a record under reports/, which a module may link)."""

import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
BIN = pathlib.Path(sys.executable).parent


def _tool(name: str) -> str:
    path = shutil.which(name, path=str(BIN)) or shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is not installed: it comes with the test extra (pip install -e '.[test]')")
    return path


def _run(*command: str, cwd: pathlib.Path = ROOT) -> subprocess.CompletedProcess:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, env=env, timeout=600)


def test_ruff_lint_passes():
    out = _run(_tool("ruff"), "check", "--no-cache", ".")
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]


def test_ruff_format_is_kept():
    out = _run(_tool("ruff"), "format", "--check", "--no-cache", ".")
    assert out.returncode == 0, "run `ruff format .`:\n" + out.stdout[-4000:] + out.stderr[-2000:]


def test_mypy_passes_on_the_package_by_its_installed_name():
    out = _run(sys.executable, "-m", "mypy", "--no-incremental", "--cache-dir", os.devnull)
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-2000:]
    checked = re.search(r"(?:checked|issues found in) (\d+) source files", out.stdout)
    assert checked and int(checked.group(1)) >= 150, f"mypy checked too little of the package: {out.stdout[-300:]}"


def test_docs_site_builds_strict(tmp_path):
    out = _run(_tool("mkdocs"), "build", "--strict", "--site-dir", str(tmp_path / "site"))
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    assert (tmp_path / "site" / "spec" / "index.html").read_text().count("SHAPE-TABLES") >= 1, (
        "the spec page must include conformance/SPEC.md"
    )


def test_no_dated_figures_in_the_code():
    dated = re.compile(r"20\d\d-[01]\d-[0-3]\d")
    found = [
        f"{path.relative_to(ROOT)}:{n}"
        for folder in ("conformance", "backends")
        for path in (ROOT / folder).rglob("*.py")
        if not path.is_symlink() and "backends" not in path.relative_to(ROOT).parts[1:2]
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if dated.search(line)
    ]
    assert found == [], f"dated figures belong in a record under reports/: {found}"


def test_reports_hold_no_byte_copy_of_a_backends_file():
    """What a command renders from backends/ (the upstream scripts) is committed once: the command
    writes it again wherever it runs, so the copies it leaves in reports/ are ignored by git."""
    tracked = _run("git", "ls-files", "-z", "reports", "backends")
    if tracked.returncode != 0:
        pytest.skip(f"not a git checkout: {tracked.stderr.strip()}")
    files = [ROOT / name for name in tracked.stdout.split("\0") if name]
    sources = {p.read_bytes(): p for p in files if p.parts[len(ROOT.parts)] == "backends" and p.stat().st_size > 200}
    copies = [
        f"{p.relative_to(ROOT)} = {sources[p.read_bytes()].relative_to(ROOT)}"
        for p in files
        if p.parts[len(ROOT.parts)] == "reports" and p.stat().st_size > 200 and p.read_bytes() in sources
    ]
    assert copies == [], f"generated from backends/, so not committed twice: {copies}"
