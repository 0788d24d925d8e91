"""The pytest plugin (entry point `pytest11: gpt2_conformance`).

    pytest --pyargs conformance.suite --backend numpy
    pytest --pyargs conformance.suite --adapter mypkg.gpt2:make_adapter --device gpu

It resolves the adapter, provides the suite's fixtures, skips clauses whose requirements the
adapter does not claim ("not claimed: ..."), and attaches to each test report its clause ID
and a one-line message. With --gpt2c-results FILE it appends one JSON line per test event, which
the CLI's runner reads (so a crash or hang in a backend still leaves every finished result).
The plugin does nothing to test runs that do not collect the suite.
"""

from __future__ import annotations

import json
import os
import re
import traceback

import numpy as np
import pytest

from conformance import gpt2, spec
from conformance.adapter import AdapterConfig, capabilities_of
from conformance.guard import GuardedFactory, SuiteError, raised_by_adapter
from conformance.results import NOT_CLAIMED_PREFIX, SUITE_ERROR_PREFIX, UNAVAILABLE_PREFIX

TABLE_SEED = 20190214  # GPT-2's release date; any fixed seed works, fixed makes runs repeatable


class InjectedFactory:
    """Register with pytest.main(plugins=[...]) to run the suite on an object, not a name."""

    def __init__(self, factory, label: str):
        self.factory, self.label = factory, label


def pytest_addoption(parser):
    group = parser.getgroup("gpt2-conformance")
    group.addoption("--backend", help="built-in or installed backend name (gpt2-conformance list)")
    group.addoption("--adapter", help="adapter factory as package.module:factory")
    group.addoption("--device", default="cpu", choices=("cpu", "gpu"), help="device to run on (default cpu)")
    group.addoption("--gpt2c-results", help="append one JSON line per test event to this file (used by the CLI)")
    group.addoption("--checkpoint", help="GOLDEN clauses: load wte/wpe from this GPT-2 checkpoint "
                    "(.safetensors, torch .bin, TF model.ckpt, .npz) instead of the shipped real data")


def pytest_configure(config):
    config.addinivalue_line("markers", "clause(id): the spec clause (conformance/spec.py) this test checks")
    config._gpt2c_factory = config._gpt2c_label = None
    injected = next((p for p in config.pluginmanager.get_plugins() if isinstance(p, InjectedFactory)), None)
    if injected is not None:
        config._gpt2c_factory, config._gpt2c_label = injected.factory, injected.label
        return
    name = config.getoption("--adapter") or config.getoption("--backend")
    if name:
        from conformance import registry

        try:
            config._gpt2c_factory, config._gpt2c_label = registry.resolve(name), name
            capabilities_of(config._gpt2c_factory)
        except (ImportError, LookupError, ValueError, TypeError) as exc:
            raise pytest.UsageError(f"gpt2-conformance: {exc}") from exc


def pytest_collection_modifyitems(config, items):
    suite_items = [i for i in items if i.get_closest_marker("clause")]
    for item in suite_items:
        spec.clause(item.get_closest_marker("clause").args[0])  # unknown IDs fail loudly
    if suite_items and config._gpt2c_factory is None:
        raise pytest.UsageError("gpt2-conformance: pass --backend NAME or --adapter package.module:factory")


def skip_unless_claimed(capabilities, requirement: str) -> None:
    if not capabilities.claims(requirement):
        pytest.skip(f"{NOT_CLAIMED_PREFIX}{requirement}")


def pytest_runtest_setup(item):
    marker = item.get_closest_marker("clause")
    if marker is None:
        return
    factory = item.config._gpt2c_factory
    caps = capabilities_of(factory)
    device = item.config.getoption("--device")
    skip_unless_claimed(caps, f"device:{device}")
    available, why = factory.device_available(device) if hasattr(factory, "device_available") else (device == "cpu", "")
    if not available:
        pytest.skip(f"{UNAVAILABLE_PREFIX}{why or device}")
    for requirement in spec.clause(marker.args[0]).requires:
        skip_unless_claimed(caps, requirement)


_ANSI = re.compile(r"\x1b\[[0-9;]*m")  # Keras colours its error messages
_FRAMEWORK_NOISE = ("Traceback", "File \"", "Stack trace", "Exception encountered when calling")


def _first_line(exc: BaseException) -> str:
    """The exception's first meaningful line: frameworks put multi-kilobyte stack traces in
    their messages (TensorFlow), which belong in the log, not in a one-line verdict."""
    lines = [ln.strip() for ln in _ANSI.sub("", str(exc)).splitlines() if ln.strip()]
    if lines and lines[0].startswith("Exception encountered when calling"):  # Keras: the layer, then the cause
        return " ".join(lines[:2])[:500]
    meaningful = [ln for ln in lines if not ln.startswith(_FRAMEWORK_NOISE)]
    return (meaningful or lines or [""])[0][:500]


def _where(exc: BaseException) -> str:
    frame = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
    return f" at {os.path.basename(frame.filename)}:{frame.lineno}" if frame else ""


def _is_verdict(exc: BaseException) -> bool:
    """An assertion of the suite (or pytest.fail, a pytest-timeout, hypothesis finding the
    implementation flaky): the implementation's result, judged."""
    import hypothesis.errors

    return (isinstance(exc, (AssertionError, hypothesis.errors.Flaky)) or type(exc).__name__ == "Failed")


def classify(excinfo) -> tuple[str, str]:
    """("failed" | "error", one-line message) for a test's exception: "failed" when the
    implementation is judged (an assertion, or an exception the adapter raised), "error" when
    the suite itself failed (its data, its code, a call it should not have made)."""
    exc = excinfo.value
    if isinstance(exc, BaseExceptionGroup) and exc.exceptions:  # hypothesis: several distinct failures
        exc = exc.exceptions[0]
    if not isinstance(exc, SuiteError):
        method = raised_by_adapter(exc)
        if method:
            return "failed", f"adapter raised {type(exc).__name__}{_where(exc)}: {_first_line(exc)}"
        if _is_verdict(exc):
            return "failed", _first_line(exc)
    return "error", f"{SUITE_ERROR_PREFIX}{type(exc).__name__}{_where(exc)}: {_first_line(exc)} (the suite's own " \
                    "failure, not the implementation's)"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    marker = item.get_closest_marker("clause")
    if marker is None:
        return
    report.user_properties.append(("gpt2c_clause", marker.args[0]))
    if call.excinfo is not None and report.outcome != "passed":
        if report.skipped:
            message = str(call.excinfo.value.msg if hasattr(call.excinfo.value, "msg") else call.excinfo.value)
        else:
            kind, message = classify(call.excinfo)
            if call.when != "call":
                message = f"{call.when} failed: {message}"
            report.user_properties.append(("gpt2c_outcome", kind))
        report.user_properties.append(("gpt2c_message", message))


def outcome_of(report) -> str:
    """passed / failed / skipped / error ("error": the suite's own failure, see classify)."""
    return dict(report.user_properties).get("gpt2c_outcome", report.outcome)


class _ResultsFile:
    """Appends JSON lines: {"event": "start", nodeid} then {"event": "result", ...}."""

    def __init__(self, path: str):
        self.path = path
        self._pending: dict[str, dict] = {}

    def _write(self, record: dict) -> None:
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def pytest_runtest_logstart(self, nodeid, location):
        self._write({"event": "start", "nodeid": nodeid})

    def pytest_runtest_logreport(self, report):
        props = dict(report.user_properties)
        if "gpt2c_clause" not in props:
            return
        rec = self._pending.setdefault(report.nodeid, {"event": "result", "nodeid": report.nodeid,
                                                       "clause": props["gpt2c_clause"], "outcome": "passed",
                                                       "message": "", "duration": 0.0})
        rec["duration"] += report.duration
        if report.outcome != "passed" and rec["outcome"] == "passed":
            rec["outcome"], rec["message"] = outcome_of(report), props.get("gpt2c_message", "")
        if report.when == "teardown":
            self._write(self._pending.pop(report.nodeid))


def pytest_sessionstart(session):
    path = session.config.getoption("--gpt2c-results")
    if path:
        session.config.pluginmanager.register(_ResultsFile(path), "gpt2c-results-file")


# -- fixtures ---------------------------------------------------------------------------

@pytest.fixture(scope="session")
def adapter_factory(request):
    """The adapter's factory behind the guard (conformance/guard.py): it refuses calls outside
    the claims and marks the adapter's own exceptions."""
    factory = request.config._gpt2c_factory
    return GuardedFactory(factory, capabilities_of(factory))


@pytest.fixture(scope="session")
def capabilities(adapter_factory):
    return capabilities_of(adapter_factory)


@pytest.fixture(scope="session")
def device(request):
    return request.config.getoption("--device")


def random_tables(n_embd: int, seed: int = TABLE_SEED) -> tuple[np.ndarray, np.ndarray]:
    """float32 tables drawn like GPT-2's init (their values matter for rounding, not stats)."""
    rng = np.random.default_rng(seed)
    wte = rng.standard_normal((gpt2.N_VOCAB, n_embd), dtype=np.float32) * np.float32(gpt2.WTE_INIT_STD)
    wpe = rng.standard_normal((gpt2.N_CTX, n_embd), dtype=np.float32) * np.float32(gpt2.WPE_INIT_STD)
    wte.flags.writeable = wpe.flags.writeable = False  # tests copy before changing them
    return wte, wpe


@pytest.fixture(scope="session")
def tables():
    """The suite's (wte, wpe) at d = 768, read-only."""
    return random_tables(gpt2.N_EMBD_SMALL)


def skip_unless_buildable(capabilities, n_embd: int, dtype: str) -> None:
    """An adapter of this size and dtype is claimed (the device is checked at setup)."""
    skip_unless_claimed(capabilities, f"size:{n_embd}")
    skip_unless_claimed(capabilities, f"dtype:{dtype}")


@pytest.fixture(scope="session")
def adapter(adapter_factory, capabilities, device, tables):
    """One float32, d = 768 adapter loaded with the suite's tables, shared by every test that
    only reads it (loading 154 MB per test would dominate the run). Tests that change tables
    or need another dtype or size use make_adapter."""
    skip_unless_buildable(capabilities, gpt2.N_EMBD_SMALL, "float32")
    instance = adapter_factory(AdapterConfig(n_embd=gpt2.N_EMBD_SMALL, dtype="float32", device=device))
    instance.load_tables(*tables)
    return instance


@pytest.fixture
def make_adapter(adapter_factory, capabilities, device, tables):
    """make_adapter(n_embd=768, dtype="float32", load=True) -> a fresh adapter; load=True
    loads the suite's tables (d = 768 only). Skips as not claimed when the size or dtype is not."""

    def make(n_embd: int = gpt2.N_EMBD_SMALL, dtype: str = "float32", load: bool = True):
        skip_unless_buildable(capabilities, n_embd, dtype)
        adapter = adapter_factory(AdapterConfig(n_embd=n_embd, dtype=dtype, device=device))
        if load:
            adapter.load_tables(*tables)
        return adapter

    return make


# -- GOLDEN: the golden tables (conformance/golden; --checkpoint) ---------------------------

def pytest_report_header(config):
    if config.getoption("--backend") or config.getoption("--adapter") or config._gpt2c_factory:
        from conformance.golden import data

        return f"gpt2-conformance golden data: {data.describe(config.getoption('--checkpoint'))}"
    return None


@pytest.fixture(scope="session")
def golden_tables(request):
    """data.GoldenTables for the GOLDEN clauses: the --checkpoint's wte and wpe, or the shipped
    real wpe and a wte holding every known real value (the rest: the suite's seeded wte)."""
    from conformance.golden import data, readers

    path = request.config.getoption("--checkpoint")
    if not path:
        try:
            return data.shipped_tables(request.getfixturevalue("tables")[0])
        except (OSError, ValueError) as exc:  # missing or corrupted fixtures: the suite's data, not the adapter
            raise SuiteError(f"the shipped golden data could not be read: {exc}") from None
    try:
        return data.checkpoint_tables(path)
    except readers.CheckpointError as exc:
        raise SuiteError(f"--checkpoint: {exc}") from None
