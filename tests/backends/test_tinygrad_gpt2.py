"""The tinygrad-gpt2 backend (backends/thirdparty/tinygrad_gpt2), beyond what tests/test_thirdparty.py
runs on every third-party backend: h is the example's wte(tokens) + wpe(pos) bit for bit, the offset
is its start_pos (a numpy integer taken as the int it is, nothing else converted), the head is wte's
own tensor, and what the waivers and the upstream draft describe is what tinygrad does with bad input
(zero rows for ids outside the table, a ValueError from shrink past position 1023)."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("tinygrad", reason="tinygrad is not installed (pip install 'gpt2-conformance[tinygrad]')")

from gpt2_conformance.api import gpt2  # noqa: E402
from gpt2_conformance.api.adapter import AdapterConfig  # noqa: E402
from gpt2_conformance.api.errors import TableShapeError  # noqa: E402
from gpt2_conformance.backends.thirdparty.tinygrad_gpt2 import adapter as tg_adapter  # noqa: E402
from gpt2_conformance.backends.thirdparty.tinygrad_gpt2.adapter import TinygradGPT2Adapter, _offset  # noqa: E402
from helpers.loaded_engines import load_random_tables  # noqa: E402

_AVAILABLE, _WHY = TinygradGPT2Adapter.device_available("cpu")
needs_clang = pytest.mark.skipif(not _AVAILABLE, reason=f"tinygrad's CPU device cannot run here: {_WHY}")
N_EMBD = 64  # the width does not matter to the lookup; small keeps the head fast
REPRO = os.path.join(os.path.dirname(tg_adapter.__file__), "upstream", "embedding_out_of_range_zero_rows.py")


@pytest.fixture(scope="module")
def loaded():
    return load_random_tables(lambda: TinygradGPT2Adapter(AdapterConfig(n_embd=N_EMBD)), n_embd=N_EMBD)


def test_offset_takes_a_numpy_integer_as_int_and_passes_everything_else_unchanged():
    assert _offset(np.int64(5)) == 5 and type(_offset(np.int64(5))) is int
    assert _offset(np.int32(0)) == 0 and type(_offset(np.int32(0))) is int
    for value in (True, 2.5, -1, "3"):
        assert _offset(value) is value  # no check of the adapter's own: tinygrad answers these


def test_no_clang_falls_back_to_zigs_clang_from_the_package_index(monkeypatch, tmp_path):
    """A machine without clang (a Python user's, often): the ziglang package of the tinygrad extra
    gives the compiler, a script that runs `zig cc`."""
    pytest.importorskip("ziglang")
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.setenv("CACHEDB", str(tmp_path / "cache.db"))
    monkeypatch.setattr(tg_adapter.shutil, "which", lambda name: None)
    assert TinygradGPT2Adapter.device_available("cpu") == (True, "")
    assert tg_adapter._compiler() == str(tmp_path / "zig-cc") and (tmp_path / "zig-cc").stat().st_mode & 0o111


def test_no_compiler_at_all_is_a_clear_unavailable_device(monkeypatch):
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.setattr(tg_adapter.shutil, "which", lambda name: None)
    monkeypatch.setattr(tg_adapter, "_zig_cc", lambda: None)
    available, why = TinygradGPT2Adapter.device_available("cpu")
    assert not available and "clang" in why and "ziglang" in why
    assert TinygradGPT2Adapter.device_available("gpu") == (False, "TinygradGPT2Adapter claims only cpu")


def test_bad_config_is_refused_by_name():
    with pytest.raises(ValueError, match="dtype 'float64'"):
        TinygradGPT2Adapter(AdapterConfig(n_embd=N_EMBD, dtype="float64"))


@needs_clang
def test_h_is_the_examples_sum_bit_for_bit_after_any_offset(loaded):
    adapter, wte, wpe = loaded
    ids = np.array([[3, 50256, 0], [7, 7, 1]])
    assert np.array_equal(adapter.embed(ids, 0), wte[ids] + wpe[0:3])
    assert np.array_equal(adapter.embed(ids.astype(np.int32), np.int64(1021)), wte[ids] + wpe[1021:1024])


@needs_clang
def test_ids_outside_the_table_give_zero_rows_silently(loaded):
    # the finding waived as BOUNDS-TOKEN: the wte part of h is zero, h is the position row alone
    adapter, _, wpe = loaded
    bad = np.array([[-1, gpt2.N_VOCAB, -100, 2**31 - 1]])
    assert np.array_equal(adapter.embed(bad, 0), np.broadcast_to(wpe[0:4], (1, 4, N_EMBD)))


@needs_clang
def test_positions_past_the_table_and_bad_inputs_raise(loaded):
    adapter, _, _ = loaded
    with pytest.raises(ValueError, match="invalid shrink"):
        adapter.embed(np.zeros((1, 2), np.int64), gpt2.N_CTX - 1)
    with pytest.raises(TypeError, match="integer dtype"):
        adapter.embed(np.zeros((1, 2), np.float32), 0)
    for ids in (np.zeros(3, np.int64), np.zeros((1, 1, 3), np.int64)):
        with pytest.raises(ValueError):  # the example's `_bsz, seqlen = tokens.shape`
            adapter.embed(ids, 0)


@needs_clang
def test_tables_of_the_wrong_shape_or_dtype_are_refused_by_our_load_tables():
    """The protocol takes float32 [V, d] and [C, d] only: the adapter's check_tables refuses the rest
    before tinygrad's loader sees them (which would refuse a shape but round a float64 table)."""
    adapter = TinygradGPT2Adapter(AdapterConfig(n_embd=N_EMBD))
    wpe = np.zeros((gpt2.N_CTX, N_EMBD), np.float32)
    with pytest.raises(TableShapeError, match=rf"wte.shape=\(50257, {N_EMBD - 1}\)"):
        adapter.load_tables(np.zeros((gpt2.N_VOCAB, N_EMBD - 1), np.float32), wpe)
    with pytest.raises(TableShapeError, match="wte.dtype=float64, but should be float32"):
        adapter.load_tables(np.zeros((gpt2.N_VOCAB, N_EMBD), np.float64), wpe)


@needs_clang
def test_head_is_wte_itself_and_sees_a_row_update(loaded):
    adapter, wte, _ = loaded
    assert adapter.model.lm_head.weight is adapter.model.wte.weight  # after load_tables too
    assert adapter.parameters() == {"wte.weight": (gpt2.N_VOCAB, N_EMBD), "wpe.weight": (gpt2.N_CTX, N_EMBD)}
    h = np.zeros((1, 1, N_EMBD), np.float32)
    h[0, 0, 0] = 1.0
    adapter.assign_wte_row(5, np.full(N_EMBD, 2.0, np.float32))
    try:
        logits = adapter.logits(h)
        assert logits[0, 0, 5] == 2.0 and logits[0, 0, 6] == wte[6, 0]
    finally:
        adapter.assign_wte_row(5, wte[5])


@needs_clang
def test_the_reproduction_exits_1_while_the_zero_rows_are_there():
    done = subprocess.run([sys.executable, REPRO], capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "gave zero rows and no error" in done.stdout
