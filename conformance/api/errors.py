"""Exceptions a conforming implementation raises on bad input.

Adapters may raise their own exception types; the suite accepts any IndexError or
ValueError (TypeError for a wrong dtype) whose message names the offending value and the
rule. These classes exist so adapters (ours and users') can do that in one line.
"""


class PositionOutOfRangeError(IndexError):
    """A position past_length + t is outside the wpe table [0, n_ctx)."""


class TokenIdOutOfRangeError(IndexError):
    """A token id is outside the wte table [0, n_vocab)."""


class EmbeddingInputError(ValueError):
    """ids or past_length are malformed: wrong rank, negative past_length, ..."""


class TableShapeError(ValueError):
    """A table handed to load_tables has the wrong shape or dtype."""
