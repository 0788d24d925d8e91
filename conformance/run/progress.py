"""What `run` shows while it works: a verdict takes seconds to minutes per backend (an engine's
compile, an environment's build), and a console that says nothing for minutes looks hung.

Three displays, chosen once per command (`display`):

- on a terminal, a live line per running backend (rich's Live, redrawn in place): tests done of
  tests collected, the time so far, and what it is in: the clause of the test in flight, or the
  step of a build; the scorecards print above it as they come;
- on a pipe or in CI (stdout not a terminal, or TERM=dumb), plain whole lines on stderr, with no
  control characters: a line a minute for each backend still running (its tests done, its time,
  what it is in), and its end once it has had one; an environment's build, step by step. A
  verdict done within the minute adds nothing to its scorecard;
- with `--quiet`, nothing beyond the scorecards and the summary.

The runner tells a display what it reads from the children's events files (run/runner.py
`progress`); nothing here changes a verdict.
"""

from __future__ import annotations

import os
import sys
import threading
import time

HEARTBEAT_S = 60.0  # a plain display's line for each backend still running, this often
STEP_S = 15.0  # and for a build's steps (pip's lines), at most this often


class Display:
    """The silent display (`--quiet`), and what every display is told."""

    def begin(self, name: str) -> None:
        """`name` starts (its children are about to run)."""

    def tests(self, name: str, done: int, total: int, doing: str) -> None:
        """`name` has `done` of `total` tests judged; `doing`: the clause of a test in flight, or ''."""

    def step(self, name: str, doing: str) -> None:
        """`name` is doing something that is not a test (building its environment)."""

    def end(self, name: str, summary: str) -> None:
        """`name` is done; `summary` is its one line (its counts and time)."""

    def close(self) -> None:
        """No more updates (the command prints its summary next)."""

    def __enter__(self) -> Display:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class _Running:
    def __init__(self) -> None:
        self.start = time.monotonic()
        self.done = self.total = 0
        self.doing = ""
        self.said = self.start  # a plain display's last line for it

    def line(self, name: str) -> str:
        counts = f"{self.done}/{self.total} tests" if self.total else "starting"
        doing = f", {self.doing}" if self.doing else ""
        return f"{name}: {counts}, {time.monotonic() - self.start:.0f} s{doing}"


class Plain(Display):
    """Whole lines on a stream (stderr by default): for pipes, CI logs and dumb terminals."""

    def __init__(self, stream=None):
        self.stream = stream if stream is not None else sys.stderr
        self.running: dict[str, _Running] = {}
        self.lock = threading.Lock()

    def _say(self, text: str) -> None:
        self.stream.write(f"gpt2-conformance: {text}\n")
        self.stream.flush()

    def begin(self, name):
        with self.lock:
            self.running[name] = _Running()

    def tests(self, name, done, total, doing):
        self._update(name, doing, done, total)

    def step(self, name, doing):
        with self.lock:
            running = self.running.setdefault(name, _Running())
            running.doing = doing
            now = time.monotonic()
            if now - running.said >= STEP_S or running.said == running.start:
                running.said = now
                self._say(f"{name}: {doing}")

    def _update(self, name: str, doing: str, done: int, total: int) -> None:
        with self.lock:
            running = self.running.setdefault(name, _Running())
            running.done, running.total, running.doing = done, total, doing
            now = time.monotonic()
            if now - running.said >= HEARTBEAT_S:
                running.said = now
                self._say(running.line(name))

    def end(self, name, summary):
        with self.lock:
            running = self.running.pop(name, None)
            if running is not None and running.said != running.start:  # it said it was running: say it ended
                self._say(f"{name}: {summary}")


class Live(Display):
    """A live line per running backend on a terminal (rich), redrawn in place; what is printed to
    stdout meanwhile (the scorecards) goes above it."""

    def __init__(self):
        from rich.console import Console
        from rich.live import Live as RichLive

        self.running: dict[str, _Running] = {}
        self.lock = threading.Lock()
        self.console = Console()
        self.live = RichLive(
            get_renderable=self._render,
            console=self.console,
            refresh_per_second=4,
            transient=True,
            redirect_stdout=True,
        )
        self.live.start()

    def _render(self):
        from rich.text import Text

        with self.lock:
            lines = [f"  {r.line(name)}" for name, r in self.running.items()]
        return Text("\n".join(lines) if lines else "")

    def begin(self, name):
        with self.lock:
            self.running[name] = _Running()

    def tests(self, name, done, total, doing):
        with self.lock:
            running = self.running.setdefault(name, _Running())
            running.done, running.total, running.doing = done, total, doing

    def step(self, name, doing):
        with self.lock:
            self.running.setdefault(name, _Running()).doing = doing

    def end(self, name, summary):
        with self.lock:
            self.running.pop(name, None)

    def close(self):
        self.live.stop()


def display(quiet: bool, stdout=None, environ=None) -> Display:
    """The display for this command: silent with --quiet, live on a terminal (where rich is
    installed), plain lines elsewhere."""
    stdout = stdout if stdout is not None else sys.stdout
    environ = environ if environ is not None else os.environ
    if quiet:
        return Display()
    terminal = hasattr(stdout, "isatty") and stdout.isatty() and environ.get("TERM", "") != "dumb"
    if terminal and not environ.get("CI"):
        try:
            return Live()
        except ImportError:  # rich is a dependency; a broken install still gets whole lines
            pass
    return Plain()
