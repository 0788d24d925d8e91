"""The ctranslate2 backend (backends/thirdparty/ctranslate2), beyond what tests/test_thirdparty.py
runs on every third-party backend: h is CTranslate2's own forward_batch output (an identity head
after a zero block leaves its bits alone), the logits are its output projection with wte as the
weight, and what its waivers describe is what CTranslate2 does with bad input (a silent read past
the table, a narrowed id, crashes on an empty sequence and on a far id, a RuntimeError for the
position bound)."""

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
    with pytest.raises(RuntimeError, match="No position encodings are defined for positions >= 1024, but got position 1024"):
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
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, TMPDIR=str(tmp_path)))
    assert "embedded (1, 1, 768)" in done.stdout, done.stderr[-2000:]
    assert done.returncode == -died and "survived" not in done.stdout, (done.returncode, done.stderr[-2000:])
    assert list(tmp_path.iterdir()) == []
