"""The project's own tests, in two tiers:

    pytest              the fast tier: unit tests and one suite run per reference backend
    pytest --slow       both tiers: also the kill matrix, the claims runs, the framework mutants,
                        the third-party runs, the wheel, crash isolation and the CI example
    pytest --slow -m slow   the slow tier alone

A slow test is marked @pytest.mark.slow (or `pytestmark` for a whole module); without --slow it
is deselected, and pytest's summary says how many were."""

import os
import sys

# tests/helpers holds the helper modules (mutants, strict and bad adapters, writers, report
# factories), imported as `from helpers import mutants`, also by child processes on PYTHONPATH
TESTS_DIR = os.path.dirname(__file__)
if TESTS_DIR not in sys.path:
    sys.path.insert(0, TESTS_DIR)


def pytest_configure(config):
    # the suite runs hundreds of times in these processes and their children: keep its freed
    # 150-310 MB blocks in the heap (conformance/run/memory.py says why)
    from gpt2_conformance.run import memory

    memory.keep_freed_memory()
    os.environ.update(memory.child_env())
    # Under xdist every worker runs its suite children beside the other workers': the suite's
    # own thread pools get each worker's share of the cores (machine.thread_pools_for; `run`
    # sizes its shards the same way). Set before any child starts; a value already in the
    # environment wins. Verdicts do not depend on it (a thread count changes float32 summation
    # order, within every bound).
    from gpt2_conformance.api.machine import thread_pools_for

    for name, value in thread_pools_for(int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))).items():
        os.environ.setdefault(name, value)
    if _judges_every_backend(config):
        _judge_every_backend_once(config)


def _judges_every_backend(config) -> bool:
    """Whether this run includes the judged backends' tests (the whole slow tier, or
    test_thirdparty.py named), with no verdicts given (GPT2C_VERDICTS) and no filter that drops them."""
    if not config.getoption("--slow") or os.environ.get("GPT2C_VERDICTS") or config.getoption("-k"):
        return False
    if config.getoption("collectonly") or hasattr(config, "workerinput"):  # xdist's workers: the controller did it
        return False
    args = [a.split("::")[0] for a in config.args]
    return not args or any(os.path.abspath(a) == TESTS_DIR or a.endswith("test_thirdparty.py") for a in args)


def _judge_every_backend_once(config) -> None:
    """README command 1's main job, once, before the tests: `gpt2-conformance run --backend all`
    judges every built-in backend side by side (longest first, each backend's environment built
    where it is missing), and test_thirdparty.py reads each verdict from its JSON report
    (GPT2C_VERDICTS) instead of judging the backend again in a worker of its own. Adding a backend
    adds its verdict here once, not twice. Its scorecards and summary are in the test log."""
    import subprocess
    import tempfile
    import time

    folder = tempfile.mkdtemp(prefix="gpt2c-verdicts-")
    command = [sys.executable, "-m", "gpt2_conformance.cli", "run", "--backend", "all", "--quiet"]
    command += ["--report-dir", folder]
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    say = reporter.write_line if reporter is not None else print
    say(f"gpt2-conformance: the main job first, every backend's verdict once: {' '.join(command[1:])}")
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    say(done.stdout.rstrip())
    say(f"gpt2-conformance: the main job exited {done.returncode} after {time.perf_counter() - start:.0f} s")
    os.environ["GPT2C_VERDICTS"] = folder  # the workers start after this, with it in their environment


def pytest_addoption(parser):
    parser.addoption(
        "--slow",
        action="store_true",
        default=False,
        help="also run the slow tier (tests marked slow); CI runs both tiers",
    )


# With --slow, the longest runs start first (the third-party suites take 1-3 minutes each, the
# CI example 2): xdist hands tests out in this order, so the short ones fill in at the end
# instead of one long run finishing alone on one core.
LONGEST_FIRST = ("test_thirdparty.py", "test_ci_example.py")


def _start_order(item) -> int:
    if item.path.name in LONGEST_FIRST:
        return 0
    return 1 if item.get_closest_marker("slow") else 2


def pytest_collection_modifyitems(config, items):
    if config.getoption("--slow"):
        items.sort(key=_start_order)  # stable: the order within each group stays the collection's
        return
    slow = [item for item in items if item.get_closest_marker("slow")]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if not item.get_closest_marker("slow")]
