"""gpt2-conformance upstream NAME [NAME ...] [--out-dir DIR]: for each cause behind a backend's
waivers, a standalone reproduction script and an issue draft for the implementation's tracker,
and an index of every draft with its status.

    reports/upstream/README.md               the index: every draft, reproduces or not
    reports/upstream/<name>/<cause>.py       the reproduction (imports the library and numpy only); not
                                             committed in this repository: it is rendered from
                                             backends/.../upstream/, and the draft shows it
    reports/upstream/<name>/<cause>.md       the issue draft: title, versions, what happens, what
                                             is expected and why, source lines, script, its output,
                                             related tracker threads
    reports/upstream/<name>/status.json      what the index is made from

NAME is a built-in or registered backend, or an adapter "module:factory" whose WAIVERS names a
waiver file; its causes are `upstream/causes.toml` beside that file (gpt2_conformance.upstream.causes).
Every script runs in a fresh interpreter (--jobs at a time). Exit status: 0 every script ran
(reproducing or not), 1 a script failed to run or a draft no longer reproduces (its waivers are
stale), 2 bad input (an unknown name, a backend without a waiver file, a bad causes file).
Nothing is ever filed: the drafts are for a person to read, check and file.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import sys
from importlib.metadata import PackageNotFoundError, version

from gpt2_conformance import registry
from gpt2_conformance.api.machine import cores
from gpt2_conformance.upstream import causes as cz

GPT2_MODEL_PY = "https://github.com/openai/gpt-2/blob/9b63575ef42771a015060c964af2c3da4cf7c8ab/src/model.py"
DEFAULT_OUT = os.path.join("reports", "upstream")


def add_parser(sub) -> None:
    parser = sub.add_parser(
        "upstream",
        help="write a reproduction script and an issue draft for each cause "
        "behind a backend's waivers, and an index of them",
        description=__doc__.split("\n\n")[0],
    )
    parser.add_argument(
        "names",
        nargs="*",
        metavar="NAME",
        help="backend names or module:factory adapters (default: every third-party backend)",
    )
    parser.add_argument("--out-dir", default=DEFAULT_OUT, help=f"where to write (default: ./{DEFAULT_OUT})")
    parser.add_argument("--jobs", type=int, default=0, help="scripts run at a time (default: the machine's cores)")
    parser.add_argument("--timeout", type=float, default=cz.TIMEOUT_S, help="seconds per script (default %(default)s)")


def _error(message: str) -> int:
    print(f"gpt2-conformance upstream: error: {message}", file=sys.stderr)
    return 2


def _resolve(name: str):
    """(Causes or None, waiver file) for a name or adapter spec; raises LookupError for bad input."""
    factory = None
    if registry.entry(name) is None:
        if ":" not in name and name not in registry.available():
            raise LookupError(
                f"unknown backend {name!r}; known: {', '.join(registry.judged())} "
                "(or an adapter module:factory with a WAIVERS file)"
            )
        try:
            factory = registry.find(name)  # only its WAIVERS is read: it need not run here
        except (ImportError, ValueError) as exc:
            raise LookupError(str(exc)) from None
    waivers_path, path = cz.find(name, factory)
    if not waivers_path:
        raise LookupError(f"{name} has no waiver file, so no waived deviation to report")
    return (cz.load(name, path, waivers_path) if path else None), waivers_path


def run(args) -> int:
    if args.jobs < 0:
        return _error(f"--jobs {args.jobs}: must be >= 1 (0: the machine's cores)")
    if not args.timeout > 0:
        return _error(f"--timeout {args.timeout}: must be > 0 seconds")
    names = args.names or [n for n in registry.judged() if registry.waivers_file(n)]
    resolved = []
    for name in names:
        try:
            resolved.append((name, *_resolve(name)))
        except (LookupError, cz.CausesFileError, ValueError) as exc:
            return _error(str(exc).splitlines()[0])
    status = 0
    for name, causes, waivers_path in resolved:
        if causes is None:
            print(
                f"{name}: skipped, no reproductions: no upstream/{cz.CAUSES_FILE} beside its waiver file "
                f"{os.path.basename(waivers_path)}",
                file=sys.stderr,
            )
            continue
        status = max(status, write_backend(causes, args.out_dir, args.jobs or cores(), args.timeout))
    write_index(args.out_dir)
    print(f"index: {os.path.join(args.out_dir, 'README.md')}")
    return status


def write_backend(causes: cz.Causes, out_dir: str, jobs: int, timeout: float) -> int:
    folder = os.path.join(out_dir, _slug(causes.name))
    items = cz.write_scripts(causes, folder)
    lacking, unbuilt = registry.missing_framework(causes.name), registry.unbuilt_environment(causes.name)
    if lacking or unbuilt:
        note = unbuilt or f"{lacking} is not installed"
        outcomes = [cz.Outcome(c, cz.NOT_RUN, note=note) for c, _ in items]
    else:
        from gpt2_conformance.run import envs

        outcomes = cz.run_all(items, jobs, timeout, python=envs.child_python(causes.name))
    fixed = cz.fixed_clauses(outcomes)
    for outcome in outcomes:
        with open(os.path.join(folder, f"{outcome.cause.id}.md"), "w", encoding="utf-8") as f:
            f.write(draft(causes, outcome))
        print(f"{causes.name}/{outcome.cause.id}: {outcome.status}" + (f" ({outcome.note})" if outcome.note else ""))
    record = {
        "backend": causes.name,
        "created": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "versions": _versions(causes.causes[0].versions if causes.causes else ()),
        "drafts": [
            {
                "cause": o.cause.id,
                "title": o.cause.title,
                "clauses": list(o.cause.clauses),
                "status": o.status,
                "returncode": o.returncode,
                "note": o.note,
                "tracker": o.cause.tracker,
            }
            for o in outcomes
        ],
        "not_reported": [{"clauses": list(c), "reason": r} for c, r in causes.not_reported],
        "uncovered": causes.uncovered(),
        "stale_waivers": sorted(fixed),
    }
    with open(os.path.join(folder, "status.json"), "w", encoding="utf-8") as f:
        json.dump(record, f, indent=1)
        f.write("\n")
    for clause in causes.uncovered():
        print(
            f"{causes.name}: waiver {clause} has no reproduction yet (add a cause to upstream/{cz.CAUSES_FILE})",
            file=sys.stderr,
        )
    for clause, why in fixed.items():
        print(f"{causes.name}: STALE WAIVER: {clause}: {why}", file=sys.stderr)
    broken = any(o.status == cz.BROKEN for o in outcomes)
    return 1 if broken or fixed else 0


def _slug(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_" else "-" for ch in name)


def _versions(distributions) -> dict:
    out = {}
    for dist in distributions:
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            out[dist] = "not installed"
    return out


def _clean(text: str) -> str:
    """Script output without this machine's folders (a draft is read elsewhere)."""
    for own, placeholder in ((sys.prefix, "<venv>"), (os.getcwd(), "."), (os.path.expanduser("~"), "~")):
        if own and own != "/":
            text = text.replace(own, placeholder)
    return text.rstrip()


def draft(causes: cz.Causes, outcome: cz.Outcome) -> str:
    """The issue draft for one cause, in a bug tracker's usual shape."""
    cause, text = outcome.cause, outcome.cause.text
    versions = _versions(cause.versions)
    lines = [
        f"# {cause.title}",
        "",
        f"<!-- Draft for {cause.tracker or 'the project tracker'}, written by `gpt2-conformance upstream "
        f"{causes.name}`. Not filed: read it, run the script, then file it yourself. -->",
        "",
    ]
    if text.get("same_as"):
        lines += [f"> Same root cause as {text['same_as']}: file one of the two, and mention the other.", ""]
    lines += ["## System info", ""]
    lines += [f"- {dist}: {v}" for dist, v in versions.items()]
    lines += [
        f"- Python: {platform.python_version()}",
        f"- OS: {platform.system()} {platform.release()} ({platform.machine()})",
        "- Device: CPU",
        "",
    ]
    lines += ["## What happens", "", text.get("happens", "").strip(), ""]
    lines += ["## What I expected, and why", "", text.get("expected", "").strip(), ""]
    if text.get("source"):
        lines += ["## Where in the source", ""] + [f"- {s}" for s in text["source"]] + [""]
    lines += [
        "## Reproduction",
        "",
        "Standalone: it needs only the packages listed above; it builds the model from "
        "an explicit config with random weights (nothing is downloaded). It exits 1 while the behaviour "
        "reproduces and 0 once it is fixed." + (f" {text['size'].strip()}" if text.get("size") else ""),
        "",
        "```python",
        cause.render().rstrip(),
        "```",
        "",
    ]
    lines += ["## Output", ""]
    if outcome.status == cz.NOT_RUN:
        lines += [f"Not run here: {outcome.note}.", ""]
    else:
        lines += [
            "```",
            _clean(outcome.stdout) or "(no output)",
            "```",
            "",
            f"Exit status: {outcome.returncode if outcome.returncode is not None else outcome.note}"
            f" ({outcome.status}" + (f": {_clean(outcome.note)}" if outcome.note else "") + ").",
            "",
        ]
    lines += ["## Related issues and pull requests", ""]
    if text.get("related"):
        lines += [f"- {r}" for r in text["related"]]
    else:
        lines.append("None found.")
    if text.get("searched"):
        lines += ["", f"(Searched the tracker for: {text['searched'].strip()}.)"]
    lines += [
        "",
        "---",
        "",
        f"Found by the gpt2-conformance suite (clause {', '.join(cause.clauses)}; "
        f"GPT-2 reference: openai/gpt-2 [src/model.py]({GPT2_MODEL_PY})).",
        "",
    ]
    return "\n".join(lines)


def write_index(out_dir: str) -> None:
    """out_dir/README.md from every backend folder's status.json in out_dir."""
    records = []
    if os.path.isdir(out_dir):
        for folder in sorted(os.listdir(out_dir)):
            path = os.path.join(out_dir, folder, "status.json")
            if os.path.isfile(path):
                with open(path, encoding="utf-8") as f:
                    records.append((folder, json.load(f)))
    lines = [
        "# Upstream reports: drafts for the implementations' trackers",
        "",
        "One draft per cause behind a third-party backend's waivers, each with a standalone reproduction "
        "script (the implementation's library and numpy only) that exits 1 while the behaviour reproduces: "
        "the draft shows it, and the command writes it beside the draft as <cause>.py. "
        "Regenerate: `gpt2-conformance upstream [NAME ...]`. Nothing here has been filed.",
        "",
        "| Backend | Draft | Waived clauses | Tracker | Status |",
        "|---|---|---|---|---|",
    ]
    for folder, rec in records:
        for d in rec["drafts"]:
            status = d["status"] + (f" ({d['note']})" if d.get("note") and d["status"] != cz.REPRODUCES else "")
            lines.append(
                f"| {rec['backend']} | [{d['title'].replace('|', '/')}]({folder}/{d['cause']}.md) "
                f"| {', '.join(d['clauses'])} | {d['tracker']} | {status} |"
            )
    not_reported = [(rec["backend"], n) for _, rec in records for n in rec.get("not_reported", [])]
    if not_reported:
        lines += [
            "",
            "## Waived, with nothing to report upstream",
            "",
            "| Backend | Waived clauses | Why no draft |",
            "|---|---|---|",
        ]
        lines += [f"| {b} | {', '.join(n['clauses'])} | {n['reason'].replace('|', '/')} |" for b, n in not_reported]
    uncovered = [(rec["backend"], c) for _, rec in records for c in rec.get("uncovered", [])]
    stale = [(rec["backend"], c) for _, rec in records for c in rec.get("stale_waivers", [])]
    if uncovered:
        lines += ["", "## Waivers without a reproduction yet", ""] + [f"- {b}: {c}" for b, c in uncovered]
    if stale:
        lines += [
            "",
            "## Stale waivers",
            "",
            "Their reproductions no longer reproduce: the waivers (and the drafts) should go.",
        ]
        lines += [f"- {b}: {c}" for b, c in stale]
    dated = sorted({rec["created"][:10] for _, rec in records})
    if dated:
        lines += ["", f"Generated {', '.join(dated)}; versions in each draft's System info."]
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "README.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
