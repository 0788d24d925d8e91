"""A suite child that survives its implementation's crashes: it runs the tests in a forked worker
and forks a new one for the tests left after a crash, instead of the parent starting a new child.

A verdict child pays its start (Python, pytest, the suite's collection, the framework's import:
up to seconds) before its first test. An implementation that crashes on bad ids (a segfault in an
unchecked native gather, an abort) costs one child per crash under the parent's restart loop
(run/runner.py): 10-12 per run for mlx-lm and tract, each paying that start again. Forked from a
child that has imported and collected everything but run no test, a worker starts where a new
child would be after its start, with nothing any test left behind: the same isolation.

fork() copies only the calling thread, so a process with other threads (a framework's pool,
started at import) could hand the worker a lock no thread will release. The child forks only
while it is the only thread of its process (Linux: /proc/self/task), else it runs its tests
itself, as before. The worker dies with its parent (PR_SET_PDEATHSIG), so the parent's
watchdog, which ends a hung child, ends its worker too.

What the parent reads does not change: the worker writes the events of the tests it runs
(run/events.py), and for a test it died in, this process writes that test's result with the
reason the parent would have given ("crashed: the test process died (killed by signal SIGSEGV)
during this test"), then forks the next worker for the rest.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

import pytest

from gpt2_conformance.run import events

PR_SET_PDEATHSIG = 1  # prctl(2)


def only_thread() -> bool:
    """This process has one thread, so a fork copies all of it (False where that cannot be read)."""
    try:
        return len(os.listdir("/proc/self/task")) == 1
    except OSError:
        return False


def _die_with_parent(parent: int) -> None:
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:  # the parent died before the line above
        os._exit(1)


def _run_items(session, items) -> None:
    """pytest's own run loop (_pytest.main.pytest_runtestloop) over `items`."""
    for i, item in enumerate(items):
        nextitem = items[i + 1] if i + 1 < len(items) else None
        item.config.hook.pytest_runtest_protocol(item=item, nextitem=nextitem)
        if session.shouldfail:
            raise session.Failed(session.shouldfail)
        if session.shouldstop:
            raise session.Interrupted(session.shouldstop)


def _run_in_worker(session, items) -> None:
    """The worker: the run loop over `items`, then out, skipping the session's end (the process
    that forked it writes that)."""
    status = 3
    try:
        _run_items(session, items)
        status = 0
    except BaseException:  # noqa: BLE001 - pytest's own stops included: say them, then end
        import traceback

        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)


def _wait(pid: int) -> str:
    """How the worker ended, in the words of the parent's crash message."""
    _, status = os.waitpid(pid, 0)
    return events.death(-os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status))


@pytest.hookimpl(tryfirst=True)
def pytest_runtestloop(session: pytest.Session) -> bool | None:
    config = session.config
    path = config.getoption("--gpt2c-results")
    writer = config.pluginmanager.get_plugin("gpt2c-events-writer")
    if (
        not path
        or writer is None
        or not session.items
        or config.option.collectonly
        or session.testsfailed
        or not hasattr(os, "fork")
        or not sys.platform.startswith("linux")
        or not only_thread()
    ):
        return None  # pytest's own loop, in this process
    me = os.getpid()
    finished: set[str] = set()
    while True:
        items = [item for item in session.items if item.nodeid not in finished]
        if not items:
            break
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _die_with_parent(me)
            _run_in_worker(session, items)
        how = _wait(pid)
        seen = events.read(path)
        progress = set(seen.done) - finished
        finished |= set(seen.done)
        if seen.in_flight is not None:  # it died in a test: that test FAILs, the next worker runs the rest
            clause = (seen.collected or {}).get(seen.in_flight, "")  # the collected event, written here
            writer.write(
                {
                    "event": "result",
                    "nodeid": seen.in_flight,
                    "clause": clause,
                    "outcome": "failed",
                    "message": events.crashed(how),
                    "duration": 0.0,
                }
            )
            finished.add(seen.in_flight)
            print(f"\nthe worker died in {seen.in_flight} ({how}): a new one runs the tests left", flush=True)
        elif how == "exit code 0":  # it ran every test it was given (or pytest stopped it: -x)
            break
        elif not progress:  # it died outside any test, having finished none: run the rest here, as before
            print(f"\nthe worker ended ({how}) outside any test: the tests left run in this process", flush=True)
            _run_items(session, [item for item in session.items if item.nodeid not in finished])
            break
    session.testsfailed = sum(1 for o in events.read(path).done.values() if o.outcome == "failed")
    return True
