"""The runner and the CLI: verdicts, reports, exit codes, and adapters that hang, crash or
return the wrong type each cost one FAIL with the reason while the run goes on."""

import json
import os
import subprocess
import sys
from xml.etree import ElementTree as ET

import numpy as np
import pytest

from gpt2_conformance import results as res
from gpt2_conformance import spec
from gpt2_conformance.api import machine
from gpt2_conformance.run import runner

TESTS_DIR = os.path.dirname(__file__)
SUBSET = ["-k", "token_by_token_decode or test_empty_sequence or test_no_output_bias"]  # quick tests


@pytest.fixture(autouse=True)
def _tests_on_child_path(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [TESTS_DIR, os.environ.get("PYTHONPATH")])))


def _status(result, clause_id):
    return next(c for c in result.clauses if c.clause.id == clause_id)


@pytest.mark.parametrize(
    "adapter,timeout,reason",
    [
        ("helpers.bad_adapters:HangsInPython", 5, "Timeout"),
        (
            "helpers.bad_adapters:HangsInNativeCode",
            5,
            "hung: no result within the 5 s limit per test (--timeout) nor 5 s",
        ),
        ("helpers.bad_adapters:CrashesInterpreter", 60, "crashed: the test process died"),
    ],
)
def test_misbehaving_adapter_costs_one_fail_and_the_run_goes_on(adapter, timeout, reason):
    result = runner.run_backend(adapter, test_timeout=timeout, adapter_spec=adapter, extra_args=SUBSET, hang_grace=10)
    decode = _status(result, "POSITIONS-DECODE")
    assert decode.status == res.FAIL and reason in decode.message, decode.message
    # the tests after it still ran and passed
    assert _status(result, "SHAPE-EMPTY").status == res.PASS
    assert _status(result, "TIED-NO-BIAS").status == res.PASS


def test_wrong_return_type_is_a_fail_naming_the_type():
    result = runner.run_backend("ReturnsList", adapter_spec="helpers.bad_adapters:ReturnsList", extra_args=SUBSET)
    shape = _status(result, "SHAPE-EMPTY")
    assert shape.status == res.FAIL
    assert "returned list, but should return numpy.ndarray" in shape.message


def _cli(*args, cwd=None, temp=None, env_path=None):
    """The CLI in its own process; `temp`: its temporary directory (a run without --report-dir
    keeps its log folder there), the caches where they are; `env_path`: put on PYTHONPATH."""
    env = dict(os.environ, **(machine.child_temp_env(str(temp)) if temp else {}))
    if env_path:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [env_path, os.environ.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-m", "gpt2_conformance.cli", *args], capture_output=True, text=True, cwd=cwd, env=env
    )


def test_a_native_hang_names_the_timeout_given_and_the_grace_after_it(tmp_path):
    """`run --timeout 3`, as a user runs it: the hung test's message says 3 s, the limit given, and
    the grace the watchdog adds for a hang in native code (it said "no result after 6 s")."""
    out = _cli(
        "run",
        "--adapter",
        "helpers.bad_adapters:HangsInNativeCode",
        "--timeout",
        "3",
        "--case",
        "test_positions.py::test_token_by_token_decode[C-0-12]",
        cwd=tmp_path,
        temp=tmp_path / "tmp",
        env_path=TESTS_DIR,
    )
    assert out.returncode == res.EXIT_FAIL, out.stdout + out.stderr
    decode = next(line for line in out.stdout.splitlines() if line.strip().startswith("POSITIONS-DECODE"))
    assert decode.endswith(
        "hung: no result within the 3 s limit per test (--timeout) nor 3 s of grace after it (stuck where the "
        "limit's signal cannot reach, e.g. in native code), process killed"
    ), decode


def test_cli_full_numpy_run_scorecard_reports_and_exit_code(tmp_path):
    out = _cli("run", "--backend", "numpy", "--jobs", "2", "--report-dir", str(tmp_path))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "LOOKUP-EXACT               PASS" in out.stdout
    assert "DTYPE-BFLOAT16             NOT CLAIMED" in out.stdout
    n = len(spec.CLAUSES)
    data = json.loads((tmp_path / "gpt2-conformance-numpy-cpu.json").read_text())
    assert data["summary"] == {
        "PASS": n - 1,
        "FAIL": 0,
        "DEVIATION (WAIVED)": 0,
        "NOT CLAIMED": 1,
        "SKIPPED": 0,
        "ERROR": 0,
    }
    assert data["format"] == res.REPORT_FORMAT and data["exit_code"] == 0 and data["created"]
    env = data["environment"]
    assert env["golden_data"].startswith("shipped fixtures")
    assert env["host"] and env["device_name"] and env["versions"]["numpy"] and env["implementation"]
    suite = ET.parse(tmp_path / "gpt2-conformance-numpy-cpu.xml").getroot()
    assert suite.get("tests") == str(n) and suite.get("failures") == "0" and suite.get("skipped") == "1"
    assert "| LOOKUP-EXACT |" in (tmp_path / "gpt2-conformance-numpy-cpu.md").read_text()
    # two shards: the first to finish computed the parity fingerprint, the one the reference gives
    from gpt2_conformance.backends.numpy.adapter import NumpyAdapter
    from gpt2_conformance.run import parity

    ran, here = data["parity"], json.loads(json.dumps(parity.fingerprint_of(NumpyAdapter)))
    # h is a gather and one IEEE addition: bit for bit in any process. The logits are a BLAS
    # product whose summation order follows its thread count (OpenBLAS splits the work by
    # threads), and a suite shard runs with its share of the cores (machine.thread_pools_for)
    # while this process may have loaded BLAS with more: equal to float32 rounding, not bits.
    ran_logits, here_logits = ran["cases"].pop("logits"), here["cases"].pop("logits")
    assert ran == here
    assert {k: v for k, v in ran_logits.items() if "sha256" not in k and k != "sample"} == {
        k: v for k, v in here_logits.items() if "sha256" not in k and k != "sample"
    }
    np.testing.assert_allclose(ran_logits["sample"], here_logits["sample"], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "value,expected",
    [("1", 1), ("3", 3), (None, "cores"), ("", "cores"), ("0", "cores"), ("two", "cores"), ("-1", "cores")],
)
def test_threads_is_the_share_of_the_cores_a_runner_gave(monkeypatch, value, expected):
    """machine.threads(): what engines that take a thread count run, OMP_NUM_THREADS where the
    runner (thread_pools_for) or the user set a positive count, else every core."""
    from gpt2_conformance.api import machine

    if value is None:
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    else:
        monkeypatch.setenv("OMP_NUM_THREADS", value)
    assert machine.threads() == (machine.cores() if expected == "cores" else expected)


def test_only_the_first_shard_to_claim_the_parity_fingerprint_computes_it(tmp_path):
    from gpt2_conformance.run import events

    claim = str(tmp_path / "parity-claimed")
    assert [events._claimed(claim), events._claimed(claim), events._claimed(None)] == [True, False, True]


def _shard(shard: str, cwd) -> list[str]:
    """The node ids one suite child of `run --backend numpy` runs with --gpt2c-shard `shard`."""
    plugins = [a for p in runner.CHILD_PLUGINS for a in ("-p", p)]
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            *runner.SUITE_ARGS,
            *plugins,
            "--collect-only",
            "--gpt2c-backend",
            "numpy",
            "--gpt2c-shard",
            shard,
        ],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=dict(os.environ, PYTEST_DISABLE_PLUGIN_AUTOLOAD="1"),
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    return [line for line in out.stdout.splitlines() if "::" in line]


def test_shards_split_the_suite_and_a_module_fixture_is_built_in_one(tmp_path):
    """Two shards run every test once between them, the same split each time, in shares within a
    tenth of the suite of each other; the tests that share a module-scoped fixture (test_init.py's
    `initialised`: one init_tables, most of a second) are in the same shard."""
    whole, first, second = (_shard(shard, tmp_path) for shard in ("0/1", "0/2", "1/2"))
    assert sorted(first + second) == sorted(whole) and not set(first) & set(second)
    assert abs(len(first) - len(second)) <= len(whole) // 10, (len(first), len(second))
    assert _shard("0/2", tmp_path) == first
    initialised = {f"test_init.py::test_{table}_init[{d}]" for table in ("wte", "wpe") for d in (768, 1024, 1280, 1600)}
    initialised.add("test_init.py::test_tables_distinct")
    assert initialised <= set(whole)
    assert initialised <= set(first) or initialised <= set(second)


def test_cli_failing_adapter_exits_1_with_one_line_reason(tmp_path):
    out = _cli("run", "--adapter", "helpers.mutants:NoCacheOffset", temp=tmp_path)
    assert out.returncode == 1
    line = next(x for x in out.stdout.splitlines() if x.strip().startswith("POSITIONS-OFFSET"))
    assert "FAIL" in line and "but should be" in line and "embed(ids=" in line, line


def test_cli_nothing_claimed_exits_3(tmp_path):
    out = _cli("run", "--adapter", "helpers.bad_adapters:CpuOnly", "--device", "gpu", temp=tmp_path)
    assert out.returncode == 3, out.stdout
    assert f"0 passed, 0 failed, {len(spec.CLAUSES)} not claimed" in out.stdout


@pytest.mark.parametrize(
    "args,message",
    [
        (["run", "--backend", "nope"], "--backend 'nope': unknown backend; available: numpy,"),
        (["run", "--adapter", "nocolon"], "must have the form package.module:factory"),
        (["run", "--adapter", "no_such_module_x:f"], "cannot import 'no_such_module_x'"),
        (["run", "--backend", "numpy", "--timeout", "0"], "--timeout must be > 0"),
        (["run", "--backend", "numpy", "--timeout", "inf"], "--timeout must be > 0 and finite, got inf"),
        (["run", "--backend", "numpy", "--durations", "-1"], "--durations must be >= 0, got -1"),
        (
            ["run", "--backend", "numpy", "--checkpoint", "/no/such/model.safetensors"],
            "--checkpoint /no/such/model.safetensors: no such file",
        ),
        (["run", "--backend", "numpy", "--checkpoint", __file__], "unknown checkpoint format"),
        (["run", "--backend", "numpy", "--device", "tpu"], "invalid choice: 'tpu'"),
        (
            ["run", "--backend", "numpy", "--case", "test_bounds.py::test_too_long_raise"],
            "test_bounds.py has no test 'test_too_long_raise'; did you mean 'test_too_long_raises'?",
        ),
        (
            ["run", "--backend", "numpy", "--case", "test_bound.py::test_too_long_raises"],
            "--case 'test_bound.py::test_too_long_raises': not FILE::TEST of the suite",
        ),
        (["run", "--backend", "numpy", "--case", "test_bounds.py"], "not FILE::TEST of the suite"),
        (
            ["run", "--adapter", "helpers.bad_adapters:NOT_A_FACTORY"],
            "adapter 'helpers.bad_adapters:NOT_A_FACTORY': 5 (int) is not an adapter class or factory function",
        ),
        (
            ["run", "--adapter", "helpers.bad_adapters:factory_without_claims"],
            "adapter 'helpers.bad_adapters:factory_without_claims': factory_without_claims has no `capabilities`",
        ),
    ],
)
def test_cli_bad_input_is_a_clear_error(args, message):
    """Each a usage error (exit 2) in one line, before any suite child starts: an adapter without
    claims once cost every clause a 'suite error' and exit 1, blaming the suite."""
    out = _cli(*args, env_path=TESTS_DIR)
    assert out.returncode == 2 and message in out.stderr, (out.returncode, out.stderr)


def test_case_with_unknown_parameters_is_a_usage_error(tmp_path):
    """The brackets of a --case exist only once the suite is collected, so the child refuses
    them; the command still ends as a usage error (exit 2), with close cases named, no reports
    and no folder left behind. A good --case leaves its one log folder."""
    out = _cli(
        "run", "--backend", "numpy", "--case", "test_lookup.py::test_positions_are_table_rows[1022]", temp=tmp_path
    )
    assert out.returncode == 2, (out.returncode, out.stdout, out.stderr)
    assert out.stderr.startswith(
        "gpt2-conformance: error: --case 'test_lookup.py::test_positions_are_table_rows"
        "[1022]' names no test of the suite; did you mean "
        "'test_lookup.py::test_positions_are_table_rows[1023]'"
    ), out.stderr
    assert "SKIPPED" not in out.stdout and not list(tmp_path.glob("gpt2-conformance-*"))
    out = _cli(
        "run", "--backend", "numpy", "--case", "test_lookup.py::test_positions_are_table_rows[1023]", temp=tmp_path
    )
    assert out.returncode == 0 and "1 passed" in out.stdout, out.stdout + out.stderr
    (folder,) = tmp_path.glob("gpt2-conformance-*")  # one: the folder was once made twice, one left empty
    assert [p.name for p in folder.iterdir()] == ["gpt2-conformance-numpy-cpu.log"]


def test_pytest_without_backend_is_a_usage_error():
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--pyargs", "gpt2_conformance.suite", "-q", "-p", "no:cacheprovider"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 4, out.stdout + out.stderr
    assert (
        "ERROR: gpt2-conformance: the suite needs --gpt2c-backend NAME or --gpt2c-adapter package.module:factory "
        "(gpt2-conformance list names the backends)"
    ) in out.stderr, out.stderr


def test_durations_lists_the_slowest_tests_with_their_clause():
    from gpt2_conformance.run import report

    outcomes = [
        res.TestOutcome("test_init.py::test_wte_init", "INIT-WTE", "passed", duration=0.61),
        res.TestOutcome("test_lookup.py::test_exact_sum", "LOOKUP-EXACT", "failed", "h differs", duration=2.5),
        res.TestOutcome("test_shape.py::test_h_shape[cached]", "SHAPE-H", "passed", duration=0.02),
    ]
    result = res.SuiteResult("numpy", "cpu", spec.SPEC_VERSION, res.aggregate(outcomes), 3.0)
    lines = report.slowest(result, 2).splitlines()
    assert lines[0].startswith("  slowest 2 test(s) of numpy (shards run side by side")
    assert lines[1:] == [
        "      2.50 s  LOOKUP-EXACT               test_lookup.py::test_exact_sum (failed)",
        "      0.61 s  INIT-WTE                   test_init.py::test_wte_init (passed)",
    ]
    assert report.slowest(result, 10).count(" s  ") == 3


def test_clause_with_no_test_is_the_suites_error_not_a_pass():
    clauses = res.aggregate([])
    assert all(c.status == res.ERROR and c.message == "suite error: no test ran for this clause" for c in clauses)


NOISY_ADAPTER = """
import os
from gpt2_conformance.backends.numpy.adapter import NumpyAdapter
os.write(2, b"I0000 cudart_stub.cc:31] NATIVE-IMPORT-NOISE\\n")  # as TensorFlow's import does, from C


class Noisy(NumpyAdapter):
    def embed(self, ids, past_length=0):
        os.write(2, b"NATIVE-CALL-NOISE\\n")
        return super().embed(ids, past_length)
"""


def test_framework_output_stays_off_the_console_unless_verbose(tmp_path, monkeypatch):
    """Native output while the CLI imports an adapter, and the children's output, go to the
    backend's log file beside its reports; --verbose shows them."""
    (tmp_path / "noisy_adapter.py").write_text(NOISY_ADAPTER)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), TESTS_DIR, os.environ.get("PYTHONPATH", "")]))
    # the suite's children are replaced by a canned result: this is about the CLI's own process
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from gpt2_conformance import cli, results as res, spec\n"
            "from gpt2_conformance.run import runner\n"
            "runner.run_backend = lambda name, device, timeout, **kw: res.SuiteResult(name, device, "
            "spec.SPEC_VERSION, res.aggregate([]), 0.0)\n"
            "cli._fingerprint = lambda name, result: {}\n"
            "sys.exit(cli.main(sys.argv[1:]))",
            "run",
            "--adapter",
            "noisy_adapter:Noisy",
            "--report-dir",
            str(tmp_path / "r"),
        ],
        capture_output=True,
        text=True,
    )
    assert "NATIVE-IMPORT-NOISE" not in out.stdout + out.stderr, out.stderr
    assert "NATIVE-IMPORT-NOISE" in (tmp_path / "r" / "gpt2-conformance-noisy_adapter_Noisy-cpu.log").read_text()
    loud = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpt2_conformance.cli",
            "run",
            "--adapter",
            "noisy_adapter:Noisy",
            "--verbose",
            "--device",
            "gpu",
        ],
        capture_output=True,
        text=True,
        env=dict(os.environ, **machine.child_temp_env(str(tmp_path / "tmp"))),
    )  # its log folder
    assert "NATIVE-IMPORT-NOISE" in loud.stderr


def test_child_output_goes_to_the_log_not_the_console(tmp_path, monkeypatch, capfd):
    (tmp_path / "noisy_adapter.py").write_text(NOISY_ADAPTER)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), TESTS_DIR, os.environ.get("PYTHONPATH", "")]))
    log = tmp_path / "backend.log"
    result = runner.run_backend(
        "noisy", adapter_spec="noisy_adapter:Noisy", extra_args=["-k", "test_empty_sequence"], log_path=str(log)
    )
    assert _status(result, "SHAPE-EMPTY").status == res.PASS
    assert "NATIVE-CALL-NOISE" in log.read_text() and "NATIVE-CALL-NOISE" not in capfd.readouterr().err


def test_a_suite_bug_is_an_error_not_the_adapters_fail():
    """An exception of the suite's own (here: the golden fixture cannot be read) is ERROR with
    "suite error", exit code 4; the adapter's own exceptions stay FAIL (the kill matrix)."""
    outcomes = [
        res.TestOutcome(
            f"t::{c.id}",
            c.id,
            "error" if c.group == "GOLDEN" else "passed",
            "suite error: FileNotFoundError at data.py:32: GOLDEN fixtures not found",
        )
        for c in spec.CLAUSES
    ]
    result = res.SuiteResult("x", "cpu", spec.SPEC_VERSION, res.aggregate(outcomes), 0.0)
    assert result.failed() == [] and len(result.errors()) == 5 and result.exit_code == res.EXIT_SUITE_ERROR
    from gpt2_conformance.run import report

    assert "5 suite error(s) (not the implementation's)" in report.scorecard(result)
    junit = ET.fromstring(report.to_junit(result))
    assert junit.get("errors") == "5" and junit.get("failures") == "0"


def test_a_pytest_plugin_installed_beside_the_suite_cannot_change_a_verdict(tmp_path, monkeypatch):
    """An autoloaded pytest plugin of the environment (here one that fails every test it sees,
    installed as a distribution with a pytest11 entry point) is not loaded by the verdict children:
    they load runner.CHILD_PLUGINS only, so the verdict is the suite's alone."""
    (tmp_path / "spoil_every_test.py").write_text(
        "def pytest_runtest_call(item):\n    raise AssertionError('spoilt by a plugin of the environment')\n"
    )
    info = tmp_path / "spoil_every_test-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: spoil-every-test\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[pytest11]\nspoil = spoil_every_test\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ["PYTHONPATH"]]))
    spoilt = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--pyargs",
            "gpt2_conformance.suite",
            "-q",
            "-p",
            "no:cacheprovider",
            "--gpt2c-backend",
            "numpy",
            *SUBSET,
        ],
        capture_output=True,
        text=True,
    )
    assert "spoilt by a plugin of the environment" in spoilt.stdout  # the plugin is live in a plain pytest
    result = runner.run_backend("numpy", extra_args=SUBSET)
    assert result.error == ""
    for clause in ("POSITIONS-DECODE", "SHAPE-EMPTY", "TIED-NO-BIAS"):
        assert _status(result, clause).status == res.PASS, _status(result, clause).message


@pytest.mark.parametrize(
    "shards,side_by_side,cores,expected",
    [
        (2, 1, 2, "1"),  # `run --backend numpy` on 2 cores: two shards, one thread each
        (1, 2, 2, "1"),  # `run --backend all --jobs 2`: two backends side by side
        (2, 1, 8, "4"),  # each shard its share of the cores
        (1, 1, 2, None),  # one child alone: the pools keep their own default (every core)
    ],
)
def test_children_running_at_once_share_the_cores_thread_pools(monkeypatch, shards, side_by_side, cores, expected):
    """Each suite child's BLAS/OpenMP pools get cores // (children at once): with every pool
    sized to the whole machine, two shards of the NumPy suite on 2 cores took 14-25 s against
    9-12 s with one thread each. A value the user set wins."""
    envs = []
    monkeypatch.setattr(runner.machine, "cores", lambda: cores)
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.delenv(name, raising=False)

    def popen(cmd, **kwargs):
        envs.append(kwargs["env"])
        raise RuntimeError("recorded: no child started")

    monkeypatch.setattr(runner.subprocess, "Popen", popen)
    with pytest.raises(RuntimeError, match="recorded"):
        runner.run_backend("numpy", shards=shards, side_by_side=side_by_side)
    assert envs and all(env.get("OPENBLAS_NUM_THREADS") == expected == env.get("OMP_NUM_THREADS") for env in envs), [
        (env.get("OPENBLAS_NUM_THREADS"), env.get("OMP_NUM_THREADS")) for env in envs
    ]
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    envs.clear()
    with pytest.raises(RuntimeError, match="recorded"):
        runner.run_backend("numpy", shards=shards, side_by_side=side_by_side)
    assert all(env["OMP_NUM_THREADS"] == "3" for env in envs)


def test_versions_read_installs_made_after_the_kept_distribution_map(tmp_path, monkeypatch):
    """The map of top-level modules to distributions is kept on disk between runs; a package
    installed since (its folder on sys.path changed) is in the next run's versions."""
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    assert "gpt2c_fake_framework" not in runner._versions(["gpt2c_fake_framework"])
    assert "numpy" in runner._versions(["numpy"])  # from the kept map this time
    info = site / "gpt2c_fake_framework-1.2.3.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: gpt2c-fake-framework\nVersion: 1.2.3\n")
    (info / "top_level.txt").write_text("gpt2c_fake_framework\n")
    stat = os.stat(site)
    os.utime(site, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))  # a coarse clock still sees the change
    assert runner._versions(["gpt2c_fake_framework"])["gpt2c-fake-framework"] == "1.2.3"


@pytest.mark.parametrize("body,status", [("assert True", 0), ("assert False", 1)])
def test_a_child_ends_with_pytests_status_once_its_events_are_written(tmp_path, body, status):
    """The child skips interpreter teardown (os._exit after the session, run/events.py): pytest's
    exit status still reaches the parent, every event is in the file, exit handlers (an
    adapter's temporary files) still run, and a module global's __del__ (the teardown skipped)
    does not."""
    (tmp_path / "test_one.py").write_text(
        "import atexit, pathlib\n"
        "HERE = pathlib.Path(__file__).parent\n"
        "atexit.register((HERE / 'exit-handler-ran').write_text, 'ran')\n"
        "class Kept:\n"
        "    def __del__(self, path=str(HERE / 'teardown-ran'), open=open):\n"
        "        open(path, 'w').close()\n"
        "KEPT = Kept()\n"
        f"def test_one():\n    {body}\n"
    )
    events = tmp_path / "events.jsonl"
    child = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:randomly",
            "-p",
            "gpt2_conformance.run.events",
            "--gpt2c-results",
            str(events),
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert child.returncode == status, child.stdout + child.stderr
    assert ("1 passed" if status == 0 else "1 failed") in child.stdout, child.stdout
    assert [json.loads(line)["event"] for line in events.read_text().splitlines()] == ["collected", "start"], (
        events.read_text()
    )  # no clause marker: no result line; no adapter: no session line
    assert (tmp_path / "exit-handler-ran").exists(), "the child skipped its exit handlers"
    assert not (tmp_path / "teardown-ran").exists(), "the child ran its interpreter teardown"


def test_a_child_with_a_usage_error_still_prints_it(tmp_path):
    """pytest prints a usage error after the session: a child that ends early must not lose it."""
    (tmp_path / "test_one.py").write_text("def test_one():\n    pass\n")
    (tmp_path / "conftest.py").write_text(
        "import pytest\n"
        "def pytest_collection_modifyitems(config, items):\n"
        "    raise pytest.UsageError('this suite refuses the arguments')\n"
    )
    events = tmp_path / "events.jsonl"
    child = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:randomly",
            "-p",
            "gpt2_conformance.run.events",
            "--gpt2c-results",
            str(events),
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert child.returncode == 4, child.stdout + child.stderr
    assert "this suite refuses the arguments" in child.stderr, child.stdout + child.stderr


@pytest.mark.parametrize(
    "args, option",
    [
        (["run", "--backend", "numpy", "--report-dir"], "--report-dir"),
        (["bench", "--quick", "--out-dir"], "--out-dir"),
        (["merge", "x.json", "--out-dir"], "--out-dir"),
        (["thirdparty", "--out"], "--out"),
        (["upstream", "--out-dir"], "--out-dir"),
    ],
)
def test_an_output_folder_that_cannot_be_written_is_refused_before_anything_runs(tmp_path, capsys, args, option):
    from gpt2_conformance import cli

    blocker = tmp_path / "a-file"
    blocker.write_text("")
    assert cli.main([*args, str(blocker / "reports")]) == 2
    assert f"{option} {blocker / 'reports'}: {blocker} is a file, not a folder" in capsys.readouterr().err


def test_run_all_with_case_prints_no_parity_table(tmp_path, monkeypatch, capsys):
    """--case runs part of the suite, so no fingerprint is computed: `run --backend all --case`
    died at the end on the missing fingerprints (KeyError: 'cases')."""
    from gpt2_conformance import cli, registry
    from gpt2_conformance.run import command
    from helpers.reports import suite_result

    monkeypatch.setattr(registry, "available", lambda: ["numpy", "torch"])
    monkeypatch.setattr(registry, "missing_framework", lambda name: None)
    monkeypatch.setattr(command, "_judge_named", lambda name, *a, **k: suite_result(name))
    code = cli.main(
        ["run", "--backend", "all", "--case", "test_bounds.py::test_too_long_raises", "--report-dir", str(tmp_path)]
    )
    out = capsys.readouterr().out
    assert code == 0 and "parity: not computed, --case runs part of the suite" in out
    assert "max abs diff" not in out


def test_case_leaves_the_waivers_of_clauses_it_did_not_run_alone(tmp_path):
    """A replay of one test (a report's repro line) once exited 1 on every other waiver of a
    third-party backend: each unselected clause counted as 'waived but did not fail (SKIPPED)'.
    The waiver of the selected clause is still judged: it is stale when that clause passes."""
    waivers = tmp_path / "waivers.toml"
    waivers.write_text(
        '[[waiver]]\nclause = "INIT-WPE"\nreason = "a test waiver"\nlink = "https://example.com/src.py#L1"\n'
    )
    other = _cli(
        "run",
        "--backend",
        "numpy",
        "--waivers",
        str(waivers),
        "--case",
        "test_lookup.py::test_positions_are_table_rows[1023]",
        temp=tmp_path,
    )
    assert other.returncode == 0 and "STALE WAIVER" not in other.stdout, other.stdout + other.stderr
    same = _cli(
        "run",
        "--backend",
        "numpy",
        "--waivers",
        str(waivers),
        "--case",
        "test_init.py::test_wpe_init[768]",
        temp=tmp_path,
    )
    assert same.returncode == 1 and "STALE WAIVER: INIT-WPE is waived" in same.stdout, same.stdout + same.stderr


def test_run_all_with_unknown_brackets_is_one_usage_error(tmp_path, monkeypatch, capsys):
    """The first backend's child refuses brackets that name no test; the others never start (they
    once printed the same error in every scorecard, exit 1)."""
    from gpt2_conformance import cli, registry

    monkeypatch.setattr(registry, "available", lambda: ["numpy", "torch"])
    monkeypatch.setattr(registry, "missing_framework", lambda name: None)
    code = cli.main(
        [
            "run",
            "--backend",
            "all",
            "--case",
            "test_lookup.py::test_positions_are_table_rows[1022]",
            "--report-dir",
            str(tmp_path),
        ]
    )
    out, err = capsys.readouterr()
    assert code == 2 and "names no test of the suite; did you mean" in err, err
    assert "torch" not in out and list(tmp_path.iterdir()) == []


def test_run_all_with_brackets_judges_each_backend_once(tmp_path, monkeypatch, capsys):
    from gpt2_conformance import cli, registry
    from gpt2_conformance.run import command
    from helpers.reports import suite_result

    judged = []

    def judge(name, args, log_dir, side_by_side=1, shown=None):
        judged.append(name)
        return suite_result(name)

    monkeypatch.setattr(registry, "available", lambda: ["numpy", "torch", "jax"])
    monkeypatch.setattr(registry, "missing_framework", lambda name: None)
    monkeypatch.setattr(command, "_judge_named", judge)
    code = cli.main(
        [
            "run",
            "--backend",
            "all",
            "--case",
            "test_lookup.py::test_positions_are_table_rows[1023]",
            "--report-dir",
            str(tmp_path),
        ]
    )
    out = capsys.readouterr().out
    assert code == 0 and judged[0] == "numpy" and sorted(judged) == ["jax", "numpy", "torch"]
    cards = [
        line.split("backend ")[1].split()[0] for line in out.splitlines() if line.startswith("gpt2-conformance spec")
    ]
    assert cards == ["numpy", "torch", "jax"], "scorecards in the registry's order"


def test_run_all_with_no_fingerprint_says_so_in_one_line(tmp_path, monkeypatch, capsys):
    """`run --backend all --device gpu` where there is no GPU: nothing was checked, so no backend
    has a fingerprint; one line says so (it was a table of 'failed: not computed' cells)."""
    from gpt2_conformance import cli, registry
    from gpt2_conformance.run import command
    from helpers.reports import suite_result

    nothing = {c.id: res.NOT_CLAIMED for c in spec.CLAUSES}
    monkeypatch.setattr(registry, "available", lambda: ["numpy", "torch"])
    monkeypatch.setattr(registry, "missing_framework", lambda name: None)
    monkeypatch.setattr(
        command,
        "_judge_named",
        lambda name, args, log_dir, side_by_side=1, shown=None: suite_result(
            name, statuses=nothing, fp={"error": "not computed: nothing was checked in this run"}
        ),
    )
    code = cli.main(["run", "--backend", "all", "--report-dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 3
    assert "\nparity: not computed for any backend (nothing was checked in this run)\n" in out
    assert "max abs diff" not in out


def test_version_names_the_package_and_the_spec(capsys):
    """What a bug report or a CI log needs: which release judged, against which spec version."""
    from importlib import metadata

    from gpt2_conformance import cli

    with pytest.raises(SystemExit) as exit_:
        cli.main(["--version"])
    assert exit_.value.code == 0
    assert (
        capsys.readouterr().out
        == f"gpt2-conformance {metadata.version('gpt2-conformance')} (spec {spec.SPEC_VERSION})\n"
    )


def test_a_reader_that_leaves_early_is_no_traceback():
    """`gpt2-conformance list --long | head -1`: the reader is gone before the writer is done. Here
    it is gone before the first write (a pipe with its reading end closed), so every write breaks."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        out = subprocess.run(
            [sys.executable, "-m", "gpt2_conformance.cli", "list", "--long"],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
        )
    finally:
        os.close(write_end)
    assert out.returncode == 1 and out.stderr == "", out.stderr


@pytest.mark.parametrize("backend", ["all", "one"])
def test_ctrl_c_ends_the_run_and_its_children_at_once(tmp_path, backend):
    """SIGINT to the CLI alone (a terminal's Ctrl-C reaches the children as well): exit 130 with
    one line, no child left. `run --backend all` once went on for minutes, starting child after
    child for the backends left, and a Ctrl-C ended in a KeyboardInterrupt traceback."""
    import signal
    import time

    target = (
        ["--backend", "all", "--jobs", "2", "--no-build-envs"]
        if backend == "all"
        else ["--adapter", "helpers.bad_adapters:HangsInPython", "--timeout", "600"]
    )
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(filter(None, [TESTS_DIR, os.environ.get("PYTHONPATH")])),
        **machine.child_temp_env(str(tmp_path)),
    )
    # started as a shell starts a foreground command: SIGINT at its default, whatever this
    # worker process inherited or set (an ignored SIGINT is inherited across exec, and a Python
    # started with it ignored never raises KeyboardInterrupt)
    cli_ = subprocess.Popen(
        [sys.executable, "-m", "gpt2_conformance.cli", "run", *target],
        env=env,
        text=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )

    def children():  # suite children: their events files are in this test's temporary folder
        found = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    cmdline = f.read().decode(errors="replace")
            except OSError:
                continue
            if "gpt2c-results" in cmdline and str(tmp_path) in cmdline:
                found.append(pid)
        return found

    deadline = time.monotonic() + 120
    while not children() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert children(), "no suite child started"
    time.sleep(1.0)
    start = time.monotonic()
    cli_.send_signal(signal.SIGINT)
    try:
        err = cli_.communicate(timeout=60)[1]
    except subprocess.TimeoutExpired:
        with open(f"/proc/{cli_.pid}/status") as f:
            ignored = next((line.split()[1] for line in f if line.startswith("SigIgn:")), "?")
        cli_.kill()
        cli_.communicate()
        pytest.fail(f"the CLI did not end within 60 s of SIGINT (its ignored-signals mask: {ignored})")
    assert cli_.returncode == 130 and err.strip().endswith("gpt2-conformance run: interrupted"), err
    assert "Traceback" not in err, err
    assert time.monotonic() - start < 15
    time.sleep(0.5)
    assert not children()
