"""The parent side of a bench run: the workers, and the rounds in which they take turns.

Every participant (one implementation in one mode, or a workload's streaming reference) times
one block per round (timing.block); the order of the turns is shuffled anew every round, so no
implementation always follows the same one. A round of a few participants lasts well under a
second, and the machine's memory speed drifts by tens of percent over seconds on the shared VMs
this runs on: two blocks of the same round meet the same machine, which is why ranking.py
compares implementations round by round, never by medians taken minutes apart.

Every side runs in several worker processes (cohorts): round r is timed by each side's process
r % P, so the rows of cohort c meet each other only in their own processes. Two processes of the
same code differ by a few percent and more (where their memory landed, their threads' places), and
a comparison made in one pair of processes would call that difference significant; ranking.py
asks a difference to hold in every cohort.

Only the parent talks to the workers, one at a time: a worker waits on its pipe (no CPU) while
another one is timed.
"""

from __future__ import annotations

import json
import os
import random
import selectors
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpt2_conformance.bench.workloads import Workload

# glibc serves large blocks with mmap and unmaps them on free, by thresholds that move with the
# process's history, and a thread other than the main one allocates from arenas it unmaps when
# empty: a framework returning a fresh [B, T, d] output may page-fault it in on every call, or
# not, depending on what ran before. Fixed thresholds and one arena put every worker in the same
# allocator state (other C libraries ignore these variables).
MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": "4294967296", "MALLOC_TRIM_THRESHOLD_": "68719476736", "MALLOC_ARENA_MAX": "1"}
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class WorkerDied(RuntimeError):
    """A worker exited, hung past its timeout or broke the protocol: every row it had is an error."""


def _child_pythonpath() -> str:
    """This process's PYTHONPATH entries made absolute, then its working directory, so that a
    user's `module:factory` is found in the worker as it is found here."""
    entries = [os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return os.pathsep.join(dict.fromkeys([*entries, os.getcwd()]))


class WorkerProcess:
    """A worker (worker.py) and its pipes: send() one command, receive() its reply."""

    def __init__(self, label: str, python: str, log_dir: str, timeout: float):
        self.label, self.timeout, self.cpu_s = label, timeout, 0.0
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in label)
        self.log_path = os.path.join(log_dir, f"bench-{safe}.log")
        # the temp directory stays the user's: torch.compile keeps its compiled kernels there, and a
        # fresh one per worker would compile them again in every worker of every run
        env = {
            **os.environ,
            "PYTHONUNBUFFERED": "1",
            "TF_CPP_MIN_LOG_LEVEL": "3",
            "PYTHONPATH": _child_pythonpath(),
            **MALLOC_ENV,
        }
        self._log = open(self.log_path, "w")
        try:
            self.proc = subprocess.Popen(
                [python, "-m", "gpt2_conformance.bench.worker"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._log,
                env=env,
                cwd=REPO_ROOT,
                text=True,
            )
        except OSError as exc:
            self._log.close()
            raise WorkerDied(f"{label}: cannot start {python}: {exc}") from exc
        assert self.proc.stdin is not None and self.proc.stdout is not None  # both are PIPE above
        self._stdin, self._stdout = self.proc.stdin, self.proc.stdout
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._stdout, selectors.EVENT_READ)

    def send(self, op: str, **args) -> None:
        try:
            self._stdin.write(json.dumps({"op": op, **args}) + "\n")
            self._stdin.flush()
        except OSError:
            raise WorkerDied(self._death()) from None

    def receive(self) -> dict:
        if not self._selector.select(self.timeout):
            self.proc.kill()
            raise WorkerDied(f"{self.label}: no answer within {self.timeout:.0f} s (log {self.log_path})")
        line = self._stdout.readline()
        if not line:
            raise WorkerDied(self._death())
        try:
            reply = json.loads(line)
        except json.JSONDecodeError:
            raise WorkerDied(f"{self.label}: broke the protocol with {line[:200]!r} (log {self.log_path})") from None
        self.cpu_s = reply.get("cpu_s", self.cpu_s)
        return reply

    def _death(self) -> str:
        code: int | str
        try:
            code = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = "hung"
        self._log.flush()
        with open(self.log_path, errors="replace") as f:
            tail = f.read()[-400:].strip()
        how = f"signal {-code}" if isinstance(code, int) and code < 0 else f"exit {code}"
        return f"{self.label}: the worker died ({how}; log {self.log_path}): {tail}"

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.send("quit")
                self.proc.wait(timeout=30)
            except (WorkerDied, subprocess.TimeoutExpired):
                self.proc.kill()
        self._log.close()


@dataclass
class Side:
    """One implementation's part of the run, in one worker process per cohort: a backend (or the
    limit), under a label of its own (the gate runs the same backend on both sides, as `new` and
    `base`)."""

    label: str
    backend: str
    modes: list[str] | None  # None: every mode the backend offers
    one_mode: bool = False  # per workload only the first of `modes` that times it (a default mode)
    python: str = sys.executable
    workers: list[WorkerProcess] = field(default_factory=list)
    info: dict = field(default_factory=dict)
    error: str = ""

    @property
    def live(self) -> bool:
        return bool(self.workers) and not self.error and not self.info.get("skipped")


@dataclass
class Row:
    """One participant at one workload: its blocks, round by round (None: no block that round)."""

    side: Side
    mode: str
    workload: Workload
    key: str
    prep: dict
    blocks: list = field(default_factory=list)
    error: str = ""

    @property
    def name(self) -> str:
        return f"{self.side.label} {self.mode}"


def _everyone(sides: list[Side], op: str, args) -> dict[str, list[dict]]:
    """Send `op` (with args(side)) to every live side's every worker first, then read each reply:
    setup is not timed, so the workers import and compile side by side. {label: replies, one per
    cohort} of the sides whose workers all replied without an error; the others get side.error."""
    asked = []
    for side in (s for s in sides if s.live):
        try:
            for worker in side.workers:
                worker.send(op, **args(side))
            asked.append(side)
        except WorkerDied as exc:
            side.error = str(exc)
    replies: dict[str, list[dict]] = {}
    for side in asked:
        try:
            got = [worker.receive() for worker in side.workers]
        except WorkerDied as exc:
            side.error = str(exc)
            continue
        failed = next((r for r in got if r.get("error")), None)
        if failed:
            side.error = f"{side.label}: {op}: {failed['error']}"
        else:
            replies[side.label] = got
    return replies


def start(sides: list[Side], device: str, log_dir: str, timeout: float, cohorts: int, say=print) -> None:
    """Start every side's workers, one per cohort, and greet them (each imports its backend then).
    A side started again (the next size) starts afresh."""
    for side in sides:
        side.error, side.info = "", {}
        try:
            side.workers = [
                WorkerProcess(f"{side.label} {c}" if cohorts > 1 else side.label, side.python, log_dir, timeout)
                for c in range(cohorts)
            ]
        except WorkerDied as exc:
            side.error = str(exc)
    replies = _everyone(sides, "hello", lambda s: {"backend": s.backend, "device": device})
    for side in sides:
        side.info = replies.get(side.label, [{}])[0]
        if side.info.get("skipped"):
            say(f"  {side.label:16s} skipped: {side.info['skipped']}")


def prepare(sides: list[Side], w, say=print) -> list[Row]:
    """Each live side's rows at workload w, each call run once in every cohort; a row that failed
    in any cohort is an error."""
    replies = _everyone(
        sides, "prepare", lambda s: {"workload": w.as_dict(), "modes": s.modes or list(s.info["modes"])}
    )
    rows = []
    for side in (s for s in sides if s.label in replies):
        cohorts = replies[side.label]
        for i, prep in enumerate(cohorts[0]["rows"]):  # in the order of `modes`
            if prep.get("skipped"):
                continue
            error = next((c["rows"][i]["error"] for c in cohorts if c["rows"][i].get("error")), "")
            rows.append(Row(side, prep["mode"], w, prep["key"], prep, error=error))
            if error:
                say(f"  {rows[-1].name:24s} {w.group}: {error}")
            if side.one_mode:
                break
    return rows


def alternate(rows: list[Row], rounds: int, seconds: float, lead_in: float, say=print) -> None:
    """`rounds` rounds of one block per live row, by the sides' workers of cohort r % cohorts, in
    a shuffled order each round (seeded: a run is repeatable in its order). A row whose block
    fails becomes an error and leaves the rounds; a worker that dies takes its side's rows."""
    order = random.Random(0)
    for r in range(rounds):
        live = [row for row in rows if not row.error]
        order.shuffle(live)
        for row in live:
            reply = None
            if not row.side.error:
                worker = row.side.workers[r % len(row.side.workers)]
                try:
                    worker.send("time", key=row.key, seconds=seconds, lead_in=lead_in)
                    reply = worker.receive()
                except WorkerDied as exc:
                    row.side.error = str(exc)
            if reply is None or reply.get("error"):
                # no reply: the side failed (before this round or in it) and its error is the row's
                row.error = row.side.error if reply is None else row.side.error or reply["error"]
                say(f"  {row.name:24s} {row.workload.group}: {row.error}")
                continue
            row.blocks += [None] * (r - len(row.blocks)) + [reply]


def own_cpu_seconds(sides: list[Side]) -> float:
    """CPU seconds of this process and of the workers (as of their last replies)."""
    return time.process_time() + sum(w.cpu_s for s in sides for w in s.workers)


def stop(sides: list[Side]) -> None:
    for side in sides:
        for worker in side.workers:
            worker.close()
