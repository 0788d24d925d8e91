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


# a figure with a unit of time, or a speed ratio ("6x faster"), in a comment or docstring: a
# measurement, which goes stale in the code; a shape such as "1024 x 768" is no ratio
MEASURED = re.compile(
    r"(?<![\w.])\d+(?:\.\d+)?(?:-\d+(?:\.\d+)?)?(?:\s?(?:s|ms|µs|us|min|minutes|seconds|hours?)|x)(?!\w)"
)


def _comments_and_docstrings(path: pathlib.Path):
    """(line, text) of each comment and docstring of a Python file."""
    import io
    import tokenize

    previous = None
    for token in tokenize.generate_tokens(io.StringIO(path.read_text(encoding="utf-8")).readline):
        docstring = (
            token.type == tokenize.STRING
            and (previous is None or previous.type in (tokenize.INDENT, tokenize.NEWLINE, tokenize.NL, tokenize.DEDENT))
            and token.string.lstrip("rbuRBU").startswith(('"""', "'''"))
        )
        if token.type == tokenize.COMMENT or docstring:
            yield token.start[0], token.string
        if token.type not in (tokenize.NL, tokenize.COMMENT):
            previous = token


def test_no_measured_figures_in_comments_or_docstrings():
    """Comments and docstrings say why, not how fast: a time or a speed ratio measured once goes
    stale unseen, so it lives in a record under reports/ (reports/performance.md), which they link."""
    found = [
        f"{path.relative_to(ROOT)}:{line + text[: m.start()].count(chr(10))}: {m.group(0)}"
        for folder in ("conformance", "backends")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if not path.is_symlink() and "backends" not in path.relative_to(ROOT).parts[1:2]
        for line, text in _comments_and_docstrings(path)
        for m in MEASURED.finditer(text)
    ]
    assert found == [], f"measured figures belong in a record under reports/: {found}"


# a path of the project named in a comment or docstring (tests/..., conformance/..., reports/...)
NAMED_PATH = re.compile(
    r"(?<![\w/.-])((?:tests|conformance|backends|reports|docs|scripts|fixtures|examples)/[\w./-]*\w)"
)


def test_every_path_a_comment_or_docstring_names_exists():
    """A module that points the reader at a file (`tests/backends/test_tract_hf.py shows ...`,
    `reports/performance.md`) points at one that is there: renamed or deleted files leave none behind."""
    missing = []
    for folder in ("conformance", "backends", "tests", "scripts"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path.is_symlink() or "backends" in path.relative_to(ROOT).parts[1:2]:
                continue
            for line, text in _comments_and_docstrings(path):
                for m in NAMED_PATH.finditer(text):
                    named = m.group(1).rstrip(".")
                    after = text[m.end() : m.end() + 1]
                    owner = re.search(r"'s\s+$", text[max(0, m.start() - 8) : m.start()])  # tinygrad's examples/...
                    placeholder = any(part.isupper() for part in named.split("/"))  # reports/upstream/NAME/...
                    if (after and after in "*<{[") or ".." in named or owner or placeholder:
                        continue
                    candidates = [ROOT / named, ROOT / "conformance" / named.removeprefix("gpt2_conformance/")]
                    if not any(c.exists() or c.with_suffix(".py").exists() for c in candidates):
                        missing.append(f"{path.relative_to(ROOT)}:{line}: {named}")
    assert missing == [], f"comments and docstrings name paths that do not exist: {missing}"


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
