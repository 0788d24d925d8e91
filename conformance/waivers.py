"""Expected deviations of a third-party implementation, kept by whoever adopts the suite
(like array-api-tests' xfail files): one TOML file per implementation.

    implementation = "transformers GPT2LMHeadModel"
    [[waiver]]
    clause = "BOUNDS-MESSAGE"
    reason = "nn.Embedding's IndexError says 'index out of range in self', not the value"
    link = "https://github.com/pytorch/pytorch/issues/NNNN"   # tracker issue or source line

A waived clause that fails shows as "DEVIATION (WAIVED)" and does not fail the gate; a waiver
whose clause no longer fails is reported as stale, so the file cannot rot silently.
"""

from __future__ import annotations

import difflib
import tomllib
from dataclasses import dataclass

from gpt2_conformance import results as res
from gpt2_conformance import spec


class WaiverFileError(ValueError):
    """A waiver file that cannot be used; the message names the file and the entry."""


@dataclass(frozen=True)
class Waiver:
    clause: str
    reason: str
    link: str


FILE_KEYS = ("implementation", "waiver")  # the top level: a name, and the [[waiver]] tables
WAIVER_KEYS = ("clause", "reason", "link")  # each [[waiver]]


def load(path: str) -> list[Waiver]:
    """The file's waivers. A key the format does not have is an error naming it: a mistyped one
    ([[waivers]], `clasue`) would otherwise be read as no waiver at all, and the deviation it was
    meant for would fail as if the file did not exist."""
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except OSError as exc:
        raise WaiverFileError(
            f"waiver file {path}: cannot be read ({exc.strerror or exc}); "
            "give the path of a TOML file of [[waiver]] tables"
        ) from None
    except tomllib.TOMLDecodeError as exc:
        raise WaiverFileError(f"waiver file {path}: not valid TOML ({exc})") from None
    _known_keys(f"waiver file {path}", data, FILE_KEYS)
    entries = data.get("waiver", [])
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise WaiverFileError(f"waiver file {path}: `waiver` must be a list of tables, each written [[waiver]]")
    waivers = []
    for i, entry in enumerate(entries):
        where = f"waiver file {path}, entry {i + 1}"
        _known_keys(where, entry, WAIVER_KEYS)
        missing = [k for k in WAIVER_KEYS if not str(entry.get(k, "")).strip()]
        if missing:
            raise WaiverFileError(f"{where}: {', '.join(missing)} missing (every waiver needs clause, reason, link)")
        if entry["clause"] not in spec.BY_ID:
            close = difflib.get_close_matches(str(entry["clause"]), spec.BY_ID, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else " (the clause IDs are in SPEC.md)"
            raise WaiverFileError(f"{where}: unknown clause {entry['clause']!r}{hint}")
        if not entry["link"].startswith("https://"):
            raise WaiverFileError(f"{where}: link {entry['link']!r} must be an https:// tracker issue or source line")
        waivers.append(Waiver(entry["clause"], entry["reason"], entry["link"]))
    return waivers


RULE = "a waiver file holds `implementation` and [[waiver]] tables, each with clause, reason and link"


def _known_keys(where: str, table: dict, known: tuple[str, ...]) -> None:
    for key, value in table.items():
        if key in known:
            continue
        tables = isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)
        shown = f"[[{key}]]" if tables else f"[{key}]" if isinstance(value, dict) else f"key {key!r}"
        close = difflib.get_close_matches(key, known, n=1)
        hint = (
            ""
            if not close
            else f"; did you mean [[{close[0]}]]?"
            if close[0] == "waiver"
            else f"; did you mean {close[0]!r}?"
        )
        raise WaiverFileError(f"{where}: unknown {shown} ({RULE}){hint}")


def clauses(waivers: list[Waiver]) -> list[str]:
    """The waived clause IDs, sorted, each once."""
    return sorted({w.clause for w in waivers})


def first_drawn_args(waivers: list[Waiver]) -> list[str]:
    """The suite child's arguments that report each waived clause's failing examples as first
    drawn (runtime/hooks.py pytest_runtest_call): the waiver names the deviation already."""
    return [arg for clause in clauses(waivers) for arg in ("--gpt2c-first-drawn", clause)]


def apply(result: res.SuiteResult, waivers: list[Waiver], fixed: dict[str, str] | None = None) -> res.SuiteResult:
    """FAIL -> WAIVED for waived clauses; waivers whose clause passed become stale (one not judged
    here, NOT CLAIMED, SKIPPED or a suite ERROR, is neither: as the pytest route). `fixed`
    (clause -> why, from gpt2_conformance.upstream.causes.fixed_clauses) names waived clauses whose
    upstream reproduction no longer reproduces: their waivers are stale too, even where the
    clause still failed here (the library says it is fixed; the waiver needs a look)."""
    by_clause = {w.clause: w for w in waivers}
    fixed = fixed or {}
    for c in result.clauses:
        waiver = by_clause.get(c.clause.id)
        if waiver is None:
            continue
        if c.status == res.FAIL:
            c.status, c.message = res.WAIVED, f"{c.message} [waived: {waiver.reason} {waiver.link}]"
            c.waiver = {"reason": waiver.reason, "link": waiver.link}
            if c.clause.id in fixed:
                result.stale_waivers.append(f"{c.clause.id} is waived ({waiver.link}) but {fixed[c.clause.id]}")
        elif c.status == res.PASS:
            result.stale_waivers.append(f"{c.clause.id} is waived ({waiver.link}) but did not fail ({c.status})")
    return result
