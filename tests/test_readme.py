"""The README's promises: its first two commands are what CI runs, and its minimal adapter
runs as written and passes every clause it claims."""

import pathlib
import re
import sys

from gpt2_conformance.results import FAIL, NOT_CLAIMED
from gpt2_conformance.run.runner import run_in_process

ROOT = pathlib.Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def test_readme_starts_with_the_two_commands_and_ci_runs_the_second():
    bash = re.search(r"```bash\n(.*?)```", README, re.S).group(1)
    commands = [line for line in bash.splitlines() if line and not line.startswith("#")]
    assert len(commands) == 2
    assert "gpt2-conformance run --backend all" in commands[0]
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
        "INIT-WTE", "INIT-WPE", "INIT-DISTINCT", "TIED-STORAGE", "TIED-GRAD", "DTYPE-FLOAT16", "DTYPE-BFLOAT16"}
