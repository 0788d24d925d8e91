"""The kill matrix: the whole suite on every mutant in tests/helpers/mutants.py (NumPy) and
tests/helpers/mutants_{torch,tensorflow,jax}.py (the frameworks' own mistakes).

Each mutant must fail exactly the clauses recorded here: its TARGETS, plus the collateral
failures that follow from the same mistake (reviewed; the comment says why). A mutant that
escapes a target, or a clause that starts failing where it should not, fails this test. The
NumPy reference must fail nothing. Run time: one suite run per mutant, each in a child process
(a TensorFlow one about a minute); the correct variants in this process.

Collecting this module imports no framework: FRAMEWORK_KILLS names the framework mutants, and
each test imports its framework's catalogue (skipped where the framework is not installed).
"""

import importlib
import os

import pytest

from gpt2_conformance import spec
from gpt2_conformance.backends.numpy.adapter import NumpyAdapter
from gpt2_conformance.run import runner
from gpt2_conformance.run.runner import run_in_process
from helpers import correct_variants, mutants

TESTS_DIR = os.path.dirname(__file__)
pytestmark = pytest.mark.slow  # one whole suite run per mutant

EXPECTED_KILLS = {
    # its target; its values (LOOKUP-EXACT); decode steps of B=2 mix rows unlike the full forward
    "BatchRowsMixed": {"LOOKUP-BATCH-INDEPENDENT", "LOOKUP-EXACT", "POSITIONS-DECODE"},
    # its target; every cached call compared with rows of the full forward gets past_length more
    # rows (POSITIONS, GOLDEN at offsets, T = 1 at 1023); its own gradients() fails on that h
    "CachedTokensReturnedToo": {
        "BOUNDS-LAST-POSITION",
        "GOLDEN-DECODE",
        "GOLDEN-H",
        "GOLDEN-WPE-ROWS",
        "POSITIONS-CHUNKED",
        "POSITIONS-DECODE",
        "POSITIONS-OFFSET",
        "SHAPE-H",
        "TIED-GRAD",
    },
    # only the bfloat16 clause
    "Bfloat16ByTruncation": {"DTYPE-BFLOAT16"},
    # BOUNDS-MESSAGE: the position case returns instead of raising
    "ClampPositions": {"BOUNDS-MESSAGE", "BOUNDS-POSITION"},
    # a random mask makes two calls differ: every clause comparing two of its answers (relations, where
    # h moves when a row changes, float16 against its own float32) and every formula check; not the
    # raising clauses, which judge the answer after an error only where two answers agree; a
    # dropped element does not move when its row is updated (STATE-UPDATES-SEEN)
    "DropoutLeftOn": {
        "BOUNDS-LAST-POSITION",
        "DTYPE-FLOAT16",
        "GOLDEN-DECODE",
        "GOLDEN-H",
        "GOLDEN-WPE-ROWS",
        "LOOKUP-BATCH-INDEPENDENT",
        "LOOKUP-EXACT",
        "LOOKUP-ID-DTYPES",
        "LOOKUP-LEARNED-POSITIONS",
        "LOOKUP-NO-DROPOUT",
        "POSITIONS-BATCH-SHARED",
        "POSITIONS-CHUNKED",
        "POSITIONS-DECODE",
        "POSITIONS-OFFSET",
        "STATE-UPDATES-SEEN",
        "TIED-GRAD",
    },
    # the same mask on every call of one shape: LOOKUP-NO-DROPOUT now sees it by its signature
    # (exact zeros, the rest times 1/(1-p)); the mask differs between shapes, so every relation
    # between a full forward and its pieces fails, and dropped elements never move (LEARNED-
    # POSITIONS, LAST-POSITION, UPDATES-SEEN); float16 against its own float32 (a second rounding)
    "DropoutFixedSeed": {
        "BOUNDS-LAST-POSITION",
        "DTYPE-FLOAT16",
        "GOLDEN-DECODE",
        "GOLDEN-H",
        "GOLDEN-WPE-ROWS",
        "LOOKUP-BATCH-INDEPENDENT",
        "LOOKUP-EXACT",
        "LOOKUP-LEARNED-POSITIONS",
        "LOOKUP-NO-DROPOUT",
        "POSITIONS-BATCH-SHARED",
        "POSITIONS-CHUNKED",
        "POSITIONS-DECODE",
        "POSITIONS-OFFSET",
        "STATE-UPDATES-SEEN",
    },
    # a mask per position is the same in every relation (they all pass); its values fail
    # LOOKUP-EXACT and the golden values, and the dropped elements never move
    "DropoutMaskPerPosition": {
        "BOUNDS-LAST-POSITION",
        "GOLDEN-H",
        "GOLDEN-WPE-ROWS",
        "LOOKUP-EXACT",
        "LOOKUP-LEARNED-POSITIONS",
        "LOOKUP-NO-DROPOUT",
        "STATE-UPDATES-SEEN",
    },
    # only T = 0 crashes (SHAPE-EMPTY); its error message names no value (BOUNDS-MESSAGE)
    "EmptySequenceCrash": {"BOUNDS-MESSAGE", "SHAPE-EMPTY"},
    # only the shape clause (the others read logits of the right size in any shape)
    "FlatLogits": {"SHAPE-LOGITS"},
    # only the float16 clause
    "Float16Truncated": {"DTYPE-FLOAT16"},
    # only the input clause
    "FloatIdsAccepted": {"BOUNDS-INPUT"},
    # only the gradient clause
    "GradientWithoutHeadRole": {"TIED-GRAD"},
    # the larger sizes' tables, and LOOKUP-EXACT's case at d = 1600 (its load_tables refuses the
    # 1600-wide tables: a port with 768 written in, which that case exists to catch)
    "HardCodedSmall": {"LOOKUP-EXACT", "SHAPE-TABLES"},
    # only float32 accuracy: the head is still wte, with no bias or scale
    "HeadInTF32": {"TIED-LOGITS-FLOAT32"},
    # both std tests
    "InitStdOff5Percent": {"INIT-WPE", "INIT-WTE"},
    # both tables
    "InitStdsSwapped": {"INIT-WPE", "INIT-WTE"},
    # only int32 against int64 ids (int64 ids are right, so LOOKUP-EXACT passes)
    "Int32IdsNarrowed": {"LOOKUP-ID-DTYPES"},
    # only the id-dtype clause
    "Int64IdsOnly": {"LOOKUP-ID-DTYPES"},
    # its targets, and B = 64 rows of one token that no longer equal that row alone (BATCH-SHARED)
    "LargeBatchFloat16Sum": {"LOOKUP-BATCH-INDEPENDENT", "LOOKUP-EXACT", "POSITIONS-BATCH-SHARED"},
    # it drops every check, so bad past_length/ids and the message clause fail too
    "NaNRowsOutOfRange": {"BOUNDS-INPUT", "BOUNDS-MESSAGE", "BOUNDS-PAST-LENGTH", "BOUNDS-POSITION", "BOUNDS-TOKEN"},
    # its values, and the real ids 50254..50256 of GOLDEN-H; id 50256 reads row -1280 (int16), so an update of
    # row 50256, a fixed case of the drawn update rows, never reaches h (STATE-UPDATES-SEEN)
    "NarrowIdCast": {"GOLDEN-H", "LOOKUP-EXACT", "STATE-UPDATES-SEEN"},
    # BOUNDS-MESSAGE: id -1 returns instead of raising
    "NegativeIdsWrap": {"BOUNDS-MESSAGE", "BOUNDS-TOKEN"},
    # only the past_length clause
    "NegativePastAccepted": {"BOUNDS-PAST-LENGTH"},
    # its targets; T = 1 at past_length 1023 does not read wpe[1023] (BOUNDS-LAST-POSITION); the golden clauses at
    # cached offsets
    "NoCacheOffset": {
        "BOUNDS-LAST-POSITION",
        "GOLDEN-DECODE",
        "GOLDEN-H",
        "GOLDEN-WPE-ROWS",
        "POSITIONS-CHUNKED",
        "POSITIONS-DECODE",
        "POSITIONS-OFFSET",
    },
    # only the past_length-forms case of POSITIONS-OFFSET
    "NumpyIntPastLengthIgnored": {"POSITIONS-OFFSET"},
    # its targets; changing wpe[p] moves position p - 1 (LEARNED-POSITIONS); the real rows and the last golden offset
    # (position 1024 raises); the relations that reach position 1023 (OFFSET, DECODE, CHUNKED since spec 1.4) raise
    # there, in the full forward they compare with
    "OffByOnePositions": {
        "BOUNDS-LAST-POSITION",
        "GOLDEN-DECODE",
        "GOLDEN-H",
        "GOLDEN-WPE-ROWS",
        "LOOKUP-EXACT",
        "LOOKUP-LEARNED-POSITIONS",
        "POSITIONS-CHUNKED",
        "POSITIONS-DECODE",
        "POSITIONS-OFFSET",
    },
    # its targets; chunks at an offset (CHUNKED); T = 1 at 1023 runs past the table (LAST-POSITION); the golden
    # clauses at cached offsets
    "OffsetTwice": {
        "BOUNDS-LAST-POSITION",
        "GOLDEN-DECODE",
        "GOLDEN-H",
        "GOLDEN-WPE-ROWS",
        "POSITIONS-CHUNKED",
        "POSITIONS-DECODE",
        "POSITIONS-OFFSET",
    },
    # its targets; the bias is the error TIED-LOGITS, TIED-LOGITS-FLOAT32 and GOLDEN-LOGITS measure
    "OutputBias": {"GOLDEN-LOGITS", "SHAPE-PARAMS", "TIED-LOGITS", "TIED-LOGITS-FLOAT32", "TIED-NO-BIAS"},
    # KS and tail tests of both tables
    "RescaledTruncatedNormalInit": {"INIT-WPE", "INIT-WTE"},
    # its targets; wpe[1023] read at position 0 (LAST-POSITION); the real wpe rows
    "ReversedWpe": {"BOUNDS-LAST-POSITION", "GOLDEN-H", "GOLDEN-WPE-ROWS", "LOOKUP-EXACT", "LOOKUP-LEARNED-POSITIONS"},
    # its targets; the real values (GOLDEN-H); in float16 the scale is a second rounding, more than 1 ulp from its own
    # float32 h (DTYPE-FLOAT16)
    "ScaleBySqrtD": {"DTYPE-FLOAT16", "GOLDEN-H", "LOOKUP-EXACT", "LOOKUP-NO-SCALE"},
    # its targets; wpe[1023] never read (LAST-POSITION); the sinusoid is added to zero tables (NO-EXTRA); the real
    # rows; in float16 the sinusoid is rounded before the sum (DTYPE-FLOAT16)
    "SinusoidalPositions": {
        "BOUNDS-LAST-POSITION",
        "DTYPE-FLOAT16",
        "GOLDEN-H",
        "GOLDEN-WPE-ROWS",
        "LOOKUP-EXACT",
        "LOOKUP-LEARNED-POSITIONS",
        "LOOKUP-NO-EXTRA",
    },
    # its target (every layout, test_exact_sum_in_every_layout), and the relations that hand it a
    # strided view (batch rows, a decode step all_ids[:, t:t+1], the offset call's drawn layouts: a B = 1
    # every-other-column view since spec 1.4's draws)
    "StridesIgnored": {"LOOKUP-BATCH-INDEPENDENT", "LOOKUP-EXACT", "POSITIONS-DECODE", "POSITIONS-OFFSET"},
    # its target and the real values (GOLDEN-H, GOLDEN-WPE-ROWS)
    "SumInFloat16": {"GOLDEN-H", "GOLDEN-WPE-ROWS", "LOOKUP-EXACT"},
    # its target; every formula check on the rounded tables (LOOKUP-EXACT, GOLDEN, the float32 head); float16 storage
    # rounded twice
    "TablesKeptInBfloat16": {
        "DTYPE-FLOAT16",
        "DTYPE-FLOAT32-ROUNDTRIP",
        "GOLDEN-H",
        "GOLDEN-TABLES-ROUNDTRIP",
        "GOLDEN-WPE-ROWS",
        "LOOKUP-EXACT",
        "TIED-LOGITS-FLOAT32",
    },
    # its targets; the real values (GOLDEN); in float16 the extra term is one more rounding (DTYPE-FLOAT16)
    "TokenTypeEmbedding": {
        "DTYPE-FLOAT16",
        "GOLDEN-H",
        "GOLDEN-WPE-ROWS",
        "LOOKUP-EXACT",
        "LOOKUP-NO-EXTRA",
        "SHAPE-PARAMS",
    },
    # std, KS and tail tests of both tables
    "TruncatedNormalInit": {"INIT-WPE", "INIT-WTE"},
    # only the message clause
    "UnclearBoundsError": {"BOUNDS-MESSAGE"},
    # KS and tail tests of both tables
    "UniformInit": {"INIT-WPE", "INIT-WTE"},
    # exactly its three targets
    "UntiedHeadCopy": {"SHAPE-PARAMS", "TIED-GRAD", "TIED-STORAGE"},
    # only INIT-DISTINCT
    "WpeCopiesWte": {"INIT-DISTINCT"},
    # only wpe's std test
    "WpeInitStd002": {"INIT-WPE"},
    # BOUNDS-MESSAGE: the position case returns instead of raising
    "WrapPositions": {"BOUNDS-MESSAGE", "BOUNDS-POSITION"},
    # -- the ids real pipelines send: each fails only the sentinel cases of BOUNDS-TOKEN, which the
    # draws do not reach (-100, 2^31 - 1 in an int64 batch, a bad id in a cached decode step)
    "IgnoreIndexAsZeroRow": {"BOUNDS-TOKEN"},
    "Int32MaxIsNoToken": {"BOUNDS-TOKEN"},
    "DecodeStepSkipsIdCheck": {"BOUNDS-TOKEN"},
    # its target; BOUNDS-MESSAGE's token-high case is 50257, which it reads as a padding row
    "PaddedVocabularyRows": {"BOUNDS-MESSAGE", "BOUNDS-TOKEN"},
    # -- table updates: only the clause that updates a table after reading it
    "GatherTableNotRefreshed": {"STATE-UPDATES-SEEN"},
    "PrefixCacheKeyedByIds": {"STATE-UPDATES-SEEN"},
    "HeadCacheStaleAfterLoad": {"STATE-UPDATES-SEEN"},
    # the rows 0..255 and 50256 served from a copy made at load: only the drawn update rows see it
    "HotRowCache": {"STATE-UPDATES-SEEN"},
    # -- issue 56: each defect blamed on the clause named for it
    # cached position ids in uint8: the relations across 255 (their targets); T = 1 at past_length 1023 reads
    # wpe[255] (BOUNDS-LAST-POSITION); the real wpe rows and golden h at cached offsets 511 and 1019
    "UInt8CachePositions": {
        "BOUNDS-LAST-POSITION",
        "GOLDEN-H",
        "GOLDEN-WPE-ROWS",
        "POSITIONS-CHUNKED",
        "POSITIONS-DECODE",
        "POSITIONS-OFFSET",
    },
    # only the output dtype clause (the values are right, and every other clause reads them as values)
    "Float64Logits": {"DTYPE-OUTPUT"},
    # its target, and the parameter count the bias adds to (SHAPE-PARAMS); logits(0) is still 0
    "ZeroOutputBias": {"SHAPE-PARAMS", "TIED-NO-BIAS"},
    # -- side effects: only the pure-read clause, the guard having put the caller's data back ...
    "ReusedOutputBuffer": {"STATE-NO-SIDE-EFFECTS"},
    "DecodeStepBufferReused": {"STATE-NO-SIDE-EFFECTS"},
    "LogitsBufferReused": {"STATE-NO-SIDE-EFFECTS"},
    # ... and TIED-GRAD, whose layout cases hand it read-only cotangents: its in-place write raises there
    "CotangentAccumulatedInPlace": {"STATE-NO-SIDE-EFFECTS", "TIED-GRAD"},
    # ... except where the mutant itself reads what it changed: its own gradients() embeds (and so
    # sorts) the ids before scattering with them (TIED-GRAD)
    "IdsSortedInPlace": {"STATE-NO-SIDE-EFFECTS", "TIED-GRAD"},
    # the suite's own tables are read-only, so an in-place update of the kept array raises there
    # (TIED-STORAGE, STATE-UPDATES-SEEN); with a caller's writable arrays it writes into them
    "TablesNotCopied": {"STATE-NO-SIDE-EFFECTS", "STATE-UPDATES-SEEN", "TIED-STORAGE"},
    # it drops every check, so bad past_length/ids and the message clause fail too
    "ZeroRowsOutOfRange": {"BOUNDS-INPUT", "BOUNDS-MESSAGE", "BOUNDS-PAST-LENGTH", "BOUNDS-POSITION", "BOUNDS-TOKEN"},
    # -- what mutation testing of the reference found unexercised (spec 1.5): each only its case
    # positions restart in the second tile of one long sequence, which only d = 1600 makes long enough
    "LongSequenceSplitRestartsPositions": {"LOOKUP-EXACT"},
    # embed(ids) continues from the last call: only the default past_length case reads it
    "OffsetKeptFromLastCall": {"LOOKUP-EXACT"},
    # -- what a held-out set found passing every clause of spec 1.5 (spec 1.6): buffers read as C order
    "HeadInputReadAsCOrder": {"TIED-LOGITS"},
    "CotangentsReadAsCOrder": {"TIED-GRAD"},
    "TablesReadAsCOrder": {"LOOKUP-EXACT", "DTYPE-FLOAT32-ROUNDTRIP"},
    # ... and an init std that is GPT-2's at d = 768 only
    "InitStdScaledByWidth": {"INIT-WPE", "INIT-WTE"},
}


# The framework mutants, by framework and class name in tests/helpers/mutants_<framework>.py: the
# exact clause set each fails, found by running the suite once per mutant and explained clause by
# clause. Names only, so that collecting this module imports no framework.
FRAMEWORK_KILLS = {
    "torch": {
        # nn.Embedding on CPU raises for ids < 0 or >= 50257 and for positions >= 1024 (so
        # BOUNDS-TOKEN and BOUNDS-POSITION pass: any exception counts, and the adapter works
        # afterwards), but its IndexError("index out of range in self") names neither the
        # value nor the table size. (On CUDA the same gather is a device-side assert instead.)
        "EmbeddingNoBoundsCheck": {"BOUNDS-MESSAGE"},
        # tensor indexing wraps: ids -1 .. -50257 read rows 50256 .. 0 and return a value
        # (BOUNDS-TOKEN); wpe[past:past + T] past the end comes back short and broadcasts,
        # so T = 1 at past_length 1024 returns an empty [B, 0, d] (BOUNDS-POSITION); T = 1025
        # raises RuntimeError (size mismatch), not IndexError/ValueError, and -1 does not
        # raise at all (BOUNDS-MESSAGE).
        "IndexingNoBoundsCheck": {"BOUNDS-TOKEN", "BOUNDS-POSITION", "BOUNDS-MESSAGE"},
        # a third parameter of [V, d] (SHAPE-PARAMS); assign_wte_row does not reach the copy
        # (TIED-STORAGE); the projection role's gradient goes to lm_head, not wte (TIED-GRAD,
        # "both"; the "gather" case has zero logit cotangents and passes). The copy is taken
        # from the same array at load time, so TIED-LOGITS, TIED-NO-BIAS and DTYPE still pass.
        "UntiedHeadCopy": {"SHAPE-PARAMS", "TIED-STORAGE", "TIED-GRAD"},
        # the forward is untouched; ids [[3, 50256, 3, 17], [17, 0, 9, 3]] repeat 3 (x3) and
        # 17 (x2), whose gather-role rows are divided by their counts (TIED-GRAD).
        "ScaleGradByFreq": {"TIED-GRAD"},
    },
    "tensorflow": {
        # XLA drops the assert and clamps the gather; the host-side position check still runs
        # (CheckedUnderXLAModel's docstring)
        "CheckedUnderXLA": {"BOUNDS-TOKEN", "BOUNDS-MESSAGE"},
        # its head variable is made from wte once, at the first load: a later load_tables' wte never
        # reaches it (STATE-UPDATES-SEEN's logits case), as an in-place row update does not (TIED-STORAGE)
        "UntiedHead": {"TIED-STORAGE", "TIED-GRAD", "SHAPE-PARAMS", "STATE-UPDATES-SEEN"},
    },
    "jax": {
        # jnp indexing never raises: -1 wraps, 50257 and position 1024 clamp to the last rows
        "RawIndexing": {"BOUNDS-TOKEN", "BOUNDS-POSITION", "BOUNDS-MESSAGE"},
        # positions still checked on the host; ids: -1 wraps, 50257 gives a NaN row
        "TakeFillsNaN": {"BOUNDS-TOKEN", "BOUNDS-MESSAGE"},
        "UntiedHeadCopy": {"TIED-STORAGE", "TIED-GRAD", "SHAPE-PARAMS"},
        # CheckifyErrorDropped fails exactly {BOUNDS-TOKEN, BOUNDS-MESSAGE} too (one full run
        # checked it); it is tested directly in tests/backends/test_jax.py to save a suite run
        # (helpers.mutants_jax.DIRECT, not in its ALL).
    },
}
FRAMEWORK_MUTANTS = [(framework, name) for framework, kills in FRAMEWORK_KILLS.items() for name in kills]


def test_catalogue_is_complete():
    assert len(mutants.ALL) >= 20
    assert set(EXPECTED_KILLS) == {m.__name__ for m in mutants.ALL}
    for name, killed in EXPECTED_KILLS.items():
        assert set(killed) <= set(spec.BY_ID), name
        assert getattr(mutants, name).TARGETS <= killed, f"{name}: a target is not in its expected kills"


def test_every_clause_kills_some_mutant():
    """A clause no mutant fails has not been shown to be able to fail."""
    killed = set().union(*EXPECTED_KILLS.values())
    assert set(spec.BY_ID) - killed == set()


def test_reference_passes_every_claimed_clause():
    result = run_in_process(NumpyAdapter, "numpy")
    assert result.error == ""
    assert result.failed() == [] and result.errors() == []


RAISE_CLAUSES = {"BOUNDS-POSITION", "BOUNDS-TOKEN", "BOUNDS-PAST-LENGTH", "BOUNDS-INPUT", "BOUNDS-MESSAGE"}
RAISES_WRONGLY = {"EmptySequenceCrash"}  # its own check raises without naming the value


def test_no_raising_clause_fails_a_mutant_that_raises_correctly():
    """A value defect (a scale, wrong positions, dropout, ...) with the reference's checks must
    not light up the clauses about raising: each clause blames only its own property."""
    for mutant in mutants.ALL:
        if not any(t.startswith("BOUNDS-") for t in mutant.TARGETS) and mutant.__name__ not in RAISES_WRONGLY:
            assert not EXPECTED_KILLS[mutant.__name__] & RAISE_CLAUSES, mutant.__name__


def test_value_defects_fail_few_clauses():
    """Per single-defect mutant, at most its targets plus the reviewed extras above; on average
    under 4 clauses (6.6 before clauses tested their own property, spec 1.1)."""
    mean = sum(len(k) for k in EXPECTED_KILLS.values()) / len(EXPECTED_KILLS)
    assert mean < 4, mean


def _judged(spec: str, monkeypatch, shrink: bool = False):
    """The suite on a mutant in a fresh child process, as `gpt2-conformance run --adapter` judges
    it: a verdict that cannot depend on what earlier tests left in this process (an xdist worker
    runs many). A mutant that reads memory it does not own (StridesIgnored read past a view's end
    until it copied those views) would otherwise see what earlier runs left in this heap.
    Without shrinking (`run --no-shrink`) by default: the kill sets are verdicts, and minimising
    each failing example was a third of a mutant's run; test_child_and_in_process_verdicts_agree
    shows the verdicts are the same either way."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [TESTS_DIR, os.environ.get("PYTHONPATH")])))
    return runner.run_backend(spec, adapter_spec=spec, extra_args=() if shrink else ("--gpt2c-no-shrink",))


def _judged_here(factory):
    """The suite on a correct variant in this process (run_in_process): correct NumPy code reads
    only its own inputs and leaves nothing behind, so a child per variant would only cost its start
    and its memory again. test_child_and_in_process_verdicts_agree shows the two routes agree."""
    return run_in_process(factory, f"helpers.{factory.__module__.rpartition('.')[2]}:{factory.__name__}")


def _assert_every_fail_names_its_call(result, name: str) -> None:
    """Every FAIL line ends with the call in the suite's form, `[embed(ids=..., past_length=...)]`,
    whether an assertion or an exception the adapter raised: a user replays it from that line."""
    for clause in result.clauses:
        for test in clause.tests:
            if test.status == "FAIL":
                assert test.message.endswith("]") and " [" in test.message, (name, test.nodeid, test.message)


@pytest.mark.parametrize("mutant", mutants.ALL, ids=lambda m: m.__name__)
def test_mutant_is_killed_by_exactly_the_expected_clauses(mutant, monkeypatch):
    result = _judged(f"helpers.mutants:{mutant.__name__}", monkeypatch)
    assert result.error == ""
    assert result.errors() == [], [c.message for c in result.clauses if c.status == "ERROR"]
    killed = set(result.failed())
    expected = EXPECTED_KILLS[mutant.__name__]
    assert killed == expected, (
        f"{mutant.__name__}: escaped {sorted(expected - killed)}, unexpectedly failed {sorted(killed - expected)}"
    )
    _assert_every_fail_names_its_call(result, mutant.__name__)


@pytest.mark.parametrize("variant", correct_variants.ALL, ids=lambda v: v.__name__)
def test_correct_variant_of_unusual_shape_passes_every_claimed_clause(variant):
    """A transposed table, other gather primitives, positions without arange, row by row: correct
    code written unlike the reference passes everything it claims."""
    result = _judged_here(variant)
    assert result.error == ""
    assert result.failed() == [] and result.errors() == [], [
        (c.clause.id, c.message) for c in result.clauses if c.status in ("FAIL", "ERROR")
    ]


def test_child_and_in_process_verdicts_agree(monkeypatch):
    """One mutant, judged as `run --adapter` judges it (a child process, its events file, the
    crash watch) and in this process: the same verdict per test, and its FAIL messages. Judged
    without shrinking (as the kill matrix judges), each test has the same verdict again."""
    name = "NoCacheOffset"  # seven clauses, relations and golden values among them
    child = _judged(f"helpers.mutants:{name}", monkeypatch, shrink=True)
    here = _judged_here(getattr(mutants, name))
    unshrunk = _judged(f"helpers.mutants:{name}", monkeypatch)
    assert child.error == here.error == unshrunk.error == ""
    assert set(child.failed()) == set(here.failed()) == set(unshrunk.failed()) == EXPECTED_KILLS[name]
    verdicts = [{t.nodeid: (t.status, t.message) for c in r.clauses for t in c.tests} for r in (child, here)]
    assert verdicts[0] == verdicts[1]
    statuses = [{t.nodeid: t.status for c in r.clauses for t in c.tests} for r in (child, unshrunk)]
    assert statuses[0] == statuses[1]
    assert sum(s == "FAIL" for s in statuses[0].values()) >= 7


@pytest.mark.parametrize("framework", list(FRAMEWORK_KILLS))
def test_framework_catalogue_is_complete(framework):
    pytest.importorskip(framework)
    catalogue = importlib.import_module(f"helpers.mutants_{framework}")
    assert {m.__name__ for m in catalogue.ALL} == set(FRAMEWORK_KILLS[framework])
    for name, killed in FRAMEWORK_KILLS[framework].items():
        assert killed and set(killed) <= set(spec.BY_ID), name


@pytest.mark.parametrize("framework,name", FRAMEWORK_MUTANTS, ids=[f"{f}-{n}" for f, n in FRAMEWORK_MUTANTS])
def test_framework_mutant_is_killed_by_exactly_the_expected_clauses(framework, name, monkeypatch):
    pytest.importorskip(framework)
    result = _judged(f"helpers.mutants_{framework}:{name}", monkeypatch)
    assert result.error == ""
    assert result.errors() == [], [c.message for c in result.clauses if c.status == "ERROR"]
    messages = {c.clause.id: c.message for c in result.clauses if c.status == "FAIL"}
    expected = FRAMEWORK_KILLS[framework][name]
    assert set(messages) == expected, (
        f"{framework} {name}: escaped {sorted(expected - set(messages))}, unexpectedly failed {messages}"
    )
    _assert_every_fail_names_its_call(result, f"{framework} {name}")
