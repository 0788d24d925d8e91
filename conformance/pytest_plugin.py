"""The pytest plugin's entry point (`pytest11: gpt2_conformance`), loaded into every pytest
session of an environment that has the suite installed. So it does nothing but register the
suite's options, each behind the `--gpt2c-` prefix (a project's own `--device` or `--backend`
stays its own), and imports nothing unless a --gpt2c- input is given (then it checks them before
collection, to refuse in one line what cannot run): the suite's hooks and fixtures live in
conformance/suite/conftest.py, which pytest loads only when it collects the suite.

    pytest --pyargs gpt2_conformance.suite --gpt2c-backend numpy
    pytest --pyargs gpt2_conformance.suite --gpt2c-adapter mypkg.gpt2:make_adapter --gpt2c-device gpu
"""

import pytest


def pytest_addoption(parser):
    group = parser.getgroup("gpt2-conformance", "gpt2-conformance (used only when the suite is collected)")
    group.addoption("--gpt2c-backend", help="built-in or installed backend name (gpt2-conformance list)")
    group.addoption("--gpt2c-adapter", help="adapter factory as package.module:factory")
    group.addoption(
        "--gpt2c-exec",
        metavar='"CMD [ARGS]"',
        help="a program speaking the wire protocol on its stdin/stdout, as one quoted string (docs/any-language.md)",
    )
    group.addoption("--gpt2c-device", default="cpu", choices=("cpu", "gpu"), help="device to run on (default cpu)")
    group.addoption(
        "--gpt2c-checkpoint",
        help="GOLDEN clauses: load wte/wpe from this GPT-2 checkpoint "
        "(.safetensors, torch .bin, TF model.ckpt, .npz, .gguf) instead of the shipped real data",
    )
    group.addoption(
        "--gpt2c-waivers",
        help="TOML file of expected deviations; a waived clause's failures are "
        "xfail with the reason and link, a waiver whose clause passed fails the run as stale "
        "(default: the backend's own waiver file, or the adapter's WAIVERS attribute)",
    )
    group.addoption(
        "--gpt2c-thorough",
        action="store_true",
        help="10x the examples, drawn from a random seed (printed; the default draws are derandomized)",
    )
    group.addoption("--gpt2c-seed", type=int, help="with --gpt2c-thorough: the seed, to replay a run's draws")
    group.addoption(
        "--gpt2c-no-shrink",
        action="store_true",
        help="report a failing example as first drawn, not "
        "minimised: the same verdicts, sooner on an implementation that fails (the messages' "
        "examples are then not the smallest)",
    )
    group.addoption(
        "--gpt2c-first-drawn",
        action="append",
        default=[],
        metavar="CLAUSE",
        help="report this clause's failing examples as first drawn, not minimised (repeatable; the "
        "CLI passes every waived clause: its waiver already names the deviation)",
    )
    group.addoption(
        "--gpt2c-case",
        action="append",
        default=[],
        metavar="NODEID",
        help="run only this test of the suite, e.g. 'test_bounds.py::test_too_long_raises' (a "
        "report's repro line); repeatable",
    )


@pytest.hookimpl(tryfirst=True)  # before the suite's conftest, whose hooks read what is checked here
def pytest_configure(config):
    """Every --gpt2c- input is checked here, before collection, by the same checks `gpt2-conformance
    run` makes (conformance/runtime/inputs.py), and refused as pytest's usage error: one line,
    exit 4. The suite's conftest is imported during collection, where an error is a collection
    error with a chained traceback, and a bad checkpoint would be each GOLDEN test's error.

    The adapter and the waivers, once read, are kept on the config for the suite's hooks. In a
    child of `run` (--gpt2c-results) nothing is checked: `run` checked it all before starting it."""
    options = (
        "--gpt2c-backend",
        "--gpt2c-adapter",
        "--gpt2c-exec",
        "--gpt2c-checkpoint",
        "--gpt2c-waivers",
        "--gpt2c-seed",
        "--gpt2c-case",
    )
    if config.getoption("--gpt2c-results", None) or not any(config.getoption(o, None) for o in options):
        return
    from gpt2_conformance.runtime import inputs

    if config.getoption("--gpt2c-exec", None):  # a command: its adapter spec stands in for --gpt2c-adapter
        config.option.gpt2c_adapter = _exec_spec(config)

    name = config.getoption("--gpt2c-adapter", None) or config.getoption("--gpt2c-backend", None)
    try:
        inputs.seed(config.getoption("--gpt2c-seed", None), config.getoption("--gpt2c-thorough", False), inputs.PYTEST)
        for case in config.getoption("--gpt2c-case", None) or ():
            inputs.case(case, inputs.PYTEST)
        if config.getoption("--gpt2c-checkpoint", None):
            inputs.checkpoint(config.getoption("--gpt2c-checkpoint"), inputs.PYTEST)
        if not name:
            return
        if ":" not in name and not config.getoption("--gpt2c-adapter", None):
            inputs.backend(name, inputs.PYTEST)
        factory = inputs.adapter(name, spec_only=bool(config.getoption("--gpt2c-adapter", None)))
        config._gpt2c_checked = (
            factory,
            name,
            inputs.waiver_list(name, config.getoption("--gpt2c-waivers", None), factory),
        )
    except inputs.InputError as exc:
        raise pytest.UsageError(f"gpt2-conformance: {exc}") from None


def _exec_spec(config) -> str:
    """--gpt2c-exec CMD as the adapter spec it resolves to (wire/route.py); one usage line where the
    command cannot run or another target is given too. The per-call deadline is half of
    pytest-timeout's --timeout where it is set."""
    from gpt2_conformance.wire import process, route

    if config.getoption("--gpt2c-adapter", None) or config.getoption("--gpt2c-backend", None):
        raise pytest.UsageError(
            "gpt2-conformance: --gpt2c-exec names the implementation: leave out --gpt2c-adapter and --gpt2c-backend"
        )
    try:
        return route.spec_of(config.getoption("--gpt2c-exec"), config.getoption("timeout", None), "--gpt2c-exec")
    except process.CommandError as exc:
        raise pytest.UsageError(f"gpt2-conformance: {exc}") from None
