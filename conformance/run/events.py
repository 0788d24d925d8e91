"""The JSON lines a suite child writes and its parent reads: one place for both ends.

The child (pytest with `-p gpt2_conformance.run.events --gpt2c-results FILE`) appends, each line
flushed and synced so that a test that kills the interpreter still leaves every earlier one:

    {"event": "collected", "clauses": {nodeid: clause}}   the tests this pass will run
    {"event": "start", "nodeid"}                          a test begins
    {"event": "result", "nodeid", "clause", "outcome", "message", "duration"[, "observed"]}
    {"event": "session", "implementation", "parity"}      after the last test (parity: with --gpt2c-parity,
                                                          in the first shard to claim it)

so the parent knows which test was in flight when a child died, and needs no second process
for what the child already has in memory: the adapter's description and the run's parity
fingerprint (gpt2_conformance.run.parity), computed on the framework this child imported."""

from __future__ import annotations

import atexit
import json
import os
import signal
import sys
from dataclasses import dataclass, field

import pytest

from gpt2_conformance.results import TestOutcome
from gpt2_conformance.runtime.hooks import outcome_of
from gpt2_conformance.runtime.observe import PROPERTY as OBSERVED

# A test whose failure leaves the device unusable for the rest of the process: a CUDA
# device-side assert (torch's unchecked gather on the GPU) poisons the CUDA context, and every
# later kernel in that process fails. The child ends itself after recording that test, with
# FRESH_PROCESS_EXIT, and the parent runs the remaining tests in a new process: the assert
# costs its own clause only.
POISONED_DEVICE = ("device-side assert", "CUDA error", "CUDA_ERROR_", "illegal memory access")
FRESH_PROCESS_EXIT = 75  # EX_TEMPFAIL: "try again", in a new process


def poisons_device(message: str) -> bool:
    return any(mark in message for mark in POISONED_DEVICE)


def death(returncode: int) -> str:
    """How a test process ended, as a crash message says it: the signal by name (a segfault in
    native code is SIGSEGV), else the exit code."""
    if returncode < 0:
        try:
            return f"killed by signal {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exit code {returncode}"


def crashed(how: str) -> str:
    """The FAIL message of a test its process died in, `how` as death() says it."""
    return f"crashed: the test process died ({how}) during this test"


class EventsWriter:
    """Appends the events of one pytest session to `path`."""

    def __init__(self, path: str):
        self.path = path
        self._pending: dict[str, dict] = {}

    def write(self, record: dict) -> None:
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def pytest_runtest_logstart(self, nodeid, location):
        self.write({"event": "start", "nodeid": nodeid})

    def pytest_runtest_logreport(self, report):
        props = dict(report.user_properties)
        if "gpt2c_clause" not in props:
            return
        rec = self._pending.setdefault(
            report.nodeid,
            {
                "event": "result",
                "nodeid": report.nodeid,
                "clause": props["gpt2c_clause"],
                "outcome": "passed",
                "message": "",
                "duration": 0.0,
            },
        )
        rec["duration"] += report.duration
        if report.outcome != "passed" and rec["outcome"] == "passed":
            rec["outcome"], rec["message"] = outcome_of(report), props.get("gpt2c_message", "")
        if OBSERVED in props:
            rec["observed"] = props[OBSERVED]
        if report.when == "teardown":
            done = self._pending.pop(report.nodeid)
            self.write(done)
            if done["outcome"] != "passed" and poisons_device(done["message"]):
                os._exit(FRESH_PROCESS_EXIT)  # written and synced above; nothing else of this process is usable

    def pytest_collection_finish(self, session):
        clauses = {
            i.nodeid: i.get_closest_marker("clause").args[0] for i in session.items if i.get_closest_marker("clause")
        }
        self.write({"event": "collected", "clauses": clauses})

    def pytest_sessionfinish(self, session, exitstatus):
        self.exitstatus = int(exitstatus)
        config = session.config
        factory = getattr(config, "_gpt2c_factory", None)
        if factory is None:
            return
        record = {"event": "session", "implementation": implementation(factory)}
        if config.getoption("--gpt2c-parity") and _claimed(config.getoption("--gpt2c-parity-claim")):
            record["parity"] = _bounded_fingerprint(
                factory, config.getoption("--gpt2c-device"), config.getoption("timeout", None)
            )
        self.write(record)


def implementation(factory) -> str:
    """The adapter's own description (implementation() where it has one, e.g. "transformers 5.24.0
    GPT2LMHeadModel (torch 2.13.0)"), else its class."""
    describe = getattr(factory, "implementation", None)
    try:
        return describe() if callable(describe) else f"{factory.__module__}:{factory.__qualname__}"
    except Exception as exc:  # noqa: BLE001 - a description must never cost the run
        return f"{getattr(factory, '__qualname__', repr(factory))} (implementation() raised {type(exc).__name__})"


def _claimed(path: str | None) -> bool:
    """Whether this process computes the parity fingerprint: always without a claim file; with
    one (every shard of a run gets the same), only the first shard to finish its tests, so the
    fingerprint is never added to a shard that is still the slowest."""
    if not path:
        return True
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    return True


MAX_REASON = 300  # characters of a fingerprint's error: the adapter's first line, not its whole message


class _TimedOut(Exception):
    pass


def _bounded_fingerprint(factory, device: str, timeout: float | None) -> dict:
    """The parity fingerprint, within the run's per-test timeout (a hang in native code that no
    signal interrupts is the parent's watchdog's to end)."""
    from gpt2_conformance.run import parity

    def expire(signum, frame):
        raise _TimedOut()

    seconds = max(int(timeout or 0), 0)
    previous = signal.signal(signal.SIGALRM, expire) if seconds else None
    if seconds:
        signal.alarm(seconds)
    try:
        return parity.fingerprint_of(factory, device)
    except _TimedOut:
        return parity.not_computed(f"the adapter took longer than --timeout {seconds} s")
    except Exception as exc:  # noqa: BLE001 - the adapter's failure is in the clauses already
        why = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        return parity.not_computed(why[: MAX_REASON - len(parity.NOT_COMPUTED)])
    finally:
        if seconds:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, previous)


def pytest_addoption(parser):
    group = parser.getgroup("gpt2-conformance")
    group.addoption("--gpt2c-results", help="append one JSON line per test event to this file (used by the CLI)")
    group.addoption(
        "--gpt2c-parity", action="store_true", help="with --gpt2c-results: the run's parity fingerprint too"
    )
    group.addoption(
        "--gpt2c-parity-claim",
        help="with --gpt2c-parity: compute it only if this process is the first "
        "to create this file (the CLI gives every shard the same one)",
    )
    group.addoption(
        "--gpt2c-shard",
        default="0/1",
        help="I/N: run the I-th of N shares of the suite's tests "
        "(the CLI splits one backend's suite over the machine's cores this way)",
    )


@pytest.hookimpl(tryfirst=True)  # before -k and --deselect: a restarted pass keeps its shard's tests
def pytest_collection_modifyitems(config, items):
    index, _, count = config.getoption("--gpt2c-shard").partition("/")
    index, count = int(index), int(count or 1)
    if count <= 1:
        return
    shard_of = _shards(items, count)
    keep, drop = [], []
    for item in items:
        (keep if shard_of[item.nodeid] == index else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def _shards(items, count: int) -> dict[str, int]:
    """nodeid -> shard, the same in every process that collected the same tests. Every test that
    uses one of its module's module-scoped fixtures goes where that fixture's first user went, so
    a fixture's work (an adapter built, the tables initialised: most of a second on numpy, seconds
    on keras-hub) is done in one shard only; each other test goes to the shard with the fewest
    tests so far."""
    shard_of: dict[str, int] = {}
    sizes = [0] * count
    fixture_home: dict[tuple[str, str], int] = {}
    for item in items:
        shared = [
            (item.module.__name__ if getattr(item, "module", None) else "", name) for name in _module_fixtures(item)
        ]
        home = next((fixture_home[key] for key in shared if key in fixture_home), None)
        shard = home if home is not None else sizes.index(min(sizes))
        for key in shared:
            fixture_home.setdefault(key, shard)
        shard_of[item.nodeid] = shard
        sizes[shard] += 1
    return shard_of


def _module_fixtures(item) -> list[str]:
    """The module-scoped fixtures `item` uses (none where pytest does not say)."""
    definitions = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
    return sorted(name for name, defs in definitions.items() if defs and defs[-1].scope == "module")


def pytest_sessionstart(session):
    path = session.config.getoption("--gpt2c-results")
    if path:
        session.config.pluginmanager.register(EventsWriter(path), "gpt2c-events-writer")


# pytest's exit statuses of a session that ran: all passed, some failed, none collected. The
# others (interrupted, internal or usage error) are printed by pytest after the session ends.
FINISHED_STATUSES = (0, 1, 5)


@pytest.hookimpl(trylast=True)  # after every other plugin has finished with the session
def pytest_unconfigure(config):
    """End the child here, with pytest's exit status, once its events are written: tearing down an
    interpreter that imported a framework costs more than some tests (module and object destructors
    after `import tensorflow` alone: reports/performance.md), and the parent reads nothing the child
    would still do. Exit handlers still run (atexit, weakref.finalize: an adapter's temporary
    files); objects' __del__ at shutdown does not."""
    writer = config.pluginmanager.get_plugin("gpt2c-events-writer")
    status = getattr(writer, "exitstatus", None)
    if status not in FINISHED_STATUSES:  # no events file, or pytest has an error still to print
        return
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


@dataclass
class Pass:
    """What one child pass left in its events file."""

    done: dict[str, TestOutcome] = field(default_factory=dict)  # nodeid -> outcome of every finished test
    in_flight: str | None = None  # the test that started and never finished
    collected: dict[str, str] | None = None  # nodeid -> clause, once collection finished
    session: dict | None = None  # the session event, if the child got that far


def read(path: str) -> Pass:
    """The events of one pass. A last line cut by a crash is ignored."""
    out = Pass()
    if not os.path.exists(path):
        return out
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.endswith("\n"):
                break
            event = json.loads(line)
            kind = event["event"]
            if kind == "start":
                out.in_flight = event["nodeid"]
            elif kind == "result":
                out.done[event["nodeid"]] = TestOutcome(
                    event["nodeid"],
                    event["clause"],
                    event["outcome"],
                    event["message"],
                    event["duration"],
                    observed=event.get("observed", ""),
                )
                out.in_flight = None
            elif kind == "collected":
                out.collected = event["clauses"]
            elif kind == "session":
                out.in_flight, out.session = None, event
    return out
