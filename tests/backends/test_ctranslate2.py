"""The ctranslate2 backend (backends/thirdparty/ctranslate2), beyond what tests/test_thirdparty.py
runs on every third-party backend: h is CTranslate2's own forward_batch output (an identity head
after a zero block leaves its bits alone), after a cache its own cached decode's per-step output,
the logits are its output projection with wte as the weight, the bench's decode step is its own
generation step at the cache's position, and what its waivers describe is what CTranslate2 does
with bad input (a silent read past the table, a narrowed id, crashes on an empty sequence and on
a far id, a RuntimeError for the position bound)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

pytest.importorskip("ctranslate2")

from gpt2_conformance.api import gpt2  # noqa: E402
from gpt2_conformance.backends.thirdparty.ctranslate2 import model  # noqa: E402
from gpt2_conformance.backends.thirdparty.ctranslate2.adapter import CTranslate2Adapter  # noqa: E402
from helpers.loaded_engines import load_random_tables  # noqa: E402


@pytest.fixture(scope="module")
def loaded():
    return load_random_tables(CTranslate2Adapter)


def test_h_is_ctranslate2s_forward_output_bit_for_bit(loaded):
    adapter, wte, wpe = loaded
    ids = np.array([[3, 50256, 0], [7, 7, 1]])
    assert np.array_equal(adapter.embed(ids, 0), wte[ids] + wpe[0:3])
    long = np.arange(gpt2.N_CTX)[None] % gpt2.N_VOCAB
    assert np.array_equal(adapter.embed(long, 0), wte[long] + wpe[None])  # position 1023 included


def test_h_after_a_cache_is_ctranslate2s_cached_decode_at_the_caches_length(loaded):
    """After a static prompt of past_length tokens (cached by CTranslate2), each step's head
    output is h at past_length + t, bit for bit; the position is the cache's length, so past 1022
    with T = 3 reaches position 1024 and CTranslate2 raises, and the cache serves again after."""
    adapter, wte, wpe = loaded
    ids = np.array([[3, 50256, 0], [7, 7, 1]])
    for past in (1, 37, 1021):
        assert np.array_equal(adapter.embed(ids, past), wte[ids] + wpe[past : past + 3]), past
    with pytest.raises(
        RuntimeError, match="No position encodings are defined for positions >= 1024, but got position 1024"
    ):
        adapter.embed(ids, 1022)
    assert np.array_equal(adapter.embed(ids[:, :1], 37), wte[ids[:, :1]] + wpe[37:38])
    with pytest.raises(TypeError):  # np.full refuses a bool length (BOUNDS-PAST-LENGTH)
        adapter.embed(ids, True)


def test_an_id_without_a_token_reads_the_unknown_tokens_row_after_a_cache(loaded):
    """generate_batch takes tokens: 50257, -1 and a bool have none, and CTranslate2's vocabulary
    maps an unknown token to the unknown token, row 0 (the BOUNDS-TOKEN and BOUNDS-INPUT waivers)."""
    adapter, wte, wpe = loaded
    for bad, first in ((np.array([[5, gpt2.N_VOCAB]]), 5), (np.array([[5, -1]]), 5), (np.array([[True, True]]), 0)):
        out = adapter.embed(bad, 4)
        assert np.array_equal(out[0], np.stack([wte[first] + wpe[4], wte[0] + wpe[5]])), bad


def test_the_bench_decode_step_is_ctranslate2s_generation_step_at_the_caches_length(loaded):
    """The bench's decode step (bench.py) is a tied model's generation step after a cached
    prompt: its logits are the head (wte) of h at position past_length, not at 0 or past + 1."""
    from gpt2_conformance.backends.thirdparty.ctranslate2 import bench

    adapter, wte, wpe = loaded
    nb = bench.native_bench(adapter, "cpu")
    ids = np.array([[1234]])
    (result,) = nb.step(nb.put(ids), 512)
    logits = np.asarray(result.logits[0][0]).astype(np.float64)
    exact = {p: (wte[1234] + wpe[p]).astype(np.float64) @ wte.T.astype(np.float64) for p in (0, 511, 512, 513)}
    scale = np.abs(exact[512]).max()
    assert np.abs(logits - exact[512]).max() < 1e-4 * scale
    assert all(np.abs(logits - exact[p]).max() > 1e-2 * scale for p in (0, 511, 513))


def test_logits_are_ctranslate2s_projection_of_h_final(loaded):
    adapter, wte, _ = loaded
    h = np.random.default_rng(1).standard_normal((2, 40, gpt2.N_EMBD_SMALL), dtype=np.float32)  # 80 rows: two loads
    logits = adapter.logits(h)
    exact = h.astype(np.float64) @ wte.T.astype(np.float64)
    assert logits.shape == (2, 40, gpt2.N_VOCAB) and logits.dtype == np.float32
    assert np.abs(logits - exact).max() < 1e-3 * np.abs(exact).max()  # float32 sums of 768 products
    assert not np.array_equal(adapter.logits(h[:, :1] * 2), logits[:, :1])  # it is h_final that the head read


def test_the_head_model_holds_its_rows_where_they_are_written():
    """The head model's token table is found once in model.bin and written in place: the rows a
    Generator loaded afterwards projects are the ones written."""
    import ctranslate2

    wte = np.random.default_rng(2).standard_normal((gpt2.N_VOCAB, 64), dtype=np.float32)
    head = model.HeadModel(wte)
    rows = np.random.default_rng(3).standard_normal((3, 64), dtype=np.float32)
    head.write_rows(rows)
    out = np.asarray(ctranslate2.Generator("head", device="cpu", files=head.files()).forward_batch([[0, 1, 2]]))[0]
    assert np.abs(out - rows.astype(np.float64) @ wte.T.astype(np.float64)).max() < 1e-4


def test_bad_ids_are_read_narrowed_or_refused_as_the_waivers_say(loaded):
    adapter, wte, wpe = loaded
    past_the_table = adapter.embed(np.array([[gpt2.N_VOCAB]]), 0)  # no error: memory past wte's end
    assert past_the_table.shape == (1, 1, gpt2.N_EMBD_SMALL)
    narrowed = adapter.embed(np.array([[2**32 + 5]], dtype=np.int64), 0)  # size_t -> int32: row 5
    assert np.array_equal(narrowed, (wte[5] + wpe[0])[None, None])
    bools = adapter.embed(np.array([[True, False, True]]), 0)
    assert np.array_equal(bools, (wte[[1, 0, 1]] + wpe[:3])[None])
    with pytest.raises(TypeError, match="incompatible function arguments"):  # a negative size_t
        adapter.embed(np.array([[-1]]), 0)
    with pytest.raises(
        RuntimeError, match="No position encodings are defined for positions >= 1024, but got position 1024"
    ):
        adapter.embed(np.zeros((1, gpt2.N_CTX + 1), np.int64), 0)


@pytest.mark.parametrize("ids,died", [("[[]]", signal.SIGFPE), ("[[2**31 - 1]]", signal.SIGSEGV)])
def test_an_empty_sequence_and_a_far_id_kill_the_process(ids, died, tmp_path):
    """T = 0 divides by zero in add_batch_broadcast (SIGFPE); id 2^31 - 1 copies from far past
    the table (SIGSEGV): each in a child, as the suite's runner meets them. The killed process
    leaves no model on disk (the head model lives in memory)."""
    script = textwrap.dedent(f"""
        import numpy as np
        from gpt2_conformance.backends.thirdparty.ctranslate2.adapter import CTranslate2Adapter
        x = CTranslate2Adapter()
        x.load_tables(np.zeros((50257, 768), np.float32), np.zeros((1024, 768), np.float32))
        print("embedded", x.embed(np.array([[1]]), 0).shape, flush=True)
        x.generator.forward_batch({ids})
        print("survived", flush=True)
    """)
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, TMPDIR=str(tmp_path)),
    )
    assert "embedded (1, 1, 768)" in done.stdout, done.stderr[-2000:]
    assert done.returncode == -died and "survived" not in done.stdout, (done.returncode, done.stderr[-2000:])
    assert list(tmp_path.iterdir()) == []


def test_the_head_model_is_written_for_the_tables_loaded_last():
    """The head model is written on the first logits call after a load: logits after a reload
    project with the new wte, never a head written for the tables before."""
    adapter, wte, wpe = load_random_tables(CTranslate2Adapter)
    h = np.random.default_rng(4).standard_normal((1, 2, gpt2.N_EMBD_SMALL), dtype=np.float32)
    first = adapter.logits(h)
    adapter.load_tables(wte * 2, wpe)
    after = adapter.logits(h)
    exact = h.astype(np.float64) @ (wte * 2).T.astype(np.float64)
    assert np.abs(after - exact).max() < 1e-3 * np.abs(exact).max()
    assert not np.array_equal(after, first)


def test_the_generator_runs_this_processs_share_of_the_cores(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert CTranslate2Adapter().intra_threads == 1
