"""Whose failure is it? A test's exception becomes the implementation's FAIL (an assertion of
the suite, or an exception the adapter raised) or the suite's own ERROR (its data, its code, a
call it should not have made), with a one-line message for the scorecard."""

from __future__ import annotations

import os
import re
import traceback

from gpt2_conformance.results import SUITE_ERROR_PREFIX
from gpt2_conformance.runtime.guard import SuiteError, call_of, malformed_answers, raised_by_adapter

_ANSI = re.compile(r"\x1b\[[0-9;]*m")  # Keras colours its error messages
_FRAMEWORK_NOISE = ("Traceback", 'File "', "Stack trace", "Exception encountered when calling")


def first_line(exc: BaseException, limit: int | None = 500) -> str:
    """The exception's first meaningful line: frameworks put multi-kilobyte stack traces in
    their messages (TensorFlow), which belong in the log, not in a one-line verdict."""
    lines = [ln.strip() for ln in _ANSI.sub("", str(exc)).splitlines() if ln.strip()]
    if lines and lines[0].startswith("Exception encountered when calling"):  # Keras: the layer, then the cause
        return " ".join(lines[:2])[:limit]
    meaningful = [ln for ln in lines if not ln.startswith(_FRAMEWORK_NOISE)]
    return (meaningful or lines or [""])[0][:limit]


def _shortened(line: str, limit: int = 500) -> str:
    """At most `limit` characters, keeping the call the line ends with (` [embed(...)]`)."""
    if len(line) <= limit:
        return line
    cut = line.rfind(" [")
    tail = line[cut:] if cut > 0 and len(line) - cut < limit // 2 else ""
    return line[: limit - len(tail) - 4] + " ..." + tail


def _where(exc: BaseException) -> str:
    frame = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
    return f" at {os.path.basename(frame.filename)}:{frame.lineno}" if frame else ""


def _is_verdict(exc: BaseException) -> bool:
    """An assertion of the suite (or pytest.fail, a pytest-timeout, hypothesis finding the
    implementation flaky): the implementation's result, judged."""
    import hypothesis.errors

    return isinstance(exc, (AssertionError, hypothesis.errors.Flaky)) or type(exc).__name__ == "Failed"


def _first(excinfo) -> BaseException:
    exc = excinfo.value
    if isinstance(exc, BaseExceptionGroup) and exc.exceptions:  # hypothesis: several distinct failures
        exc = exc.exceptions[0]
    return exc


def blamed_on_answer(excinfo) -> str | None:
    """The one-line FAIL message when the suite's own code raised after the adapter answered in a
    form the protocol does not allow (runtime/guard.py records those): that answer is the
    verdict, not the suite's failure. None otherwise."""
    exc = _first(excinfo)
    if isinstance(exc, SuiteError) or raised_by_adapter(exc) or _is_verdict(exc):
        return None
    malformed = malformed_answers()
    return _shortened(malformed[0]) if malformed else None


def classify(excinfo) -> tuple[str, str]:
    """("failed" | "error", one-line message) for a test's exception: "failed" when the
    implementation is judged (an assertion, an exception the adapter raised, or the suite's code
    tripping over an answer the adapter gave in the wrong form: runtime/guard.py), "error" when
    the suite itself failed (its data, its code, a call it should not have made)."""
    exc = _first(excinfo)
    if not isinstance(exc, SuiteError):
        method = raised_by_adapter(exc)
        if method:
            return "failed", f"adapter raised {type(exc).__name__}{_where(exc)}: {first_line(exc)} [{call_of(exc)}]"
        if _is_verdict(exc):
            return "failed", _shortened(first_line(exc, limit=None))
        answer = blamed_on_answer(excinfo)
        if answer:
            return "failed", answer
    return (
        "error",
        f"{SUITE_ERROR_PREFIX}{type(exc).__name__}{_where(exc)}: {first_line(exc)} (the suite's own "
        "failure, not the implementation's)",
    )
