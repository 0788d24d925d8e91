"""The kill matrix: the whole suite on every mutant in tests/mutants.py.

Each mutant must fail exactly the clauses recorded here: its TARGETS, plus the collateral
failures that follow from the same mistake (reviewed; the comment says why). A mutant that
escapes a target, or a clause that starts failing where it should not, fails this test. The
NumPy reference must fail nothing. Run time: one suite run per mutant (about 8-12 s each on
an idle 2-core machine).
"""

import pytest

import mutants
from backends.numpy.adapter import NumpyAdapter
from conformance import spec
from conformance.runner import run_in_process

EXPECTED_KILLS = {
    # every bit-for-bit h check with B >= 2, and TIED-GRAD through h
    "BatchRowsMixed": {"DTYPE-FLOAT16", "LOOKUP-BATCH-INDEPENDENT", "LOOKUP-EXACT", "LOOKUP-ID-DTYPES", "LOOKUP-LEARNED-POSITIONS", "LOOKUP-NO-DROPOUT", "LOOKUP-NO-SCALE", "POSITIONS-BATCH-SHARED", "POSITIONS-CHUNKED", "POSITIONS-DECODE", "POSITIONS-OFFSET", "TIED-GRAD"},
    # only the bfloat16 clause
    "Bfloat16ByTruncation": {"DTYPE-BFLOAT16"},
    # BOUNDS-MESSAGE: the position case returns instead of raising
    "ClampPositions": {"BOUNDS-MESSAGE", "BOUNDS-POSITION"},
    # every bit-for-bit h check (BOUNDS ones through the valid call after the error), GOLDEN included
    "DropoutLeftOn": {"BOUNDS-LAST-POSITION", "BOUNDS-POSITION", "BOUNDS-TOKEN", "DTYPE-FLOAT16", "GOLDEN-DECODE", "GOLDEN-H", "GOLDEN-WPE-ROWS", "LOOKUP-BATCH-INDEPENDENT", "LOOKUP-EXACT", "LOOKUP-ID-DTYPES", "LOOKUP-LEARNED-POSITIONS", "LOOKUP-NO-DROPOUT", "LOOKUP-NO-SCALE", "POSITIONS-BATCH-SHARED", "POSITIONS-CHUNKED", "POSITIONS-DECODE", "POSITIONS-OFFSET", "TIED-GRAD"},
    # only T = 0 crashes (SHAPE-EMPTY); its error message names no value (BOUNDS-MESSAGE)
    "EmptySequenceCrash": {"BOUNDS-MESSAGE", "SHAPE-EMPTY"},
    # every logits check (a shape mismatch), the float16 head and the golden logits included
    "FlatLogits": {"DTYPE-FLOAT16", "GOLDEN-LOGITS", "SHAPE-LOGITS", "TIED-LOGITS", "TIED-NO-BIAS", "TIED-STORAGE"},
    # only the float16 clause
    "Float16Truncated": {"DTYPE-FLOAT16"},
    # only the input clause
    "FloatIdsAccepted": {"BOUNDS-INPUT"},
    # only the gradient clause
    "GradientWithoutHeadRole": {"TIED-GRAD"},
    # only the larger sizes' tables
    "HardCodedSmall": {"SHAPE-TABLES"},
    # both std tests
    "InitStdOff5Percent": {"INIT-WPE", "INIT-WTE"},
    # both tables
    "InitStdsSwapped": {"INIT-WPE", "INIT-WTE"},
    # only the id-dtype clause
    "Int64IdsOnly": {"LOOKUP-ID-DTYPES"},
    # it drops every check, so bad past_length/ids and the message clause fail too
    "NaNRowsOutOfRange": {"BOUNDS-INPUT", "BOUNDS-MESSAGE", "BOUNDS-PAST-LENGTH", "BOUNDS-POSITION", "BOUNDS-TOKEN"},
    # every check that embeds an id >= 32768 (50256 in the post-error call, the golden ids)
    "NarrowIdCast": {"BOUNDS-LAST-POSITION", "BOUNDS-POSITION", "BOUNDS-TOKEN", "DTYPE-FLOAT16", "GOLDEN-DECODE", "GOLDEN-H", "LOOKUP-EXACT", "LOOKUP-ID-DTYPES", "LOOKUP-LEARNED-POSITIONS", "LOOKUP-NO-DROPOUT", "LOOKUP-NO-SCALE", "POSITIONS-BATCH-SHARED", "POSITIONS-OFFSET", "TIED-GRAD"},
    # BOUNDS-MESSAGE: id -1 returns instead of raising
    "NegativeIdsWrap": {"BOUNDS-MESSAGE", "BOUNDS-TOKEN"},
    # only the past_length clause
    "NegativePastAccepted": {"BOUNDS-PAST-LENGTH"},
    # every check that embeds at past_length > 0, the golden offsets included
    "NoCacheOffset": {"BOUNDS-LAST-POSITION", "DTYPE-FLOAT16", "GOLDEN-DECODE", "GOLDEN-H", "GOLDEN-WPE-ROWS", "LOOKUP-EXACT", "LOOKUP-ID-DTYPES", "LOOKUP-LEARNED-POSITIONS", "POSITIONS-BATCH-SHARED", "POSITIONS-CHUNKED", "POSITIONS-DECODE", "POSITIONS-OFFSET", "TIED-GRAD"},
    # every h check; at position 1023 the gather raises, failing SHAPE-H and friends
    "OffByOnePositions": {"BOUNDS-LAST-POSITION", "BOUNDS-POSITION", "BOUNDS-TOKEN", "DTYPE-FLOAT16", "GOLDEN-DECODE", "GOLDEN-H", "GOLDEN-WPE-ROWS", "LOOKUP-BATCH-INDEPENDENT", "LOOKUP-EXACT", "LOOKUP-ID-DTYPES", "LOOKUP-LEARNED-POSITIONS", "LOOKUP-NO-DROPOUT", "LOOKUP-NO-SCALE", "POSITIONS-BATCH-SHARED", "POSITIONS-DECODE", "POSITIONS-OFFSET", "SHAPE-H", "TIED-GRAD"},
    # every check at past_length > 0; 2 * past_length overflows the table for SHAPE-H
    "OffsetTwice": {"BOUNDS-LAST-POSITION", "DTYPE-FLOAT16", "GOLDEN-DECODE", "GOLDEN-H", "GOLDEN-WPE-ROWS", "LOOKUP-BATCH-INDEPENDENT", "LOOKUP-EXACT", "LOOKUP-ID-DTYPES", "LOOKUP-LEARNED-POSITIONS", "POSITIONS-BATCH-SHARED", "POSITIONS-CHUNKED", "POSITIONS-DECODE", "POSITIONS-OFFSET", "SHAPE-H", "TIED-GRAD"},
    # every logits check, the float16 head and the golden logits included
    "OutputBias": {"DTYPE-FLOAT16", "GOLDEN-LOGITS", "SHAPE-PARAMS", "TIED-LOGITS", "TIED-NO-BIAS", "TIED-STORAGE"},
    # KS and tail tests of both tables
    "RescaledTruncatedNormalInit": {"INIT-WPE", "INIT-WTE"},
    # every bit-for-bit h check, the real wpe rows included
    "ReversedWpe": {"BOUNDS-LAST-POSITION", "BOUNDS-POSITION", "BOUNDS-TOKEN", "DTYPE-FLOAT16", "GOLDEN-DECODE", "GOLDEN-H", "GOLDEN-WPE-ROWS", "LOOKUP-EXACT", "LOOKUP-ID-DTYPES", "LOOKUP-LEARNED-POSITIONS", "LOOKUP-NO-DROPOUT", "LOOKUP-NO-SCALE", "POSITIONS-BATCH-SHARED", "POSITIONS-OFFSET", "TIED-GRAD"},
    # every bit-for-bit h check with nonzero wte (GOLDEN-WPE-ROWS zeroes wte)
    "ScaleBySqrtD": {"BOUNDS-LAST-POSITION", "BOUNDS-POSITION", "BOUNDS-TOKEN", "DTYPE-FLOAT16", "GOLDEN-DECODE", "GOLDEN-H", "LOOKUP-EXACT", "LOOKUP-ID-DTYPES", "LOOKUP-LEARNED-POSITIONS", "LOOKUP-NO-DROPOUT", "LOOKUP-NO-SCALE", "POSITIONS-BATCH-SHARED", "POSITIONS-OFFSET", "TIED-GRAD"},
    # every bit-for-bit h check, zero tables and the real wpe rows included
    "SinusoidalPositions": {"BOUNDS-LAST-POSITION", "BOUNDS-POSITION", "BOUNDS-TOKEN", "DTYPE-FLOAT16", "GOLDEN-DECODE", "GOLDEN-H", "GOLDEN-WPE-ROWS", "LOOKUP-EXACT", "LOOKUP-ID-DTYPES", "LOOKUP-LEARNED-POSITIONS", "LOOKUP-NO-DROPOUT", "LOOKUP-NO-EXTRA", "LOOKUP-NO-SCALE", "POSITIONS-BATCH-SHARED", "POSITIONS-OFFSET", "TIED-GRAD"},
    # every float32 bit-for-bit h check (float16 mode is unaffected)
    "SumInFloat16": {"BOUNDS-LAST-POSITION", "BOUNDS-POSITION", "BOUNDS-TOKEN", "GOLDEN-DECODE", "GOLDEN-H", "GOLDEN-WPE-ROWS", "LOOKUP-EXACT", "LOOKUP-ID-DTYPES", "LOOKUP-LEARNED-POSITIONS", "LOOKUP-NO-DROPOUT", "LOOKUP-NO-SCALE", "POSITIONS-BATCH-SHARED", "POSITIONS-OFFSET"},
    # the round trip and every float32 h or logits check on the rounded tables
    "TablesKeptInBfloat16": {"BOUNDS-LAST-POSITION", "BOUNDS-POSITION", "BOUNDS-TOKEN", "DTYPE-FLOAT16", "DTYPE-FLOAT32-ROUNDTRIP", "GOLDEN-DECODE", "GOLDEN-H", "GOLDEN-LOGITS", "GOLDEN-TABLES-ROUNDTRIP", "GOLDEN-WPE-ROWS", "LOOKUP-EXACT", "LOOKUP-ID-DTYPES", "LOOKUP-LEARNED-POSITIONS", "LOOKUP-NO-DROPOUT", "LOOKUP-NO-SCALE", "POSITIONS-BATCH-SHARED", "POSITIONS-OFFSET", "TIED-GRAD", "TIED-LOGITS"},
    # every bit-for-bit h check, zero tables included
    "TokenTypeEmbedding": {"BOUNDS-LAST-POSITION", "BOUNDS-POSITION", "BOUNDS-TOKEN", "DTYPE-FLOAT16", "GOLDEN-DECODE", "GOLDEN-H", "GOLDEN-WPE-ROWS", "LOOKUP-EXACT", "LOOKUP-ID-DTYPES", "LOOKUP-LEARNED-POSITIONS", "LOOKUP-NO-DROPOUT", "LOOKUP-NO-EXTRA", "LOOKUP-NO-SCALE", "POSITIONS-BATCH-SHARED", "POSITIONS-OFFSET", "SHAPE-PARAMS", "TIED-GRAD"},
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
    # it drops every check, so bad past_length/ids and the message clause fail too
    "ZeroRowsOutOfRange": {"BOUNDS-INPUT", "BOUNDS-MESSAGE", "BOUNDS-PAST-LENGTH", "BOUNDS-POSITION", "BOUNDS-TOKEN"},
}


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
    assert result.failed() == []


@pytest.mark.parametrize("mutant", mutants.ALL, ids=lambda m: m.__name__)
def test_mutant_is_killed_by_exactly_the_expected_clauses(mutant):
    result = run_in_process(mutant, mutant.__name__)
    assert result.error == ""
    killed = set(result.failed())
    expected = EXPECTED_KILLS[mutant.__name__]
    assert killed == expected, (f"{mutant.__name__}: escaped {sorted(expected - killed)}, "
                                f"unexpectedly failed {sorted(killed - expected)}")
