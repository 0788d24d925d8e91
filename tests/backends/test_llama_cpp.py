"""The llama-cpp backend (backends/thirdparty/llama_cpp), beyond what tests/test_thirdparty.py runs
on every third-party backend: h is read inside llama.cpp's graph (not recomputed), the offset is
llama.cpp's own cache position, the logits are llama.cpp's head run on h_final written into its
input, and what its waivers describe is what llama.cpp does with bad
input (an error status for an id outside the vocabulary or a position past the context, the
binding's RuntimeError without the value; an abort on a context longer than the trained one)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

for _module in ("llama_cpp", "gguf"):
    pytest.importorskip(_module)

from gpt2_conformance.api import gpt2  # noqa: E402
from gpt2_conformance.backends.thirdparty.llama_cpp import adapter as llama_adapter  # noqa: E402
from gpt2_conformance.backends.thirdparty.llama_cpp.adapter import LlamaCppAdapter  # noqa: E402
from helpers.loaded_engines import load_random_tables  # noqa: E402

D = gpt2.N_EMBD_SMALL


@pytest.fixture(scope="module")
def loaded():
    return load_random_tables(LlamaCppAdapter)


def test_h_is_read_from_llama_cpps_graph_at_its_own_cache_position(loaded, monkeypatch):
    adapter, wte, wpe = loaded
    ids = np.array([[3, 50256, 0], [7, 7, 1]])
    assert np.array_equal(adapter.embed(ids, 0), wte[ids] + wpe[0:3])
    assert np.array_equal(adapter.embed(ids, 5), wte[ids] + wpe[5:8])
    assert np.array_equal(adapter.embed(ids[:, :1], 1023), wte[ids[:, :1]] + wpe[1023:1024])
    full = llama_adapter.STOP_AFTER_H
    monkeypatch.setattr(llama_adapter, "STOP_AFTER_H", not full)  # the whole graph evaluated: the same bits
    assert np.array_equal(adapter.embed(ids, 5), wte[ids] + wpe[5:8])
    monkeypatch.setattr(llama_adapter, "STOP_AFTER_H", full)
    # what is returned is what the eval callback copied out of the graph's tensor of that name:
    # pointed at llama.cpp's "pos_embd" (get_rows of position_embd) it returns wpe's rows
    monkeypatch.setattr(llama_adapter, "H_TENSOR", "pos_embd")
    assert np.array_equal(adapter.embed(ids, 5), np.broadcast_to(wpe[5:8], (2, 3, D)))
    monkeypatch.setattr(llama_adapter, "H_TENSOR", "no-such-tensor")
    with pytest.raises(RuntimeError, match="computed no 'no-such-tensor' tensor"):
        adapter.embed(ids, 0)


def test_logits_are_llama_cpps_head_on_the_h_final_written_into_its_input(loaded, monkeypatch):
    adapter, wte, _ = loaded
    h = np.random.default_rng(1).standard_normal((2, 3, D), dtype=np.float32)
    logits = adapter.logits(h)
    exact = h.astype(np.float64) @ wte.T.astype(np.float64)
    assert logits.shape == (2, 3, gpt2.N_VOCAB) and logits.dtype == np.float32
    assert np.abs(logits - exact).max() < 1e-3 * np.abs(exact).max()  # float32 sums of 768 products
    assert not np.array_equal(adapter.logits(h[:, :1] * 2), logits[:, :1])  # it is h_final that the head read
    monkeypatch.setattr(llama_adapter, "HEAD_INPUT_TENSOR", "no-such-tensor")
    with pytest.raises(RuntimeError, match="computed no 'no-such-tensor' tensor"):
        adapter.logits(h)


def test_the_gguf_holds_the_tables_and_no_head_of_its_own(tmp_path):
    import gguf

    from gpt2_conformance.backends.thirdparty.llama_cpp import gguf_model

    wte = np.arange(gpt2.N_VOCAB * 8, dtype=np.float32).reshape(gpt2.N_VOCAB, 8)
    wpe = -np.arange(gpt2.N_CTX * 8, dtype=np.float32).reshape(gpt2.N_CTX, 8)
    gguf_model.write(str(tmp_path / "m.gguf"), wte, wpe)
    reader = gguf.GGUFReader(str(tmp_path / "m.gguf"))
    tensors = {t.name: np.asarray(t.data).reshape(tuple(int(n) for n in reversed(t.shape))) for t in reader.tensors}
    assert "output.weight" not in tensors  # llama.cpp then ties the head to token_embd (gpt2.cpp)
    assert np.array_equal(tensors["token_embd.weight"], wte) and np.array_equal(tensors["position_embd.weight"], wpe)
    block = {name: t for name, t in tensors.items() if name.startswith("blk.")}
    assert {n.split(".")[1] for n in block} == {"0"}, "one block"
    assert all(not t.any() for n, t in block.items() if "norm" not in n), "its weights are zero: it passes h through"


def test_out_of_range_ids_and_positions_are_llama_decodes_error_status(loaded):
    adapter, _, _ = loaded
    for bad in (gpt2.N_VOCAB, -1):
        with pytest.raises(RuntimeError, match=rf"llama_decode returned -1; llama\.cpp logged: .*{bad}"):
            adapter.embed(np.array([[1, bad]]), 0)
    with pytest.raises(RuntimeError, match="llama_decode returned") as position:
        adapter.embed(np.array([[1]]), gpt2.N_CTX)
    assert "1024" not in str(position.value).split(";")[0]  # the status names neither the position nor the rule
    bools = adapter.embed(np.array([[True, False, True]]), 0)  # BOUNDS-INPUT's waiver: ctypes takes bools as ints
    assert np.array_equal(bools, (adapter.tables()[0][[1, 0, 1]] + adapter.tables()[1][:3])[None])
    with pytest.raises(OverflowError, match="does not fit llama_token"):
        adapter.embed(np.array([[2**31]], dtype=np.int64), 0)


def test_a_context_longer_than_the_trained_one_aborts_the_process_at_position_1024():
    """llama.cpp lets a context exceed n_ctx_train (it warns); the wpe get_rows at position 1024
    then trips GGML_ASSERT and aborts: what a deployment with `-c 2048` gets. The suite's adapter
    keeps the trained context, so its runs see the error status instead."""
    script = textwrap.dedent("""
        import numpy as np
        from gpt2_conformance.backends.thirdparty.llama_cpp import adapter as a
        a.CONTEXT = 2048
        x = a.LlamaCppAdapter()
        x.load_tables(np.zeros((50257, 768), np.float32), np.zeros((1024, 768), np.float32))
        print("embedded", x.embed(np.array([[1]]), 1023).shape, flush=True)
        x.embed(np.array([[1]]), 1024)
        print("no abort", flush=True)
    """)
    env = dict(os.environ, GGML_NO_BACKTRACE="1")  # ggml would otherwise attach gdb for a backtrace first
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env)
    assert "embedded (1, 1, 768)" in done.stdout, done.stderr[-2000:]
    assert done.returncode == -signal.SIGABRT and "no abort" not in done.stdout, (done.returncode, done.stderr[-2000:])
    assert "GGML_ASSERT" in done.stderr, done.stderr[-2000:]
