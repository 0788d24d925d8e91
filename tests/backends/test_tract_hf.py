"""The tract backend (backends/thirdparty/tract_hf), beyond what tests/test_thirdparty.py runs on
every third-party backend: it runs the very graph onnxruntime-hf runs; what its waivers describe
is what tract does (negative ids wrap, an index past a table is a Rust panic that aborts the
process, int32 ids are refused by the input fact); and an abort costs the clause, not the run."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

for _module in ("torch", "transformers", "onnx", "onnxscript", "tract"):
    pytest.importorskip(_module)

import torch  # noqa: E402
import tract  # noqa: E402

from gpt2_conformance.api import gpt2  # noqa: E402
from gpt2_conformance.backends.thirdparty.onnxruntime_hf import export  # noqa: E402
from gpt2_conformance.backends.thirdparty.tract_hf.adapter import TractHFAdapter  # noqa: E402
from helpers.loaded_engines import load_random_tables  # noqa: E402

D = gpt2.N_EMBD_SMALL


@pytest.fixture(scope="module")
def loaded():
    return load_random_tables(TractHFAdapter)


def test_runs_the_onnxruntime_graph_one_model_per_output(loaded):
    adapter, wte, wpe = loaded
    assert adapter.graph is export.export(D, "float32")
    assert {output: adapter.runnable(output)[1] for output in export.OUTPUTS} == {
        output: list(export.INPUTS) for output in export.OUTPUTS
    }
    ids = np.array([[3, 50256, 0]])
    assert np.array_equal(adapter.embed(ids, 5), wte[ids] + wpe[5:8])


def test_a_process_whose_graph_is_on_disk_imports_neither_torch_nor_transformers(loaded):
    """After a panic the suite restarts its process: with the export on disk (the fixture made
    it), the new process builds and runs the adapter without torch or transformers, ~6 s a
    restart here. Checked in a fresh interpreter, where nothing is imported yet."""
    script = textwrap.dedent("""
        import sys
        import numpy as np
        from gpt2_conformance.backends.thirdparty.tract_hf.adapter import TractHFAdapter
        adapter = TractHFAdapter()
        adapter.load_tables(np.zeros((50257, 768), np.float32), np.ones((1024, 768), np.float32))
        assert float(adapter.embed(np.array([[1, 2]]), 3).sum()) == 2 * 768
        print(sorted(m for m in ("torch", "transformers") if m in sys.modules))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    imported = done.stdout.strip().splitlines()[-1]
    assert imported == "[]", f"imported {imported}, but should import neither"


def test_negative_ids_wrap_and_int32_is_refused(loaded):
    """BOUNDS-TOKEN's silent half (id -1 reads wte[50256]) and LOOKUP-ID-DTYPES (the int64 input fact)."""
    adapter, wte, wpe = loaded
    assert np.array_equal(adapter.embed(np.array([[-1]]), 0)[0, 0], wte[-1] + wpe[0])
    with pytest.raises(tract.TractError, match="incorrect dtype or shape"):
        adapter.embed(np.array([[1]], np.int32), 0)


def test_a_cache_too_large_to_copy_is_refused_by_the_adapter(loaded):
    adapter, _, _ = loaded
    with pytest.raises(MemoryError, match="tract copies every input"):
        adapter.embed(np.ones((2, 1), np.int64), 10**6)


PANIC = textwrap.dedent("""
    import numpy as np
    from gpt2_conformance.backends.thirdparty.tract_hf.adapter import TractHFAdapter
    a = TractHFAdapter()
    a.load_tables(np.zeros((50257, 768), np.float32), np.zeros((1024, 768), np.float32))
    a.embed(np.array([[{id}]]), {past})
    print("returned")
""")


@pytest.mark.parametrize("bad_id,past", [(50257, 0), (1, 1024)])
def test_an_index_past_a_table_aborts_the_process(bad_id, past):
    """tract's Gather slices the table unchecked (gather.rs L83-L85): the panic cannot unwind
    through tract_state_run, so Rust aborts (SIGABRT); the suite's child processes make that a
    FAIL of one clause (tests/test_crash_isolation.py proves the isolation for SIGSEGV)."""
    out = subprocess.run(
        [sys.executable, "-c", PANIC.format(id=bad_id, past=past)], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == -signal.SIGABRT, (out.returncode, out.stdout[-500:], out.stderr[-2000:])
    assert "gather.rs" in out.stderr and "panic in a function that cannot unwind" in out.stderr, out.stderr[-2000:]
    assert "returned" not in out.stdout


def test_versions_recorded():
    text = TractHFAdapter.implementation()
    for part in (f"tract {tract.version()}", f"torch {torch.__version__}", f"opset {export.OPSET}"):
        assert part in text, f"implementation()={text!r}, but should name {part!r}"
