"""The pytest-benchmark suite runs only when asked:

    pytest tests/benchmarks --run-bench [--benchmark-json=out.json] [--benchmark-compare=...]

Without --run-bench (the normal `pytest` run collects tests/ too) every test here is skipped,
and nothing imports a framework at collection time. `gpt2-conformance bench` is the same
measurement with one framework per process; its JSON uses these tests' names.
"""

import pytest


def pytest_addoption(parser):
    # registered when this folder is named on the command line (an "initial" conftest); in a
    # plain `pytest` run it is not, and getoption's default (False) keeps the tests skipped
    parser.addoption(
        "--run-bench",
        action="store_true",
        default=False,
        help="run the benchmarks in tests/benchmarks (skipped otherwise)",
    )


def pytest_collection_modifyitems(config, items):
    if config.getoption("--run-bench", default=False):
        return
    skip = pytest.mark.skip(reason="benchmarks run only with --run-bench (pytest tests/benchmarks --run-bench)")
    for item in items:
        if "benchmarks" in item.path.parts:
            item.add_marker(skip)
