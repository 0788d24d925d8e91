"""Native bench hooks for CTranslate2 running the adapter's GPT-2 decoder spec
(conformance/api/bench.py).

CTranslate2's own inputs are made by put, once, before timing: from position 0, an int32
StorageView of the ids and another of their lengths (forward_batch's dense form, which skips
converting Python lists); after a cache, the rows as the vocabulary's tokens (generate_batch
takes tokens). The timed calls, as the adapter makes them (adapter.py), return CTranslate2's
StorageViews (no numpy):
- forward from position 0: Generator.forward_batch, h out of the identity head;
- forward after a cache: Generator.generate_batch after a static prompt of past_length tokens
  whose state CTranslate2 caches (computed at the first call for that past_length, untimed),
  each step's head output (h) returned;
- decode step (NativeBench.step): CTranslate2 has no head for a given h outside a model load,
  so the step is its own whole generation step: a third model, tied as GPT-2 is (token table
  wte, head wte), built once, generates one token after the cached prompt of past_length
  tokens: gather + add at position past_length, the zero block (attention over the cache), the
  head over 50257 rows, the logits returned and the greedy pick.
Every call also runs the zero block CTranslate2 needs (model.py), whose attention over the
sequence is most of a prefill's time: the rows are CTranslate2's forward, not its gather alone.
CPU only, the Generator's intra_threads set to this process's cores (machine.threads()).
"""

from __future__ import annotations

import shutil
import tempfile

import ctranslate2
import numpy as np

from gpt2_conformance.api.bench import NativeBench
from gpt2_conformance.backends.thirdparty.ctranslate2 import model


def native_available(device: str) -> tuple[bool, str]:
    if device == "cpu":
        return True, ""
    return False, "the ctranslate2 adapter runs CTranslate2's CPU backend only"


def _tied_generator(adapter):
    """The adapter's tables as GPT-2 ties them (head = wte), loaded like the adapter's models."""
    wte, wpe = adapter.tables()
    folder = tempfile.mkdtemp(prefix="gpt2c-ct2-tied-")
    try:
        return adapter._load(model.save(folder, wte, wpe, wte))
    finally:
        shutil.rmtree(folder, ignore_errors=True)  # loaded: the Generator holds the weights


def native_bench(adapter, device: str):
    held = []  # a StorageView made by from_array shares the array's memory: the arrays stay alive here
    tied = {}

    def view(array):
        held.append(array)
        return ctranslate2.StorageView.from_array(array)

    def put(array):
        if array.dtype.kind in "iu":
            ids = np.ascontiguousarray(array, np.int32)
            tokens = [[model.token(i) for i in row] for row in array.tolist()]
            return view(ids), view(np.full(array.shape[0], array.shape[1], np.int32)), tokens
        return view(np.ascontiguousarray(array, np.float32))

    def prompt(past_length):
        return [model.token(0)] * past_length

    def forward(ids, past_length):
        dense, lengths, tokens = ids
        if not past_length:
            return adapter.generator.forward_batch(dense, lengths)
        return adapter.generator.generate_batch(
            tokens,
            static_prompt=prompt(past_length),
            cache_static_prompt=True,
            include_prompt_in_result=True,
            max_length=len(tokens[0]),
            return_logits_vocab=True,
            beam_size=1,
            sampling_topk=1,
        )

    def step(ids, past_length):
        if "generator" not in tied:
            tied["generator"] = _tied_generator(adapter)
        _, _, tokens = ids
        return tied["generator"].generate_batch(
            tokens,
            static_prompt=prompt(past_length) or None,
            cache_static_prompt=True,
            include_prompt_in_result=False,
            max_length=1,
            return_logits_vocab=True,
            beam_size=1,
            sampling_topk=1,
        )

    return NativeBench(
        put=put,
        forward=forward,
        logits=None,
        step=step,
        description="forward_batch on int32 StorageViews (put once) from position 0; generate_batch's "
        "per-step head output after a cached static prompt of past_length tokens; the decode "
        "step is CTranslate2's own generation step of a tied model (its zero block, head and "
        "greedy pick included); the head alone is not timed",
        threads=f"intra_threads = {adapter.intra_threads}",
    )
