"""Every bad input, on every route, is one line that names the input, the rule and what to do,
with the documented exit code: 2 from `gpt2-conformance run`, pytest's usage error 4 from the
pytest route (`pytest --pyargs gpt2_conformance.suite --gpt2c-...`), the same line on both with
each route's own option names. Each test runs the commands as a user would, from a folder of
its own outside the repository, and checks the line and the exit code; none of these inputs
may reach a test, where it would be blamed on the suite (ERROR) after the whole run."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

import numpy as np
import pytest

from gpt2_conformance.api import machine

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
ROUTES = ("cli", "pytest")


def _env(tmp_path, *paths) -> dict:
    """This environment with `paths` first on PYTHONPATH, and TMPDIR a folder of the test's (a
    run's log folder goes with it)."""
    return dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(filter(None, [*map(str, paths), os.environ.get("PYTHONPATH")])),
        **machine.child_temp_env(str(tmp_path / "tmp")),
    )


def _cli(tmp_path, *args, paths=(), timeout=300):
    out = subprocess.run(
        [sys.executable, "-m", "gpt2_conformance.cli", *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=_env(tmp_path, *paths),
        timeout=timeout,
    )
    return out.returncode, out.stdout, out.stderr


def _pytest(tmp_path, *args, paths=(), timeout=300):
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--pyargs", "gpt2_conformance.suite", "-q", "-p", "no:cacheprovider", *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=_env(tmp_path, *paths),
        timeout=timeout,
    )
    return out.returncode, out.stdout, out.stderr


def _cli_line(tmp_path, *args, paths=()) -> str:
    """`run`'s refusal: exit 2, one line on stderr, nothing on stdout (no test ran), no log left."""
    code, out, err = _cli(tmp_path, "run", *args, paths=paths)
    assert code == 2 and out == "" and err.count("\n") == 1, (code, out, err)
    assert err.startswith("gpt2-conformance: error: "), err
    assert not list((tmp_path / "tmp").glob("gpt2-conformance-*")), "a refused run leaves no log folder"
    return err.removeprefix("gpt2-conformance: error: ").rstrip("\n")


def _pytest_line(tmp_path, *args, paths=()) -> str:
    """The pytest route's refusal: pytest's usage error (exit 4), one line, no traceback."""
    code, out, err = _pytest(tmp_path, *args, paths=paths)
    assert code == 4, (code, out[-2000:], err[-2000:])
    assert "Traceback" not in out + err and "passed" not in out and "error" not in out.lower(), out + err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("ERROR: gpt2-conformance: "), err
    return lines[0].removeprefix("ERROR: gpt2-conformance: ")


def _both(tmp_path, cli_args, paths=()) -> str:
    """The line both routes print for the same input; they must be the same line, but for the
    options' names (--x on the CLI, --gpt2c-x in pytest)."""
    line = _cli_line(tmp_path, *cli_args, paths=paths)
    pytest_args = [a.replace("--", "--gpt2c-", 1) if a.startswith("--") else a for a in cli_args]
    assert _pytest_line(tmp_path, *pytest_args, paths=paths).replace("--gpt2c-", "--") == line
    return line


# -- 1. plug-ins --------------------------------------------------------------------------------

PLUGIN_ADAPTER = "from gpt2_conformance.backends.numpy.adapter import NumpyAdapter as Adapter\n"
PLUGIN_BACKEND = (
    "from gpt2_conformance.api.backend import REFERENCE, Backend\n\n"
    'BACKEND = Backend(name="{name}", adapter="{adapter}", requires=("numpy",), kind=REFERENCE, '
    'extra="")\n'
)


def _installed_plugin(root, backends: dict[str, str], adapters: dict[str, str] = None):
    """my_package/ (a package holding the adapter module and a plain module holding a BACKEND) and
    the entry points of an installed distribution, `my-plugin`, found through PYTHONPATH."""
    (root / "my_package").mkdir(exist_ok=True)
    (root / "my_package" / "__init__.py").write_text("")
    (root / "my_package" / "gpt2_adapter.py").write_text(PLUGIN_ADAPTER)
    (root / "my_package" / "gpt2_backend.py").write_text(
        PLUGIN_BACKEND.format(name="my-gpt2", adapter="gpt2_adapter:Adapter")
    )
    (root / "my_package" / "wrong_adapter.py").write_text(
        PLUGIN_BACKEND.format(name="wrong-adapter", adapter="no_such:Adapter")
    )
    (root / "top_level_backend.py").write_text(PLUGIN_BACKEND.format(name="top", adapter="gpt2_adapter:Adapter"))
    info = root / "my_plugin-0.1.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: my-plugin\nVersion: 0.1\n")
    groups = {"gpt2_conformance.backends": backends, "gpt2_conformance.adapters": adapters or {}}
    (info / "entry_points.txt").write_text(
        "".join(
            f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in entries.items()) for group, entries in groups.items()
        )
    )
    return root


@pytest.fixture
def plugin_site(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    return _installed_plugin(
        site,
        {
            "my-gpt2": "my_package.gpt2_backend",
            "gone": "my_package.nope",
            "wrong-adapter": "my_package.wrong_adapter",
            "top": "top_level_backend",
        },
        {"my-adapter": "my_package.gpt2_adapter:Adapter", "broken-gpt2": "my_package.not_there:Adapter"},
    )


ONE_TEST = "test_bounds.py::test_too_long_raises"


def test_a_plugin_entry_naming_a_plain_module_runs_on_both_routes(tmp_path, plugin_site):
    """README: the entry point names "a module holding BACKEND": a plain module inside a package
    works, its adapter found beside it (it was resolved inside the module: 40 suite errors)."""
    code, out, err = _cli(tmp_path, "run", "--backend", "my-gpt2", "--case", ONE_TEST, paths=[plugin_site])
    assert code == 0 and "1 passed, 0 failed" in out and "ERROR" not in out, out + err
    code, out, err = _pytest(tmp_path, "--gpt2c-backend", "my-gpt2", "--gpt2c-case", ONE_TEST, paths=[plugin_site])
    assert code == 0 and "1 passed" in out, out + err


def test_a_plugin_that_cannot_be_used_is_one_line_naming_its_entry_point(tmp_path, plugin_site):
    """A missing module, an adapter module that is not there, a top-level module: each one line
    naming the backend, its entry point and the distribution; every other backend still runs."""
    where = "(entry point gpt2_conformance.backends: {} = {}, installed by my-plugin 0.1)"
    line = _both(tmp_path, ["--backend", "gone"], paths=[plugin_site])
    assert line == (
        f"--backend 'gone': plug-in 'gone' {where.format('gone', 'my_package.nope')}: cannot import "
        "my_package.nope (No module named 'my_package.nope'): reinstall the package that provides it, "
        "or fix its entry point"
    ), line
    line = _both(tmp_path, ["--backend", "wrong-adapter"], paths=[plugin_site])
    assert line == (
        f"--backend 'wrong-adapter': plug-in 'wrong-adapter' "
        f"{where.format('wrong-adapter', 'my_package.wrong_adapter')}: its adapter 'no_such:Adapter' is "
        "my_package.no_such (no such module): BACKEND.adapter names a module:factory relative to "
        "my_package, the folder of the entry point's module"
    ), line
    line = _both(tmp_path, ["--backend", "broken-gpt2"], paths=[plugin_site])
    assert line == (
        "--backend 'broken-gpt2': plug-in 'broken-gpt2' (entry point gpt2_conformance.adapters: broken-gpt2 = "
        "my_package.not_there:Adapter, installed by my-plugin 0.1): its module my_package.not_there cannot be "
        "found (no such module): reinstall the package that provides it, or fix its entry point"
    ), line
    line = _both(tmp_path, ["--backend", "top"], paths=[plugin_site])
    assert line.endswith(
        "top_level_backend is a top-level module, so its adapter 'gpt2_adapter:Adapter' has no "
        "folder to be found in: name a package, or a module inside one"
    ), line
    code, out, err = _cli(tmp_path, "run", "--backend", "numpy", "--case", ONE_TEST, paths=[plugin_site])
    assert code == 0 and "1 passed" in out, out + err


def test_list_long_shows_each_plugin_in_its_columns(tmp_path, plugin_site):
    code, out, err = _cli(tmp_path, "list", "--long", paths=[plugin_site])
    assert code == 0, err
    rows = {line.split()[0]: line for line in out.splitlines()}
    assert rows["numpy"].startswith(f"{'numpy':<22} {'reference':<10} installed"), rows["numpy"]
    assert rows["my-gpt2"] == f"{'my-gpt2':<22} {'reference':<10} installed", rows["my-gpt2"]
    assert rows["my-adapter"] == f"{'my-adapter':<22} {'plug-in':<10} adapter my_package.gpt2_adapter:Adapter"
    assert rows["gone"].startswith(f"{'gone':<22} {'plug-in':<10} broken: plug-in 'gone' (entry point "), rows["gone"]
    assert rows["wrong-adapter"].startswith(f"{'wrong-adapter':<22} {'reference':<10} broken: plug-in "), rows
    # an adapter plug-in whose module is not there is flagged as a backend plug-in's is, with its
    # entry point and the distribution that installed it (docs/adapters.md); it was listed as fine
    assert rows["broken-gpt2"] == (
        f"{'broken-gpt2':<22} {'plug-in':<10} broken: plug-in 'broken-gpt2' (entry point "
        "gpt2_conformance.adapters: broken-gpt2 = my_package.not_there:Adapter, installed by my-plugin 0.1): "
        "its module my_package.not_there cannot be found (no such module): reinstall the package that "
        "provides it, or fix its entry point"
    ), rows["broken-gpt2"]


# -- 2. a checkpoint that is not one ------------------------------------------------------------


def _bad_checkpoints(folder) -> dict[str, tuple[str, str]]:
    """name -> (path, what its line says) for files that are not GPT-2 checkpoints."""
    from helpers.golden_writers import write_safetensors

    garbage = folder / "garbage.safetensors"
    garbage.write_bytes(bytes(range(256)) * 4)
    truncated = write_safetensors(folder, {"wte": np.zeros((64, 8), np.float32), "wpe": np.zeros((16, 8), np.float32)})
    with open(truncated, "r+b") as f:
        f.truncate(os.path.getsize(truncated) - 100)
    np.savez(folder / "no-wte.npz", wpe=np.zeros((1024, 768), np.float32))
    return {
        "garbage": (str(garbage), "exceeds the file (1024 bytes): truncated or not a safetensors file"),
        "truncated": (truncated, "truncated"),
        "no-wte": (str(folder / "no-wte.npz"), "no GPT-2 wte tensor"),
    }


@pytest.mark.parametrize("kind", ["garbage", "truncated", "no-wte"])
def test_run_refuses_a_file_that_is_not_a_checkpoint_at_once(tmp_path, kind):
    """`run --checkpoint` reads the file as `golden --checkpoint` does, before any test: exit 2 in
    one line within 5 s (it ran the whole suite, then blamed the user's file on the suite)."""
    path, says = _bad_checkpoints(tmp_path)[kind]
    start = time.perf_counter()
    line = _cli_line(tmp_path, "--backend", "numpy", "--checkpoint", os.path.basename(path), paths=[TESTS_DIR])
    assert time.perf_counter() - start < 5
    assert line.startswith(f"--checkpoint {os.path.basename(path)}: ") and says in line, line
    assert line.endswith(
        "; give a GPT-2 checkpoint with float32 wte and wpe (.safetensors, torch .bin, TF "
        "model.ckpt, .npz, .gguf), or leave --checkpoint out to use the shipped golden data"
    ), line
    assert "suite" not in line.replace("the shipped golden data", "")
    golden = _cli(tmp_path, "golden", "--checkpoint", os.path.basename(path))
    assert golden[0] == 2 and line.split(": ", 1)[1].split("; give")[0] in golden[2], golden


def test_the_pytest_route_refuses_the_same_checkpoint_with_the_same_line(tmp_path):
    path, _ = _bad_checkpoints(tmp_path)["garbage"]
    line = _both(tmp_path, ["--backend", "numpy", "--checkpoint", os.path.basename(path)], paths=[TESTS_DIR])
    assert "truncated or not a safetensors file" in line, line


# -- 3. the pytest route: one line, exit 4, as the CLI's ----------------------------------------


@pytest.mark.parametrize(
    "args,says",
    [
        (
            ["--backend", "numpy", "--case", "test_bounds.py::test_too_long_raise"],
            "--case 'test_bounds.py::test_too_long_raise': test_bounds.py has no test 'test_too_long_raise'; "
            "did you mean 'test_too_long_raises'?",
        ),
        (
            ["--adapter", "no_such_module_57:Adapter"],
            "adapter 'no_such_module_57:Adapter': cannot import 'no_such_module_57': "
            "No module named 'no_such_module_57'",
        ),
        (
            ["--backend", "numpy", "--waivers", "missing.toml"],
            "waiver file missing.toml: cannot be read (No such file or directory); give the path of a TOML file of "
            "[[waiver]] tables",
        ),
        (["--backend", "numpy", "--seed", "3"], "--seed replays a thorough run: add --thorough"),
        (["--backend", "no-such-backend"], "--backend 'no-such-backend': unknown backend; available: numpy, "),
        (
            ["--backend", "numpy", "--checkpoint", "missing.safetensors"],
            "--checkpoint missing.safetensors: no such file; ",
        ),
    ],
    ids=["case", "adapter", "waivers", "seed", "backend", "checkpoint"],
)
def test_each_bad_input_is_the_same_line_on_both_routes(tmp_path, args, says):
    """The CLI's exit 2 and pytest's usage error 4 (README's exit-code table), one line each: the
    pytest route gave a 47-line chained traceback for three of these and another wording for --case."""
    line = _both(tmp_path, args)
    assert line.startswith(says), line


# -- 4. a mistyped waiver file ------------------------------------------------------------------


@pytest.mark.parametrize("route", ROUTES)
def test_a_mistyped_waiver_table_is_an_error_naming_the_key_and_the_file(tmp_path, route):
    """`[[waivers]]` for `[[waiver]]` was read as a file of no waivers: the deviation then failed as
    if no waiver existed."""
    (tmp_path / "waivers.toml").write_text(
        'implementation = "mine"\n\n[[waivers]]\nclause = "BOUNDS-MESSAGE"\n'
        'reason = "r"\nlink = "https://example.org/issue/1"\n'
    )
    args = ["--backend", "numpy", "--waivers", "waivers.toml"]
    line = (
        _cli_line(tmp_path, *args)
        if route == "cli"
        else _pytest_line(tmp_path, *[a.replace("--", "--gpt2c-", 1) for a in args])
    )
    assert line == (
        "waiver file waivers.toml: unknown [[waivers]] (a waiver file holds `implementation` and "
        "[[waiver]] tables, each with clause, reason and link); did you mean [[waiver]]?"
    ), line


# -- 5. WAIVERS relative to the adapter's module -------------------------------------------------

WAIVED_ADAPTER = """
from gpt2_conformance.backends.numpy.adapter import NumpyAdapter


class MyAdapter(NumpyAdapter):
    WAIVERS = "waivers.toml"  # beside this module
"""


@pytest.mark.parametrize("route", ROUTES)
def test_a_relative_waivers_attribute_is_found_beside_its_module(tmp_path, route):
    """The README's example, run from another folder: the file beside the adapter is read (its
    waiver of a clause that passes is stale, exit 1), not looked for in the current folder."""
    adapters = tmp_path / "adapters"
    adapters.mkdir()
    (adapters / "my_gpt2_adapter.py").write_text(WAIVED_ADAPTER)
    (adapters / "waivers.toml").write_text(
        '[[waiver]]\nclause = "INIT-WPE"\nreason = "a test waiver"\nlink = "https://example.org/src.py#L1"\n'
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    if route == "cli":
        code, out, err = _cli(
            elsewhere,
            "run",
            "--adapter",
            "my_gpt2_adapter:MyAdapter",
            "--case",
            "test_init.py::test_wpe_init[768]",
            paths=[adapters],
        )
    else:
        code, out, err = _pytest(
            elsewhere,
            "--gpt2c-adapter",
            "my_gpt2_adapter:MyAdapter",
            "--gpt2c-case",
            "test_init.py::test_wpe_init[768]",
            paths=[adapters],
        )
    assert code == 1 and "STALE WAIVER: INIT-WPE is waived (https://example.org/src.py#L1)" in out, out + err


# -- 6. the suite's interpreter ------------------------------------------------------------------


def test_run_on_an_interpreter_without_pytest_timeout_says_what_to_install(tmp_path):
    """Each suite child is this interpreter with pytest-timeout loaded: without it every child died
    at its start and all 40 clauses were ERROR, the reason a traceback cut mid-word."""
    script = (
        "import sys; sys.modules['pytest_timeout'] = None  # as an environment without it\n"
        "from gpt2_conformance import cli; sys.exit(cli.main(['run', '--backend', 'numpy']))"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path, env=_env(tmp_path), timeout=120
    )
    assert out.returncode == 2 and out.stdout == "", out
    assert out.stderr == (
        f"gpt2-conformance: error: pytest-timeout is not installed in {sys.executable}, and the "
        "suite's test processes load it: pip install pytest-timeout into that environment, or run "
        "the gpt2-conformance of one that has it\n"
    ), out.stderr


def test_a_child_that_dies_at_its_start_is_reported_by_its_last_exception_line():
    from gpt2_conformance.run import runner

    output = (
        'Traceback (most recent call last):\n  File "/usr/lib/python3.11/site-packages/pluggy/_manager.py", '
        "line 1, in load\n" + "    x\n" * 400 + 'ImportError: Error importing plugin "pytest_timeout": '
        "No module named 'pytest_timeout'\n"
    )
    assert runner.last_words(output) == (
        "ImportError: Error importing plugin \"pytest_timeout\": No module named 'pytest_timeout'"
    )
    plain = "first line\n" + "\n".join(f"line {i} of output" for i in range(200))
    words = runner.last_words(plain, limit=100)
    assert words.splitlines()[-1] == "line 199 of output" and all(
        re.fullmatch(r"line \d+ of output", ln) for ln in words.splitlines()
    ), words


# -- 7. small ones --------------------------------------------------------------------------------


def test_an_output_folder_under_proc_names_the_folder_given(tmp_path):
    code, out, err = _cli(tmp_path, "run", "--backend", "numpy", "--report-dir", "/proc/nope")
    assert code == 2 and out == "", (code, out, err)
    assert err == (
        "gpt2-conformance run: error: --report-dir /proc/nope: this folder cannot be made, as /proc, the "
        "nearest folder that exists, cannot be written (Permission denied); give a folder you can write\n"
    ), err


def test_an_output_folder_that_exists_but_cannot_be_written_says_permission_denied(tmp_path):
    """/proc/self is there and takes no new file (root included, where chmod denies nothing); the
    kernel says ENOENT for it, which named the folder as missing."""
    code, out, err = _cli(tmp_path, "run", "--backend", "numpy", "--report-dir", "/proc/self")
    assert code == 2 and out == "", (code, out, err)
    assert err == (
        "gpt2-conformance run: error: --report-dir /proc/self: this folder cannot be written (Permission "
        "denied); give a folder you can write\n"
    ), err


RUNS = os.path.join(os.path.dirname(TESTS_DIR), "reports", "runs")
FOLDER_OUTPUTS = {
    "run": ["run", "--backend", "numpy", "--report-dir"],
    "bench": ["bench", "--quick", "--out-dir"],
    "merge": ["merge", RUNS, "--out-dir"],
    "thirdparty": ["thirdparty", "hf-transformers", "--out"],
    "upstream": ["upstream", "numpy", "--out-dir"],
}
OUT_OF_RANGE = ["out-of-range", "--reports", RUNS, "--out"]


@pytest.mark.parametrize("command", sorted(FOLDER_OUTPUTS))
def test_every_commands_output_folder_is_checked_the_same_way(tmp_path, command):
    """One check for each command's output (cli.OUTPUTS), before anything runs: one line, exit 2."""
    (tmp_path / "a-file").write_text("")
    args = FOLDER_OUTPUTS[command]
    prefix = f"gpt2-conformance {command}: error: {args[-1]}"
    for given, says in [
        ("/proc/nope", "/proc/nope: this folder cannot be made, as /proc, the nearest folder that exists, "),
        ("a-file/sub", f"a-file/sub: {tmp_path / 'a-file'} is a file, not a folder"),
    ]:
        code, out, err = _cli(tmp_path, *args, given)
        assert code == 2 and out == "" and err.count("\n") == 1, (code, out, err)
        assert err.startswith(f"{prefix} {says}"), err


@pytest.mark.parametrize(
    "given,says",
    [
        (
            "/proc/oor.md",
            "this file cannot be written, as /proc, its folder, cannot be written (Permission denied); give a "
            "file in a folder you can write",
        ),
        ("a-folder", "this names a folder, not a file; give the file to write"),
        ("a-file/oor.md", "{tmp}/a-file is a file, not a folder"),
        (
            "/proc/new/oor.md",
            "this file cannot be made, as /proc, the nearest folder that exists, cannot be written (Permission "
            "denied); give a file in a folder you can write",
        ),
    ],
)
def test_out_of_range_out_that_cannot_be_written_is_one_line(tmp_path, given, says):
    """out-of-range's --out is a file: the same check as every command's output folder (it was a
    FileNotFoundError or IsADirectoryError traceback, exit 1)."""
    (tmp_path / "a-folder").mkdir()
    (tmp_path / "a-file").write_text("")
    code, out, err = _cli(tmp_path, *OUT_OF_RANGE, given)
    assert (code, out) == (2, ""), (code, out, err)
    assert err == f"gpt2-conformance out-of-range: error: --out {given}: {says.format(tmp=tmp_path)}\n", err


def test_a_parametrised_test_named_alone_is_refused_with_its_cases(tmp_path):
    """--case wants one case of a parametrised test: the refusal says so and lists them."""
    line = _both(tmp_path, ["--backend", "numpy", "--case", "test_bounds.py::test_error_names_value_and_rule"])
    assert line == (
        "--case 'test_bounds.py::test_error_names_value_and_rule' is a parametrised test: name one of "
        "its cases, as a report's repro line does: 'test_bounds.py::test_error_names_value_and_rule"
        "[position]', 'test_bounds.py::test_error_names_value_and_rule[position cached]', "
        "'test_bounds.py::test_error_names_value_and_rule[token-high]', "
        "'test_bounds.py::test_error_names_value_and_rule[token-negative]'"
    ), line


@pytest.mark.parametrize(
    "name,says",
    [
        ("numpy", "numpy is a reference backend (ours), not a third-party implementation: "),
        ("no-such", "unknown implementation 'no-such': "),
    ],
)
def test_thirdparty_says_what_it_takes(tmp_path, name, says):
    """`thirdparty numpy` called the reference backend an "unknown implementation"."""
    from gpt2_conformance import registry

    code, out, err = _cli(tmp_path, "thirdparty", name)
    assert (code, out) == (2, ""), (code, out, err)
    takes = f"thirdparty takes the judged backends: {', '.join(registry.judged())}"
    run = "; `gpt2-conformance run --backend numpy` runs the suite on it" if name == "numpy" else ""
    assert err == f"gpt2-conformance thirdparty: error: {says}{takes}{run}\n", err
