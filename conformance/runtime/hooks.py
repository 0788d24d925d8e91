"""The suite's pytest hooks: resolve the adapter, skip what it does not claim ("not claimed:
..."), and attach to each test report its clause ID, its outcome (verdicts.classify) and a
one-line message. Loaded with the fixtures by conformance/suite/conftest.py only when pytest
collects the suite; the options are conformance/pytest_plugin.py's.

    pytest --pyargs gpt2_conformance.suite --gpt2c-backend numpy
    pytest --pyargs gpt2_conformance.suite --gpt2c-adapter mypkg.gpt2:make_adapter --gpt2c-device gpu
"""

from __future__ import annotations

import difflib

import pytest

from gpt2_conformance import spec
from gpt2_conformance.api.adapter import capabilities_of
from gpt2_conformance.results import NOT_CLAIMED_PREFIX, UNAVAILABLE_PREFIX, UNKNOWN_CASE_PREFIX
from gpt2_conformance.runtime.verdicts import blamed_on_answer, classify, first_line


class InjectedFactory:
    """Register with pytest.main(plugins=[...]) to run the suite on an object, not a name."""

    def __init__(self, factory, label: str):
        self.factory, self.label = factory, label


def pytest_configure(config):
    config.addinivalue_line("markers", "clause(id): the spec clause (conformance/spec.py) this test checks")
    _set_draw_mode(config)
    config._gpt2c_factory = config._gpt2c_label = None
    config._gpt2c_waivers, config._gpt2c_waived_failed, config._gpt2c_clauses_run = {}, set(), set()
    injected = next((p for p in config.pluginmanager.get_plugins() if isinstance(p, InjectedFactory)), None)
    if injected is not None:
        config._gpt2c_factory, config._gpt2c_label = injected.factory, injected.label
        return
    checked = getattr(config, "_gpt2c_checked", None)  # the pytest route: pytest_plugin.py read them
    if checked is not None:
        config._gpt2c_factory, config._gpt2c_label, waiver_list = checked
        config._gpt2c_waivers = {w.clause: w for w in waiver_list}
        return
    name = config.getoption("--gpt2c-adapter") or config.getoption("--gpt2c-backend")
    if name:  # a child of `run`, which checked the name and applies the waivers itself
        from gpt2_conformance.runtime import inputs

        try:
            config._gpt2c_factory, config._gpt2c_label = inputs.adapter(name), name
        except inputs.InputError as exc:
            raise pytest.UsageError(f"gpt2-conformance: {exc}") from None


def _set_draw_mode(config) -> None:
    """--gpt2c-thorough [--gpt2c-seed N]: before the clause tests are imported, which read it."""
    import random

    from gpt2_conformance.runtime import strategies

    thorough = bool(config.getoption("--gpt2c-thorough", False))
    chosen = config.getoption("--gpt2c-seed", None)  # without thorough: refused by pytest_plugin.py
    strategies.MODE.thorough = thorough
    strategies.MODE.shrink = not config.getoption("--gpt2c-no-shrink", False)
    strategies.MODE.seed = (chosen if chosen is not None else random.randrange(2**32)) if thorough else None


def pytest_collection_modifyitems(config, items):
    suite_items = [i for i in items if i.get_closest_marker("clause")]
    for item in suite_items:
        spec.clause(item.get_closest_marker("clause").args[0])  # unknown IDs fail loudly
    if suite_items and config._gpt2c_factory is None:
        raise pytest.UsageError(
            "gpt2-conformance: the suite needs --gpt2c-backend NAME or --gpt2c-adapter "
            "package.module:factory (gpt2-conformance list names the backends)"
        )
    cases = config.getoption("--gpt2c-case", None) or []
    if cases and suite_items:
        _keep_cases(config, items, cases)


def _closest_cases(case: str, nodeids: list[str]) -> str:
    """ "; did you mean ...?" among the same test's cases (or all tests), else where to copy one from."""
    function = case.split("[")[0]
    same_test = [n for n in nodeids if n.split("[")[0] == function or n.split("[")[0].endswith("/" + function)]
    close = difflib.get_close_matches(case, same_test or nodeids, n=3, cutoff=0.3 if same_test else 0.6)
    if close:
        return f"; did you mean {' or '.join(map(repr, close))}?"
    if same_test:
        return f"; its cases: {', '.join(map(repr, same_test[:8]))}" + (" ..." if len(same_test) > 8 else "")
    return " (copy the nodeid from a report, e.g. 'test_bounds.py::test_too_long_raises')"


def _keep_cases(config, items, cases: list[str]) -> None:
    """--gpt2c-case NODEID: only those tests (a node id as the reports write it, relative to the
    suite's folder), so one FAIL of a report replays alone, with the same draws."""

    def wanted(nodeid, case):
        return nodeid == case or nodeid.endswith("/" + case)

    unknown = [c for c in cases if not any(wanted(i.nodeid, c) for i in items)]
    if unknown and "[" not in unknown[0]:
        cases_of = [
            i.nodeid.rsplit("/", 1)[-1] for i in items if "[" in i.nodeid and wanted(i.nodeid.split("[")[0], unknown[0])
        ]
        if cases_of:  # a parametrised test: one of its cases is a test, the function alone is not
            shown = ", ".join(map(repr, cases_of[:4])) + (f" ... ({len(cases_of)} cases)" if len(cases_of) > 4 else "")
            raise pytest.UsageError(
                f"{UNKNOWN_CASE_PREFIX}{unknown[0]!r} is a parametrised test: name one of its "
                f"cases, as a report's repro line does: {shown}"
            )
    if unknown:
        raise pytest.UsageError(
            f"{UNKNOWN_CASE_PREFIX}{unknown[0]!r} names no test of the suite"
            + _closest_cases(unknown[0], [i.nodeid for i in items])
        )
    keep = [i for i in items if any(wanted(i.nodeid, c) for c in cases)]
    config.hook.pytest_deselected(items=[i for i in items if i not in keep])
    items[:] = keep


def skip_unless_claimed(capabilities, requirement: str) -> None:
    if not capabilities.claims(requirement):
        pytest.skip(f"{NOT_CLAIMED_PREFIX}{requirement}")


def skip_unless_buildable(capabilities, n_embd: int, dtype: str) -> None:
    """An adapter of this size and dtype is claimed (the device is checked at setup)."""
    skip_unless_claimed(capabilities, f"size:{n_embd}")
    skip_unless_claimed(capabilities, f"dtype:{dtype}")


def pytest_runtest_logstart(nodeid, location):
    """Each test starts with no malformed answer on record (runtime/guard.py): its fixtures' calls
    are its own."""
    from gpt2_conformance.runtime.guard import forget_malformed_answers

    forget_malformed_answers()


def pytest_runtest_setup(item):
    marker = item.get_closest_marker("clause")
    if marker is None:
        return
    factory = item.config._gpt2c_factory
    caps = capabilities_of(factory)
    device = item.config.getoption("--gpt2c-device")
    skip_unless_claimed(caps, f"device:{device}")
    available, why = factory.device_available(device) if hasattr(factory, "device_available") else (device == "cpu", "")
    if not available:
        pytest.skip(f"{UNAVAILABLE_PREFIX}{why or device}")
    for requirement in spec.clause(marker.args[0]).requires:
        skip_unless_claimed(caps, requirement)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    """A test of a waived clause (--gpt2c-first-drawn, or a waiver of the pytest route) reports
    its failing example as first drawn: the waiver already names the deviation, and minimising
    an example the verdict does not need was a fifth of a third-party run (keras-hub on JAX:
    reports/performance.md). hypothesis reads a test's settings when it is called, so they are swapped for
    this call and put back after."""
    marker = item.get_closest_marker("clause")
    test = getattr(item, "obj", None)
    settings = getattr(test, "_hypothesis_internal_use_settings", None)
    if marker is None or settings is None or not _first_drawn(item.config, marker.args[0]):
        yield
        return
    from hypothesis import settings as hypothesis_settings

    from gpt2_conformance.runtime.strategies import without_shrinking

    test._hypothesis_internal_use_settings = hypothesis_settings(settings, phases=without_shrinking(settings.phases))
    try:
        yield
    finally:
        test._hypothesis_internal_use_settings = settings


def _first_drawn(config, clause: str) -> bool:
    return clause in config._gpt2c_waivers or clause in (config.getoption("--gpt2c-first-drawn", None) or ())


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
            if blamed_on_answer(call.excinfo):  # the pytest route shows the answer, not the suite's traceback
                tripped = first_line(call.excinfo.value)
                report.longrepr = f"{message}\n(the suite's own code then failed on that answer: {tripped})"
            if call.when != "call":
                message = f"{call.when} failed: {message}"
            report.user_properties.append(("gpt2c_outcome", kind))
            waiver = item.config._gpt2c_waivers.get(marker.args[0])
            if waiver is not None and kind == "failed":  # the pytest route: a waived deviation is xfail
                item.config._gpt2c_waived_failed.add(marker.args[0])
                report.outcome, report.wasxfail = "skipped", f"waived: {waiver.reason} {waiver.link}"
        report.user_properties.append(("gpt2c_message", message))
    if call.when == "call" and not report.skipped:
        item.config._gpt2c_clauses_run.add(marker.args[0])


def stale_waivers(config) -> list[str]:
    """Waivers whose clause ran and did not fail: the waiver file is out of date."""
    return sorted(
        c for c in config._gpt2c_waivers if c in config._gpt2c_clauses_run and c not in config._gpt2c_waived_failed
    )


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not config._gpt2c_waivers:
        return
    waived = sorted(config._gpt2c_waived_failed)
    terminalreporter.write_sep("-", "gpt2-conformance waivers")
    terminalreporter.write_line(f"waived deviations (xfail): {', '.join(waived) or 'none'}")
    for clause in stale_waivers(config):
        terminalreporter.write_line(
            f"STALE WAIVER: {clause} is waived ({config._gpt2c_waivers[clause].link}) but "
            "did not fail: remove it from the waiver file"
        )


# len(sys.modules) when the suite last froze the collector's objects; None: nothing frozen
_frozen_modules: int | None = None
# modules a test may import before they are frozen too: a framework imported by the first adapter
# (keras-hub's adapters import Keras, JAX and keras-hub then, 480,000 objects), not a stray submodule
FRAMEWORK_IMPORT = 200


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session, exitstatus):
    global _frozen_modules
    if _frozen_modules is not None:
        import gc

        gc.unfreeze()  # a process that runs the suite in-process collects as before afterwards
        _frozen_modules = None
    if session.config._gpt2c_waivers and stale_waivers(session.config) and exitstatus == 0:
        session.exitstatus = 1  # as `run`: a stale waiver fails the gate, so the file cannot rot


def pytest_collection_finish(session):
    """Everything imported so far (the frameworks, hypothesis, pytest, the collected tests) lives as
    long as the run: move it out of the cyclic collector's way (gc.freeze), so the full collection
    after a failed test (pytest_runtest_logfinish) and the interpreter's own ones walk only what the
    tests made, not every object of torch or TensorFlow. pytest_sessionfinish hands them back."""
    global _frozen_modules
    import gc
    import sys

    if not any(item.get_closest_marker("clause") for item in session.items):
        return  # not a suite run: a project's own tests are left as they are
    gc.collect()  # garbage so far is freed, not frozen
    gc.freeze()
    _frozen_modules = len(sys.modules)


def pytest_runtest_logfinish(nodeid, location):
    """After a suite test failed (and after --pdb's post-mortem): free what its failure holds. The
    exception's traceback holds the test's frames, so their tables, adapters and gradients (1.4 GB
    after a failed gradients test), in a reference cycle that only the cyclic collector frees, which
    counts objects, not bytes; pytest's sys.last_* keep it too. Until then the process grows by that
    much, and freshly mapped memory is the costliest part of a run (run/memory.py).

    After a test that imported a framework (an adapter that imports its framework when it is first
    built), that framework is frozen too, as at collection: otherwise each of those collections
    walks it again (dozens of times per keras-hub-jax verdict). What the session's and the
    module's fixtures hold at that moment is frozen with it: freed at the session's end if a
    reference cycle holds it (one module's adapters, once per process)."""
    global _frozen_modules
    import gc
    import sys

    failed = getattr(sys, "last_value", None) is not None or getattr(sys, "last_exc", None) is not None
    imported = _frozen_modules is not None and len(sys.modules) > _frozen_modules + FRAMEWORK_IMPORT
    if not failed and not imported:
        return
    for name in ("last_type", "last_value", "last_traceback", "last_exc"):
        if hasattr(sys, name):
            setattr(sys, name, None)
    gc.collect()
    if imported:
        gc.freeze()
        _frozen_modules = len(sys.modules)


def outcome_of(report) -> str:
    """passed / failed / skipped / error ("error": the suite's own failure, see classify)."""
    return dict(report.user_properties).get("gpt2c_outcome", report.outcome)


def pytest_report_header(config):
    if config.getoption("--gpt2c-backend") or config.getoption("--gpt2c-adapter") or config._gpt2c_factory:
        from gpt2_conformance.golden import data
        from gpt2_conformance.runtime.strategies import MODE

        draws = (
            f"thorough, seed {MODE.seed} (replay: --gpt2c-thorough --gpt2c-seed {MODE.seed})"
            if MODE.thorough
            else "default (derandomized)"
        )
        return [
            f"gpt2-conformance golden data: {data.describe(config.getoption('--gpt2c-checkpoint'))}",
            f"gpt2-conformance draws: {draws}",
        ]
    return None
