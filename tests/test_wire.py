"""The wire protocol (gpt2_conformance/wire): a program in any language judged by `run --exec`.

Fast tier: the schema and its validator; every request the suite sends and every response of the
C client, call by call, against the schema; processes that break the protocol (each breach one
line naming the call and what came instead, costing its clause while the run goes on in a new
process); bad commands (one usage line on both routes); the pytest route, a replay, waivers, a
thorough seed. Slow tier: whole runs of the three reference clients (every claimed clause passes,
as the numpy reference's does) and of the numpy reference served over the protocol (the same
verdicts, observations and h digests as in-process), and the C mutants, each failing exactly the
clauses recorded for it (tests/helpers/wire_mutants.py; reports/wire.md).

The clients are built into temporary folders with the languages' own tools; a test whose tool is
missing is skipped with the line that says so (CI has cc, rustc and node)."""

from __future__ import annotations

import glob
import json
import os
import shlex
import subprocess
import sys

import numpy as np
import pytest

from gpt2_conformance.api.adapter import AdapterConfig
from gpt2_conformance.runtime.tables import random_tables
from gpt2_conformance.wire import build, process, protocol, schema
from helpers import wire_misbehaving, wire_mutants

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
MISBEHAVING = [sys.executable, os.path.join(TESTS_DIR, "helpers", "wire_misbehaving.py")]


def _cli(*args: str, timeout: float = 600, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gpt2_conformance.cli", *args], capture_output=True, text=True, timeout=timeout, env=env
    )


def _report(folder) -> dict:
    (path,) = glob.glob(os.path.join(str(folder), "*.json"))
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _statuses(report: dict) -> dict[str, str]:
    return {c["id"]: c["status"] for c in report["clauses"]}


def _lines(out: subprocess.CompletedProcess) -> dict[str, str]:
    """clause id -> its scorecard line."""
    return {
        ln.split()[0]: ln.strip() for ln in out.stdout.splitlines() if ln.startswith("  ") and ln.split()[0].isupper()
    }


def _client(language: str, folder) -> list[str]:
    missing = build.missing_tool(language)
    if missing:
        pytest.skip(missing)
    return build.build(language, str(folder))


@pytest.fixture(scope="session")
def c_client(tmp_path_factory) -> list[str]:
    return _client("c", tmp_path_factory.mktemp("c-client"))


# -- the schema -----------------------------------------------------------------------------


def test_schema_uses_only_what_its_validator_knows_and_every_call_has_both_messages():
    document = schema.document()  # refuses a keyword the validator does not know
    defs = document["$defs"]
    assert set(defs["requests"]) == set(protocol.REQUEST_ARRAYS) == set(defs["responses"])
    for call, names in protocol.RESPONSE_ARRAYS.items():  # the schema names the arrays the code reads
        response = defs["responses"][call]
        prefix = response.get("properties", {}).get("arrays", {}).get("prefixItems", [])
        assert [p["allOf"][1]["properties"]["name"]["const"] for p in prefix] == list(names), call


@pytest.mark.parametrize(
    "document,path,words",
    [
        ({"ok": True}, "#/$defs/responses/embed", "response: field 'arrays' is missing"),
        (
            {
                "ok": True,
                "arrays": [{"name": "h", "dtype": "float32", "shape": [2, "3"], "byteorder": "little", "nbytes": 4}],
            },
            "#/$defs/responses/embed",
            "response.arrays[0].shape[1]: '3' is string, but should be integer",
        ),
        (
            {
                "ok": True,
                "arrays": [{"name": "x", "dtype": "float32", "shape": [1], "byteorder": "little", "nbytes": 4}],
            },
            "#/$defs/responses/embed",
            "response.arrays[0].name: 'x', but should be 'h'",
        ),
        (
            {
                "ok": True,
                "arrays": [{"name": "h", "dtype": "float128", "shape": [1], "byteorder": "little", "nbytes": 4}],
            },
            "#/$defs/responses/embed",
            "response.arrays[0].dtype: 'float128' is not one of",
        ),
        ({"ok": True, "extra": 1}, "#/$defs/responses/load_tables", "field 'extra' is not part of the protocol here"),
        ({"ok": False, "error": {"kind": "Index Error", "message": ""}}, "#/$defs/error", "does not match"),
        ({"ok": True, "parameters": {"wte": [-1, 768]}}, "#/$defs/responses/parameters", "is less than the minimum 0"),
    ],
)
def test_a_response_that_breaks_the_schema_is_one_line_naming_the_field(document, path, words):
    with pytest.raises(schema.SchemaViolation) as raised:
        schema.validate(document, path)
    assert words in str(raised.value) and "\n" not in str(raised.value)


def test_every_request_and_response_with_the_c_client_follows_the_schema(c_client, monkeypatch):
    """Each call of the protocol once (and refusals), the suite's requests checked as they are made;
    the responses are checked by ProcessAdapter itself on every call."""
    seen, original = [], protocol.request

    def checked(call, fields, arrays):
        header = original(call, fields, arrays)
        schema.validate(header, f"#/$defs/requests/{call}", where="request")
        seen.append(call)
        return header

    monkeypatch.setattr(protocol, "request", checked)
    adapter = process.adapter_class(c_client)(AdapterConfig())
    wte, wpe = random_tables(768)
    adapter.load_tables(wte, wpe)
    ids = np.array([[3, 50256, 0]], np.int32)
    assert np.array_equal(adapter.embed(ids, 5), wte[ids] + wpe[5:8][None])
    assert np.array_equal(adapter.embed(ids), wte[ids] + wpe[:3][None])
    for bad, kind in ((np.array([[50257]]), IndexError), (np.zeros((1, 2), np.float32), TypeError)):
        with pytest.raises(kind):
            adapter.embed(bad, 0)
    with pytest.raises(TypeError, match="past_length=2.0 \\(float\\)"):
        adapter.embed(ids, 2.0)
    h = np.random.default_rng(0).standard_normal((1, 2, 768), dtype=np.float32)
    np.testing.assert_allclose(adapter.logits(h), h @ wte.T, rtol=1e-5, atol=1e-5)
    assert adapter.parameters() == {"wte": (50257, 768), "wpe": (1024, 768)}
    adapter.assign_wte_row(7, np.ones(768, np.float32))
    assert np.array_equal(adapter.tables()[0][7], np.ones(768, np.float32))
    grads = adapter.gradients(ids, 0, np.ones((1, 3, 768), np.float32), np.zeros((1, 3, 50257), np.float32))
    assert grads[1][:3].sum() == 3 * 768
    adapter.init_tables(1)
    assert set(seen) == set(protocol.REQUEST_ARRAYS)


# -- a process that breaks the protocol costs the clause it happened in -------------------------

EMBED_CASES = ("test_shape.py::test_h_shape[past_length 0]", "test_shape.py::test_logits_shape[2-5]")
HELLO_CASES = ("test_shape.py::test_table_shapes[355M]", "test_shape.py::test_parameter_count")
BREACHES = {
    # mode: (the clause it breaks, the words of its line); the other case's clause passes
    "garbage": ("SHAPE-H", "embed: the response header is not JSON: 'h = [[0.1"),
    "bad-header": ("SHAPE-H", "embed: response.arrays[0].shape: '1x1x768' is string, but should be array"),
    "truncated-header": ("SHAPE-H", "embed: the response header ends after 60 bytes"),
    "short-payload": (
        "SHAPE-H",
        "embed: array 'h' is short: 1536 of its 3072 bytes, then the process exited with code 0",
    ),
    "wrong-dtype": (
        "SHAPE-H",
        "embed: array 'h' announces float64[1, 1, 768], which is 6144 bytes, but its nbytes is 3072",
    ),
    "wrong-shape": (
        "SHAPE-H",
        "embed: array 'h' announces float32[1, 1, 769], which is 3076 bytes, but its nbytes is 3072",
    ),
    "noise-before-hello": ("SHAPE-TABLES", "hello: the response header is not JSON: 'loading weights... done'"),
    "exit": ("SHAPE-H", "embed: no response: the process exited with code 3"),
    "hang": ("SHAPE-H", "embed: no response within 3 s"),
    "crash": ("SHAPE-H", "embed: no response: the process was killed by signal SIGSEGV"),
    "unknown-error": ("SHAPE-H", "embed: response.error.kind: 'Boom' is not"),
    "trailing-bytes": ("SHAPE-H", "embed: 13 byte(s) follow the response that no header announced: 'and some more'"),
}
assert set(BREACHES) == set(wire_misbehaving.MODES)


@pytest.mark.parametrize(
    "mode", [pytest.param(m, marks=[] if m in ("garbage", "crash") else [pytest.mark.slow]) for m in BREACHES]
)
def test_a_breach_is_one_line_and_the_run_goes_on(mode):
    clause, words = BREACHES[mode]
    first, second = HELLO_CASES if mode == "noise-before-hello" else EMBED_CASES
    command = shlex.join([*MISBEHAVING, mode])
    out = _cli("run", "--exec", command, "--timeout", "6", "--jobs", "1", "--case", first, "--case", second)
    lines = _lines(out)
    assert out.returncode == 1, out.stdout + out.stderr
    assert lines[clause].split()[1] == "FAIL" and words in lines[clause], lines[clause]
    assert "adapter raised ProtocolBreach" in lines[clause]
    other = "SHAPE-PARAMS" if mode == "noise-before-hello" else "SHAPE-LOGITS"
    assert lines[other].split()[1] == "PASS", lines[other]  # a new process, given the tables again
    assert "Traceback" not in out.stdout + out.stderr and "ERROR" not in out.stdout


# -- the command line ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command,words",
    [
        ("/nonexistent/gpt2_wire", "--exec '/nonexistent/gpt2_wire': cannot start '/nonexistent/gpt2_wire'"),
        ("echo hello", "--exec 'echo hello': hello: "),
        ("'unbalanced", "No closing quotation"),
    ],
)
def test_a_command_that_cannot_be_judged_is_one_usage_line_on_both_routes(command, words):
    out = _cli("run", "--exec", command)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and words in out.stderr, out.stderr
    if command.startswith("echo"):  # it never reads its stdin: its line comes as a header or as what it wrote
        assert "'hello" in out.stderr, out.stderr
    pytest_route = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "--pyargs",
            "gpt2_conformance.suite",
            "--gpt2c-exec",
            command,
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert pytest_route.returncode == 4 and "Traceback" not in pytest_route.stdout + pytest_route.stderr
    assert words.replace("--exec", "--gpt2c-exec") in pytest_route.stderr


def test_the_pytest_route_runs_a_command(c_client):
    case = "test_bounds.py::test_error_names_value_and_rule[position cached]"
    base = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--pyargs", "gpt2_conformance.suite", "-q"]
    out = subprocess.run(
        [*base, "--gpt2c-exec", shlex.join(c_client), "--gpt2c-case", case], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0 and "1 passed" in out.stdout, out.stdout[-2000:]
    both = subprocess.run(
        [*base, "--gpt2c-exec", shlex.join(c_client), "--gpt2c-adapter", "x:y"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert both.returncode == 4 and "leave out --gpt2c-adapter" in both.stderr


def test_a_failure_replays_from_its_repro_line(tmp_path):
    """The report's repro line names --exec and the --timeout its deadline came from; it replays the FAIL."""
    if build.missing_tool("c"):
        pytest.skip(build.missing_tool("c") or "")
    mutant = wire_mutants.build_mutant("OutputBias", str(tmp_path / "bias"))
    case = "test_tied.py::test_no_output_bias"
    out = _cli("run", "--exec", shlex.join(mutant), "--case", case, "--report-dir", str(tmp_path / "first"))
    assert out.returncode == 1
    (failed,) = [t for c in _report(tmp_path / "first")["clauses"] for t in c["tests"] if t["outcome"] == "failed"]
    repro = shlex.split(failed["repro"])
    assert repro[:4] == ["gpt2-conformance", "run", "--exec", shlex.join(mutant)] and "--timeout" in repro
    again = _cli(*repro[1:], "--report-dir", str(tmp_path / "again"))
    (replayed,) = [t for c in _report(tmp_path / "again")["clauses"] for t in c["tests"] if t["outcome"] == "failed"]
    assert again.returncode == 1 and replayed["message"] == failed["message"]


@pytest.mark.parametrize("named_by", ["--waivers", "the hello"])
def test_waivers_apply_to_a_process(tmp_path, named_by):
    waivers = tmp_path / "waivers.toml"
    waivers.write_text(
        '[[waiver]]\nclause = "TIED-NO-BIAS"\nreason = "a bias on purpose"\nlink = "https://example.org/1"\n'
    )
    serve = [sys.executable, "-m", "gpt2_conformance.wire.serve", "helpers.mutants:OutputBias"]
    options = ["--waivers", str(waivers)]
    command = serve + (options if named_by == "the hello" else [])
    args = ["run", "--exec", shlex.join(command), "--case", "test_tied.py::test_no_output_bias"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([TESTS_DIR, os.environ.get("PYTHONPATH", "")])}
    out = _cli(*args, *(options if named_by == "--waivers" else []), env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "DEVIATION (WAIVED)" in _lines(out)["TIED-NO-BIAS"]


def test_thorough_draws_replay_by_their_seed_over_the_wire(c_client, tmp_path):
    out = _cli(
        "run", "--exec", shlex.join(c_client), "--thorough", "--seed", "7", "--case", "test_lookup.py::test_exact_sum",
        "--report-dir", str(tmp_path),
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    assert _report(tmp_path)["environment"]["draws"]["seed"] == 7


@pytest.mark.slow
def test_bench_times_a_command(c_client, tmp_path):
    out = _cli(
        "bench", "--exec", shlex.join(c_client), "--quick", "--workload", "step_decode", "--rounds", "3",
        "--processes", "1", "--out-dir", str(tmp_path),
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    with open(tmp_path / "bench.json", encoding="utf-8") as f:
        (row,) = json.load(f)["ranking"]["step_decode B1-T1-d768-past512"]
    assert row["label"] == "exec gpt2-wire-c" and row["median_s"] > 0


def test_the_mutants_patches_apply_once_each():
    for name in wire_mutants.MUTANTS:
        assert wire_mutants.source(name) != open(build.source("c"), encoding="utf-8").read()


# -- whole runs (slow) ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def numpy_report(tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("numpy-report")
    out = _cli("run", "--backend", "numpy", "--report-dir", str(folder))
    assert out.returncode == 0, out.stdout + out.stderr
    return _report(folder)


def _observed(report: dict) -> dict[str, str]:
    return {t["nodeid"]: t["observed"] for c in report["clauses"] for t in c["tests"] if "observed" in t}


@pytest.mark.slow
def test_the_numpy_reference_over_the_wire_gets_its_in_process_verdict(numpy_report, tmp_path):
    """The wire loses nothing: the same statuses, the same out-of-range observations, the same h."""
    command = shlex.join([sys.executable, "-m", "gpt2_conformance.wire.serve", "numpy"])
    out = _cli("run", "--exec", command, "--report-dir", str(tmp_path))
    assert out.returncode == 0, out.stdout + out.stderr
    report = _report(tmp_path)
    assert _statuses(report) == _statuses(numpy_report)
    assert _observed(report) == _observed(numpy_report)
    for case in ("h_prefill", "h_decode"):
        assert report["parity"]["cases"][case]["sha256"] == numpy_report["parity"]["cases"][case]["sha256"]


@pytest.mark.slow
@pytest.mark.parametrize("language", sorted(build.SOURCES))
def test_a_reference_client_passes_every_clause_it_claims(language, numpy_report, tmp_path):
    client = _client(language, tmp_path / "client")
    out = _cli("run", "--exec", shlex.join(client), "--report-dir", str(tmp_path / "report"))
    report = _report(tmp_path / "report")
    statuses = _statuses(report)
    claimed = {c: s for c, s in statuses.items() if s != "NOT CLAIMED"}
    assert out.returncode == 0 and set(claimed.values()) == {"PASS"}, out.stdout
    assert claimed == {c: _statuses(numpy_report)[c] for c in claimed}  # the numpy reference's verdict
    assert set(statuses) - set(claimed) == {"DTYPE-FLOAT16", "DTYPE-BFLOAT16"}  # float32 only, honestly
    for case in ("h_prefill", "h_decode"):  # h is exact: bit for bit the reference's
        assert report["parity"]["cases"][case]["sha256"] == numpy_report["parity"]["cases"][case]["sha256"]
    merged = _cli("merge", *glob.glob(str(tmp_path / "report" / "*.json")), "--out-dir", str(tmp_path / "merged"))
    assert merged.returncode == 0, merged.stdout + merged.stderr


@pytest.mark.slow
@pytest.mark.parametrize("name", list(wire_mutants.MUTANTS))
def test_a_c_mutant_fails_exactly_its_clauses(name, tmp_path):
    if build.missing_tool("c"):
        pytest.skip(build.missing_tool("c") or "")
    mutant = wire_mutants.build_mutant(name, str(tmp_path / name))
    out = _cli("run", "--exec", shlex.join(mutant), "--no-shrink", "--report-dir", str(tmp_path / "report"))
    report = _report(tmp_path / "report")
    failed = {c for c, s in _statuses(report).items() if s == "FAIL"}
    assert out.returncode == 1 and failed == wire_mutants.MUTANTS[name].expected, _lines(out)
    assert "Traceback" not in out.stdout + out.stderr and not any(s == "ERROR" for s in _statuses(report).values())
