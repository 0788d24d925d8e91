"""The pytest plugin's entry point (`pytest11: gpt2_conformance`), loaded into every pytest
session of an environment that has the suite installed. So it does nothing but register the
suite's options, each behind the `--gpt2c-` prefix (a project's own `--device` or `--backend`
stays its own), and imports nothing unless --gpt2c-backend is given (then the registry alone, to
refuse in one line a name that cannot run): the suite's hooks and fixtures live in
gpt2_conformance/suite/conftest.py, which pytest loads only when it collects the suite.

    pytest --pyargs gpt2_conformance.suite --gpt2c-backend numpy
    pytest --pyargs gpt2_conformance.suite --gpt2c-adapter mypkg.gpt2:make_adapter --gpt2c-device gpu
"""


def pytest_addoption(parser):
    group = parser.getgroup("gpt2-conformance", "gpt2-conformance (used only when the suite is collected)")
    group.addoption("--gpt2c-backend", help="built-in or installed backend name (gpt2-conformance list)")
    group.addoption("--gpt2c-adapter", help="adapter factory as package.module:factory")
    group.addoption("--gpt2c-device", default="cpu", choices=("cpu", "gpu"), help="device to run on (default cpu)")
    group.addoption("--gpt2c-checkpoint", help="GOLDEN clauses: load wte/wpe from this GPT-2 checkpoint "
                    "(.safetensors, torch .bin, TF model.ckpt, .npz, .gguf) instead of the shipped real data")
    group.addoption("--gpt2c-waivers", help="TOML file of expected deviations; a waived clause's failures are "
                    "xfail with the reason and link, a waiver whose clause passed fails the run as stale "
                    "(default: the backend's own waiver file, or the adapter's WAIVERS attribute)")
    group.addoption("--gpt2c-thorough", action="store_true", help="10x the examples, drawn from a random seed "
                    "(printed; the default draws are derandomized)")
    group.addoption("--gpt2c-seed", type=int, help="with --gpt2c-thorough: the seed, to replay a run's draws")
    group.addoption("--gpt2c-no-shrink", action="store_true", help="report a failing example as first drawn, not "
                    "minimised: the same verdicts, sooner on an implementation that fails (the messages' "
                    "examples are then not the smallest)")
    group.addoption("--gpt2c-first-drawn", action="append", default=[], metavar="CLAUSE",
                    help="report this clause's failing examples as first drawn, not minimised (repeatable; the "
                    "CLI passes every waived clause: its waiver already names the deviation)")
    group.addoption("--gpt2c-case", action="append", default=[], metavar="NODEID",
                    help="run only this test of the suite, e.g. 'test_bounds.py::test_too_long_raises' (a "
                    "report's repro line); repeatable")


def pytest_configure(config):
    """A --gpt2c-backend that cannot run, or a --gpt2c-checkpoint that is missing or of no format
    the suite reads, is a usage error here, one line, before collection (the suite's own hooks
    find out at collection, where pytest prints it as a collection error with two tracebacks, or
    in each GOLDEN test). Only when the option is given; the checks import no framework."""
    checkpoint = config.getoption("--gpt2c-checkpoint", None)
    if checkpoint:
        import pytest

        from gpt2_conformance.golden import readers

        try:
            readers.format_of(checkpoint)
        except readers.CheckpointError as exc:
            raise pytest.UsageError(f"gpt2-conformance: --gpt2c-checkpoint {exc}") from None
    name = config.getoption("--gpt2c-backend", None)
    if not name or ":" in name or config.getoption("--gpt2c-adapter", None):
        return
    import pytest

    from gpt2_conformance import registry

    if name not in registry.available():
        raise pytest.UsageError(f"gpt2-conformance: --gpt2c-backend {name!r}: unknown backend; available: "
                                f"{', '.join(registry.available())} (or --gpt2c-adapter package.module:factory)")
    lacking = registry.missing_framework(name)
    if lacking:
        raise pytest.UsageError(f"gpt2-conformance: --gpt2c-backend {name!r} needs {lacking}, which is not "
                                f"installed: {registry.install_command(registry.entry(name))}")
