"""Running the suite and collecting clause verdicts.

run_in_process(factory): pytest.main in this process with the factory injected (fast; used
by the kill matrix and tests). run_backend(name): pytest in a child process that appends a
JSON line per test, watched by this process, so an adapter that crashes the interpreter or
hangs inside native code costs one FAIL, not the run: the test in flight is recorded as a
FAIL with the reason and the child is restarted without the tests already done. A child
that is a single thread after its imports does the restarting itself, by forking a new worker
(run/forking.py): the same isolation, without a second start-up per crash.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import importlib.util
import io
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from gpt2_conformance import registry, spec
from gpt2_conformance import results as res
from gpt2_conformance.api import machine
from gpt2_conformance.run import envs, memory
from gpt2_conformance.run import events as events_file
from gpt2_conformance.run.parity import not_computed
from gpt2_conformance.runtime.hooks import InjectedFactory, outcome_of

SUITE = "gpt2_conformance.suite"
DEFAULT_TEST_TIMEOUT = 120.0  # seconds per test, enforced by pytest-timeout in the child
HANG_GRACE = 30.0  # at most this many extra seconds (and no more than the timeout) before the watchdog
# kills a child stuck in native code, where pytest-timeout's signal cannot reach
# Set on Ctrl-C: no child starts after it and each running one is ended. Without it `run --backend
# all` went on for minutes after a Ctrl-C, starting child after child for the backends left.
STOPPING = threading.Event()
# Every suite run, in this process or a child: --tb=native keeps every failure's whole traceback,
# formatted as Python does; pytest's own styles parse the source file of every traceback entry
# (hypothesis' included) for each failure, a tenth of a failing implementation's run, for output the
# verdict never reads (swallowed here, the log in a child)
# --rootdir: the suite's own folder, so every test's node id is its path there ("test_bounds.py::...")
# whatever the working directory: pytest otherwise searches the working directory and its parents
# for a config file, and one that appears there mid-run (another program's pytest.ini or
# setup.cfg in /tmp) changed the node ids between a crashed child and the next, so the next one's
# --deselect matched nothing and it ran the other shard's tests again.
_SUITE_SPEC = importlib.util.find_spec(SUITE)
assert _SUITE_SPEC is not None and _SUITE_SPEC.origin is not None  # the suite is a package of this one
SUITE_DIR = os.path.dirname(_SUITE_SPEC.origin)
SUITE_ARGS = ("--pyargs", SUITE, "--rootdir", SUITE_DIR, "-p", "no:cacheprovider", "-q", "--tb=native")
# The only pytest plugins a verdict child loads (PYTEST_DISABLE_PLUGIN_AUTOLOAD): the suite's options,
# its event writer, pytest-timeout and hypothesis' own. Whatever else the environment has installed
# (anyio, typeguard, jaxtyping, pytest-randomly, ...) can neither reorder nor change a verdict, nor
# cost its start-up: pytest rewrites the asserts of every module of an autoloaded plugin's
# distribution (hypothesis, anyio, typeguard, ...: over a hundred modules), again in every child
# where bytecode is not written (PYTHONDONTWRITEBYTECODE): seconds of each child's start.
CHILD_PLUGINS = (
    "gpt2_conformance.pytest_plugin",
    "gpt2_conformance.run.events",
    "gpt2_conformance.run.forking",
    "pytest_timeout",
    "_hypothesis_pytestplugin",
)
# the distributions behind the child plugins that are not ours: a child without one dies at its start
CHILD_PLUGIN_DISTRIBUTIONS = {"pytest_timeout": "pytest-timeout", "_hypothesis_pytestplugin": "hypothesis"}


def missing_child_plugins() -> str | None:
    """The child plugins this interpreter cannot load, as one line saying what to install; None if
    it has them all. Each suite child is this interpreter (sys.executable) running pytest with them,
    and a child that cannot load one ends before its first test: every clause an ERROR."""
    missing = [dist for module, dist in CHILD_PLUGIN_DISTRIBUTIONS.items() if not registry.importable(module)]
    if not missing:
        return None
    return (
        f"{' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} not installed in {sys.executable}, "
        f"and the suite's test processes load {'it' if len(missing) == 1 else 'them'}: pip install "
        f"{' '.join(missing)} into that environment, or run the gpt2-conformance of one that has "
        f"{'it' if len(missing) == 1 else 'them'}"
    )


class _Collector:
    def __init__(self) -> None:
        self.outcomes: dict[str, res.TestOutcome] = {}

    def pytest_runtest_logreport(self, report):
        props = dict(report.user_properties)
        if "gpt2c_clause" not in props:
            return
        current = self.outcomes.setdefault(
            report.nodeid, res.TestOutcome(report.nodeid, props["gpt2c_clause"], "passed")
        )
        current.duration += report.duration
        if report.outcome != "passed" and current.outcome == "passed":
            current.outcome, current.message = outcome_of(report), props.get("gpt2c_message", "")
        current.observed = props.get(events_file.OBSERVED, current.observed)


def _versions(modules) -> dict[str, str]:
    """package -> installed version for the distributions providing `modules` (read from the
    installed metadata: nothing is imported), plus this suite's own and numpy's."""
    from importlib import metadata

    providers = _providers()
    dists = {"gpt2-conformance", "numpy"}
    for module in modules:
        dists.update(providers.get(module.split(".")[0], ()))
    out = {}
    for dist in sorted(dists):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    return out


def _providers() -> dict[str, list[str]]:
    """importlib.metadata.packages_distributions(), kept on disk for the next run while no folder
    on sys.path has changed since (an install or uninstall changes its folder's mtime): reading
    every installed distribution's file list took a third of a second per run here."""
    from importlib import metadata

    try:
        key = [[p, os.stat(p).st_mtime_ns] for p in sys.path if os.path.isdir(p)]
    except OSError:  # a folder removed meanwhile
        key = None
    folder = machine.private_cache_folder("metadata") if key else None
    path = os.path.join(folder, "packages_distributions.json") if folder else None
    if path:
        try:
            with open(path, encoding="utf-8") as f:
                kept = json.load(f)
            if kept["key"] == key:
                return kept["providers"]
        except (OSError, ValueError, KeyError, TypeError):
            pass
    providers = {k: list(v) for k, v in metadata.packages_distributions().items()}
    if path:
        kept = json.dumps({"key": key, "providers": providers}).encode()
        machine.replace_atomically(path, lambda f: f.write(kept))
    return providers


def _own_versions(name: str) -> dict[str, str]:
    """The versions a backend with an environment of its own runs on: its pins' distributions,
    this suite's and numpy's, as installed in that environment."""
    entry = registry.builtin()[name]
    dists = ["gpt2-conformance", "numpy", *envs.requirement_names(entry)]
    return dict(sorted(envs.versions(envs.child_python(name), dists).items()))


def _device_name(device: str) -> str:
    """The CPU model or the GPU's name (nvidia-smi), "?" where neither can be read."""
    if device == "gpu":
        try:
            out = subprocess.run(
                ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True, timeout=20
            )
            names = [ln.strip() for ln in out.stdout.splitlines() if ln.strip()]
            return names[0] if out.returncode == 0 and names else "?"
        except (OSError, subprocess.TimeoutExpired):
            return "?"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            model = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "")
    except OSError:
        model = ""
    return model or platform.processor() or platform.machine() or "?"


def environment(checkpoint: str | None = None, device: str = "cpu", modules=()) -> dict:
    """What tells one run from another when reports of many machines are merged: host, device,
    versions of the frameworks `modules` come from, golden data."""
    import numpy

    from gpt2_conformance.golden import data

    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "numpy": numpy.__version__,
        "host": platform.node(),
        "device_name": _device_name(device),
        "versions": _versions(modules),
        "golden_data": data.describe(checkpoint),
    }


def run_in_process(factory, label: str = "", device: str = "cpu", extra_args=()) -> res.SuiteResult:
    """The suite on `factory` in this process; pytest's own output is swallowed."""
    collector = _Collector()
    args = [*SUITE_ARGS, "--gpt2c-device", device, *extra_args]
    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()) as out:
        code = __import__("pytest").main(args, plugins=[InjectedFactory(factory, label), collector])
    error = "" if code in (0, 1) else f"pytest exited with {code}: {last_words(out.getvalue())}"
    return res.SuiteResult(
        label or getattr(factory, "__name__", repr(factory)),
        device,
        spec.SPEC_VERSION,
        res.aggregate(list(collector.outcomes.values())),
        time.perf_counter() - start,
        environment(device=device, modules=[type(factory).__module__, getattr(factory, "__module__", "")]),
        error,
        created=_now(),
    )


def _now() -> str:
    import datetime

    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def run_backend(
    name: str,
    device: str = "cpu",
    test_timeout: float = DEFAULT_TEST_TIMEOUT,
    adapter_spec: str | None = None,
    extra_args=(),
    hang_grace: float = HANG_GRACE,
    checkpoint: str | None = None,
    log_path: str | None = None,
    echo: bool = False,
    parity: bool = False,
    shards: int = 1,
    side_by_side: int = 1,
    progress: Callable[[int, int, str], None] | None = None,
) -> res.SuiteResult:
    """The suite on a backend in child processes (see module docstring). `checkpoint`: the
    GOLDEN clauses use that checkpoint's tables instead of the shipped real data. `parity`: the
    child also computes the run's parity fingerprint after the last clause (result.parity).
    `shards`: the suite split over that many child processes at once (each a share of the tests,
    run/events.py), for a verdict in a fraction of the time on a machine with idle cores.
    `side_by_side`: how many such runs share the machine at once (`run --backend all --jobs N`);
    with the shards, it sizes each child's BLAS/OpenMP thread pools to its share of the cores. The
    children's own output (pytest's, the frameworks' logging) is appended to `log_path` if given,
    and echoed to stderr with `echo`; it never reaches the console otherwise. `progress(done, total,
    doing)`: told as the children's events file grows (tests done of tests collected, over every
    shard, and the clause of a test in flight), for run/progress.py's live lines."""
    target = ["--gpt2c-adapter", adapter_spec] if adapter_spec else ["--gpt2c-backend", name]
    golden = ["--gpt2c-checkpoint", checkpoint] if checkpoint else []
    # -s: the frameworks' own output goes straight to the log file (pytest would drop a passing test's)
    plugins = [a for p in CHILD_PLUGINS for a in ("-p", p)]
    base = [*SUITE_ARGS, "-s", *plugins, "--gpt2c-device", device, *target, *golden, *extra_args]
    start = time.perf_counter()
    hang_grace = min(hang_grace, test_timeout)
    shards = max(1, shards)
    child_vars = machine.thread_pools_for(shards * max(1, side_by_side))
    if not adapter_spec:
        child_vars = {**child_vars, **registry.child_env(name)}  # the backend's own (a cache folder, ...)
    log_lock = threading.Lock()
    with (
        tempfile.TemporaryDirectory(prefix="gpt2c-run-") as run_tmp,
        concurrent.futures.ThreadPoolExecutor(max_workers=shards + 1) as pool,
    ):
        # read while the children run (the installed metadata, the CPU's name): a fifth of a second
        # of a numpy verdict when it was read after the last child had finished
        machine_facts = pool.submit(environment, checkpoint, device, registry.requires(name, adapter_spec))
        # a backend with an environment of its own: its children run on that one's python, and the
        # versions are that environment's (gpt2_conformance.run.envs)
        python = sys.executable if adapter_spec else envs.child_python(name)
        own_versions = pool.submit(_own_versions, name) if python != sys.executable else None
        # the parity fingerprint: computed by whichever shard finishes its tests first
        claim = ["--gpt2c-parity", "--gpt2c-parity-claim", os.path.join(run_tmp, "parity-claimed")] if parity else []
        args = [[*base, "--gpt2c-shard", f"{i}/{shards}", *claim] for i in range(shards)]
        counts = _Counts(shards, progress)
        try:
            passes = list(
                pool.map(
                    lambda i: _passes(
                        args[i], test_timeout, hang_grace, log_path, echo, log_lock, child_vars, python, counts.of(i)
                    ),
                    range(shards),
                )
            )
        except KeyboardInterrupt:
            STOPPING.set()
            raise
    outcomes = {nodeid: o for p in passes for nodeid, o in p.outcomes.items()}
    error = next((p.error for p in passes if p.error), "")
    # the shard that computed the fingerprint; else one that says why it is missing
    sessions = sorted(
        (p.session for p in passes if p.session),
        key=lambda s: 0 if "error" not in s.get("parity", {"error": ""}) else 1 if "parity" in s else 2,
    )
    session = sessions[0] if sessions else None
    result = res.SuiteResult(
        name,
        device,
        spec.SPEC_VERSION,
        res.aggregate(list(outcomes.values())),
        time.perf_counter() - start,
        machine_facts.result(),
        error,
        created=_now(),
    )
    if own_versions is not None:
        result.environment["versions"] = own_versions.result()
        # named by the command that builds it, not by its folder: a report is shared, a path is local
        result.environment["python_environment"] = f"its own ({envs.build_command(name)})"
    described = next((s["implementation"] for s in sessions if s.get("implementation")), None)
    if described:
        result.environment["implementation"] = described
    if parity:
        result.parity = (session or {}).get("parity") or not_computed("the backend did not run")
    return result


class _Counts:
    """Tests done and collected in each shard, summed for the progress callback (None: nobody asks)."""

    def __init__(self, shards: int, progress: Callable[[int, int, str], None] | None):
        self.progress, self.lock = progress, threading.Lock()
        self.shards = [(0, 0, "")] * shards

    def of(self, shard: int) -> Callable[[int, int, str], None] | None:
        if self.progress is None:
            return None

        def told(done: int, total: int, doing: str) -> None:
            with self.lock:
                self.shards[shard] = (done, total, doing)
                doing_now = next((d for _, _, d in self.shards if d), "")
                done_all, total_all = sum(s[0] for s in self.shards), sum(s[1] for s in self.shards)
            assert self.progress is not None
            self.progress(done_all, total_all, doing_now)

        return told


@dataclass
class _Passes:
    outcomes: dict = field(default_factory=dict)  # nodeid -> TestOutcome
    session: dict | None = None
    error: str = ""


def _passes(
    base: list[str],
    test_timeout: float,
    hang_grace: float,
    log_path: str | None,
    echo: bool,
    log_lock: threading.Lock,
    child_vars: dict | None = None,
    python: str | None = None,
    told: Callable[[int, int, str], None] | None = None,
) -> _Passes:
    """One shard: pytest children until every test it collected has a verdict. A child that dies
    in a test (a crash, or a hang the watchdog ends) costs that test a FAIL; the next child runs
    the rest (a crash a forking child survived, run/forking.py, arrives here as that FAIL).
    `child_vars`: thread-pool sizes and the backend's own variables for the children, where the
    environment sets none. `python`: the children's interpreter (default this one). `told(done,
    total, doing)`: this shard's progress, as its events file grows."""
    env = memory.child_env(dict(os.environ, PYTHONUNBUFFERED="1", PYTEST_DISABLE_PLUGIN_AUTOLOAD="1"))
    for name, value in (child_vars or {}).items():
        env.setdefault(name, value)
    out = _Passes()
    clauses: dict[str, str] | None = None  # nodeid -> clause of every test, from the first collection
    with tempfile.TemporaryDirectory(prefix="gpt2c-", ignore_cleanup_errors=True) as tmp:
        env.update(machine.child_temp_env(os.path.join(tmp, "tmp")))  # an adapter's files go with the shard
        for attempt in range(1000):  # each pass finishes >= 1 test or the session, or stops
            if STOPPING.is_set():  # not a crash to run the rest after: the user stopped the run
                out.error = "interrupted"
                break
            events = os.path.join(tmp, f"events-{attempt}.jsonl")
            deselect = [a for nodeid in out.outcomes for a in ("--deselect", nodeid)]
            cmd = [
                python or sys.executable,
                "-m",
                "pytest",
                *base,
                "--gpt2c-results",
                events,
                "--timeout",
                str(test_timeout),
                "-o",
                "timeout_func_only=true",
                *deselect,
            ]
            child_log = os.path.join(tmp, f"output-{attempt}.log")
            earlier = len(out.outcomes)  # judged in the passes before this one

            def grew(events=events, earlier=earlier, clauses=clauses) -> None:
                if told is not None:
                    now = events_file.read(events)
                    collected = clauses or now.collected or {}
                    told(earlier + len(now.done), len(collected), collected.get(now.in_flight or "", ""))

            with open(child_log, "w") as log:  # a file, not a pipe: a chatty child must never block on it
                child = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, text=True, env=env)
                hung = _watch(child, events, test_timeout + hang_grace, grew)
            with open(child_log, errors="replace") as log:
                output = log.read()
            with log_lock:
                if log_path:
                    with open(log_path, "a", encoding="utf-8") as log:
                        log.write(f"--- pytest child, pass {attempt + 1}: {' '.join(cmd)}\n{output}\n")
                if echo:
                    sys.stderr.write(output)
            this = events_file.read(events)
            out.outcomes.update(this.done)
            clauses = this.collected if clauses is None else clauses
            if told is not None:
                told(len(out.outcomes), len(clauses or {}), "")
            out.session = this.session or out.session
            if this.in_flight is not None:
                # it died in a test: that test FAILs and the rest run on; when it was the last, one
                # more pass (every test deselected) ends the session: the implementation and parity
                reason = (
                    hung_message(test_timeout, hang_grace)
                    if hung
                    else events_file.crashed(events_file.death(child.returncode))
                )
                out.outcomes[this.in_flight] = res.TestOutcome(
                    this.in_flight, (clauses or {}).get(this.in_flight, ""), "failed", reason
                )
                continue
            if child.returncode == events_file.FRESH_PROCESS_EXIT and clauses is not None and this.done:
                continue  # a test poisoned the device context (events.POISONED_DEVICE): the rest in a new process
            if not clauses and child.returncode not in (0, 5):  # it never collected the suite: nothing judged
                out.error = f"pytest exited with {child.returncode}: {last_words(output)}"
            elif out.session is None:  # every test judged, then it died finishing the session
                why = "hung" if hung else f"died ({events_file.death(child.returncode)})"
                out.session = {"parity": not_computed(f"the test process {why} while computing it")}
            elif child.returncode not in (0, 1, 5):  # 5: no test left, every one judged in earlier passes
                out.error = f"pytest exited with {child.returncode}: {last_words(output)}"
            break
    return out


def hung_message(test_timeout: float, hang_grace: float) -> str:
    """Why a test the watchdog killed failed: both numbers, as the limit is --timeout and the watchdog
    waits the grace on top of it (pytest-timeout's signal ends a test stuck in Python at the limit,
    with its traceback; one stuck in native code, where no signal reaches, only the watchdog ends)."""
    return (
        f"hung: no result within the {test_timeout:g} s limit per test (--timeout) nor {hang_grace:g} s of grace "
        "after it (stuck where the limit's signal cannot reach, e.g. in native code), process killed"
    )


_EXCEPTION_LINE = re.compile(r"^(E\s+)?([A-Za-z_][\w.]*(Error|Exception|Exit)|ERROR): ")


def last_words(output: str, limit: int = 1500) -> str:
    """Why a child ended, for the report's `error`: the last line that names an exception (pytest's
    `ERROR: ...`, a traceback's last line), else the output's last whole lines within `limit`
    characters; never a line cut in the middle."""
    lines = [line.rstrip() for line in output.strip().splitlines() if line.strip()]
    named = [line.strip() for line in lines if _EXCEPTION_LINE.match(line.strip())]
    if named:
        return named[-1][:limit]
    kept: list[str] = []
    for line in reversed(lines):
        if sum(len(k) + 1 for k in kept) + len(line) > limit:
            break
        kept.insert(0, line)
    return "\n".join(kept) or (lines[-1][-limit:] if lines else "")


def _watch(child: subprocess.Popen, events: str, limit: float, grew: Callable[[], None] | None = None) -> bool:
    """Wait for the child; kill it if the events file shows no progress for `limit` s, end it
    once the run is interrupted (STOPPING). Returns True when it was killed for hanging. `grew`:
    called when the events file has grown (at most twice a second)."""
    last_size, last_change, last_told = -1, time.monotonic(), 0.0
    while True:
        try:
            child.wait(timeout=0.2)  # back as soon as it exits, not at the next tick
            return False
        except subprocess.TimeoutExpired:
            pass
        if STOPPING.is_set():
            child.terminate()
            child.wait()
            return False
        size = os.path.getsize(events) if os.path.exists(events) else 0
        if size != last_size:
            last_size, last_change = size, time.monotonic()
            if grew is not None and last_change - last_told >= 0.5:
                grew()
                last_told = last_change
        elif time.monotonic() - last_change > limit:
            child.kill()
            child.wait()
            return True
