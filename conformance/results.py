"""Test outcomes rolled up into clause verdicts: the data every report is written from."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from gpt2_conformance import spec

PASS, FAIL, NOT_CLAIMED, SKIPPED = "PASS", "FAIL", "NOT CLAIMED", "SKIPPED"
WAIVED = "DEVIATION (WAIVED)"  # a failure listed in the implementation's waiver file
ERROR = "ERROR"  # the suite itself could not judge the clause: never counted against the adapter
STATUSES = (PASS, FAIL, WAIVED, NOT_CLAIMED, SKIPPED, ERROR)
NOT_CLAIMED_PREFIX = "not claimed: "  # skip reasons for missing capabilities
UNAVAILABLE_PREFIX = "unavailable: "  # skip reasons for the environment (no GPU, ...)
SUITE_ERROR_PREFIX = "suite error: "  # a failure of the suite's own (missing data, a suite bug)
UNKNOWN_CASE_PREFIX = "gpt2-conformance: --gpt2c-case "  # the child's refusal of a --case it did not collect
REPORT_FORMAT = "gpt2-conformance-report/2"  # the JSON layout below; `merge` checks it

# Exit codes of `run` (and `golden`): one meaning each, so a CI gate can tell them apart
EXIT_PASS, EXIT_FAIL, EXIT_USAGE, EXIT_NOTHING_CHECKED, EXIT_SUITE_ERROR = 0, 1, 2, 3, 4


@dataclass
class TestOutcome:
    nodeid: str
    clause: str
    outcome: str  # "passed" | "failed" | "skipped" | "error" (the suite's own failure)
    message: str = ""
    duration: float = 0.0
    repro: str = ""  # a failed test: the command line that replays it alone (run --case)
    observed: str = ""  # a BOUNDS probe: what the implementation did with its bad input (runtime/observe.py)

    @property
    def status(self) -> str:
        if self.outcome == "passed":
            return PASS
        if self.outcome == "skipped":
            return NOT_CLAIMED if self.message.startswith(NOT_CLAIMED_PREFIX) else SKIPPED
        if self.outcome == "error":
            return ERROR
        return FAIL


@dataclass
class ClauseResult:
    clause: spec.Clause
    status: str
    message: str
    tests: list[TestOutcome] = field(default_factory=list)
    waiver: dict = field(default_factory=dict)  # {"reason", "link"} when a waiver applies

    @property
    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for t in self.tests:
            out[t.status] = out.get(t.status, 0) + 1
        return out


@dataclass
class SuiteResult:
    backend: str
    device: str
    spec_version: str
    clauses: list[ClauseResult]
    duration: float
    environment: dict = field(default_factory=dict)
    error: str = ""  # the backend could not be run at all
    stale_waivers: list[str] = field(default_factory=list)
    parity: dict = field(default_factory=dict)  # gpt2_conformance.run.parity fingerprints, when computed
    created: str = ""  # ISO 8601 UTC time the run finished
    log_path: str = ""  # where the run's own output went, for the console (reports name the file only)

    def by_status(self) -> dict[str, int]:
        out = dict.fromkeys(STATUSES, 0)
        for c in self.clauses:
            out[c.status] += 1
        return out

    def failed(self) -> list[str]:
        return [c.clause.id for c in self.clauses if c.status == FAIL]

    def errors(self) -> list[str]:
        return [c.clause.id for c in self.clauses if c.status == ERROR]

    @property
    def exit_code(self) -> int:
        """0: every claimed clause passed (a waived deviation does not fail the gate); 1: a
        clause failed, a waiver is stale (its clause passed), or the backend did not run; 4: no
        clause failed, but the suite could not judge some (ERROR: its own data or code failed, not
        the implementation); 3: nothing was checked (every clause not claimed or skipped)."""
        counts = self.by_status()
        if self.error or counts[FAIL] or self.stale_waivers:  # a stale waiver: the file is out of date
            return EXIT_FAIL
        if counts[ERROR]:
            return EXIT_SUITE_ERROR
        return EXIT_PASS if counts[PASS] or counts[WAIVED] else EXIT_NOTHING_CHECKED

    def to_dict(self) -> dict:
        return {
            "format": REPORT_FORMAT,
            "backend": self.backend,
            "device": self.device,
            "spec_version": self.spec_version,
            "created": self.created,
            "duration_s": round(self.duration, 3),
            "environment": self.environment,
            "error": self.error,
            "exit_code": self.exit_code,
            "summary": self.by_status(),
            "stale_waivers": self.stale_waivers,
            "parity": self.parity,
            "clauses": [
                {
                    "id": c.clause.id,
                    "group": c.clause.group,
                    "title": c.clause.title,
                    "status": c.status,
                    "message": c.message,
                    "waiver": c.waiver,
                    "tests": [_test_dict(t) for t in c.tests],
                }
                for c in self.clauses
            ],
        }


def from_dict(data: dict) -> SuiteResult:
    """A SuiteResult read back from its JSON report (to_dict): what `run --report-dir` wrote, for
    the commands and tests that read a run instead of running the suite again."""
    if data.get("format") != REPORT_FORMAT:
        raise ValueError(f"not a conformance report of format {REPORT_FORMAT!r}: format {data.get('format')!r}")
    clauses = []
    for c in data["clauses"]:
        tests = [
            TestOutcome(
                t["nodeid"],
                t["clause"],
                t["outcome"],
                t.get("message", ""),
                t.get("duration", 0.0),
                t.get("repro", ""),
                t.get("observed", ""),
            )
            for t in c["tests"]
        ]
        clauses.append(ClauseResult(spec.clause(c["id"]), c["status"], c["message"], tests, c.get("waiver") or {}))
    return SuiteResult(
        data["backend"],
        data["device"],
        data["spec_version"],
        clauses,
        data["duration_s"],
        data.get("environment", {}),
        data.get("error", ""),
        data.get("stale_waivers", []),
        data.get("parity", {}),
        data.get("created", ""),
    )


def _test_dict(t: TestOutcome) -> dict:
    out = asdict(t) | {"status": t.status}
    for optional in ("repro", "observed"):
        if not out[optional]:
            del out[optional]
    return out


def combined_exit_code(codes: list[int]) -> int:
    """One exit code for several runs (`run --backend all`, `merge`): 1 if any failed or none
    ran, else 4 if any could not be judged, else 3 if every one checked nothing, else 0."""
    if EXIT_FAIL in codes or not codes:
        return EXIT_FAIL
    if EXIT_SUITE_ERROR in codes:
        return EXIT_SUITE_ERROR
    return EXIT_NOTHING_CHECKED if all(c == EXIT_NOTHING_CHECKED for c in codes) else EXIT_PASS


def aggregate(outcomes: list[TestOutcome]) -> list[ClauseResult]:
    """One verdict per clause, in spec order: FAIL if any test failed; else ERROR if the suite
    could not judge a test (its own failure); else PASS if any passed; else NOT CLAIMED if every
    test was not claimed; else SKIPPED. A clause with no test at all is an ERROR of the suite
    itself, never a pass."""
    results = []
    for c in spec.CLAUSES:
        tests = [t for t in outcomes if t.clause == c.id]
        statuses = [t.status for t in tests]
        if not tests:
            status, message = ERROR, f"{SUITE_ERROR_PREFIX}no test ran for this clause"
        elif FAIL in statuses:
            first = next(t for t in tests if t.status == FAIL)
            status, message = FAIL, first.message
        elif ERROR in statuses:
            first = next(t for t in tests if t.status == ERROR)
            status, message = ERROR, first.message
        elif PASS in statuses:
            status = PASS
            others = [t for t in tests if t.status != PASS]
            message = f"{len(tests) - len(others)} passed" + (f"; {others[0].message}" if others else "")
        elif all(s == NOT_CLAIMED for s in statuses):
            status, message = NOT_CLAIMED, tests[0].message[len(NOT_CLAIMED_PREFIX) :]
        else:
            status, message = SKIPPED, next(t.message for t in tests if t.status == SKIPPED)
        results.append(ClauseResult(c, status, message, tests))
    return results
