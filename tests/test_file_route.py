"""The file route (backends/files, conformance/run/files.py): `gpt2-conformance run --onnx FILE`
and `run --gguf FILE` judge an exported GPT-2 as it is.

Fast tier: the bad inputs (each one line naming the file and what is missing, exit 2), the
handover's names, and the analysis of small graphs built here with onnx.helper (d = 4: the
route finds tables by their 50257 and 1024 rows, whatever d). Slow tier: the files users make,
built from a randomly initialised GPT2LMHeadModel (tests/helpers/file_exports.py), judged
through the command line, and the three file mutants, each failing the clause named for it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from gpt2_conformance.api import gpt2
from gpt2_conformance.backends import files as backend_files
from gpt2_conformance.run import files as run_files

D = 4  # the small graphs' width


def _cli(*args: str, timeout: float = 900, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gpt2_conformance.cli", "run", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
    )


def test_the_command_and_the_adapters_name_the_same_variables():
    """The command sets what the adapters read (the two sides cannot import each other)."""
    assert run_files.FILE_VARIABLE == backend_files.FILE_VARIABLE
    assert run_files.ENGINE_VARIABLE == backend_files.ENGINE_VARIABLE
    onnx_file = pytest.importorskip("gpt2_conformance.backends.files.onnx_file")
    assert run_files.ENGINES == onnx_file.ENGINES
    for spec in run_files.ADAPTERS.values():
        module, _, attr = spec.partition(":")
        assert attr == "FileAdapter" and module.startswith("gpt2_conformance.backends.files.")


# -- small graphs ---------------------------------------------------------------------------


def _graph(path: str, positions: str = "inside", tables: bool = True, head: bool = True) -> str:
    """h = Gather(wte, ids) + Gather(wpe, positions) and logits = MatMul(h, Transpose(wte)), d = 4;
    positions: "inside" (Range(0, T)), "cache" (Range(past, past + T), past = a cache input's
    length) or "position_ids" (an input)."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    rows = (gpt2.N_VOCAB, gpt2.N_CTX) if tables else (100, 10)
    wte = numpy_helper.from_array(rng.standard_normal((rows[0], D)).astype(np.float32), "wte")
    wpe = numpy_helper.from_array(rng.standard_normal((rows[1], D)).astype(np.float32), "wpe")
    consts = [
        helper.make_tensor("zero", TensorProto.INT64, [], [0]),
        helper.make_tensor("one", TensorProto.INT64, [], [1]),
        helper.make_tensor("axis0", TensorProto.INT64, [1], [0]),
    ]
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["b", "t"])]
    nodes = [
        helper.make_node("Gather", ["wte", "input_ids"], ["tok"]),
        helper.make_node("Shape", ["input_ids"], ["t1"], start=1, end=2),
        helper.make_node("Squeeze", ["t1", "axis0"], ["t"]),
    ]
    if positions == "position_ids":
        inputs.append(helper.make_tensor_value_info("position_ids", TensorProto.INT64, ["b", "t"]))
        pos = "position_ids"
    else:
        start = "zero"
        if positions == "cache":
            inputs.append(helper.make_tensor_value_info("past_key", TensorProto.FLOAT, ["b", 2, "past", 2]))
            nodes += [
                helper.make_node("Shape", ["past_key"], ["p1"], start=2, end=3),
                helper.make_node("Squeeze", ["p1", "axis0"], ["start"]),
                helper.make_node("Add", ["start", "t"], ["end"]),
            ]
            start, stop = "start", "end"
        else:
            stop = "t"
        nodes += [
            helper.make_node("Range", [start, stop, "one"], ["range"]),
            helper.make_node("Unsqueeze", ["range", "axis0"], ["pos"]),
        ]
        pos = "pos"
    nodes += [helper.make_node("Gather", ["wpe", pos], ["posemb"]), helper.make_node("Add", ["tok", "posemb"], ["sum"])]
    outputs = []
    if head:
        nodes += [
            helper.make_node("LayerNormalization", ["sum", "ln_w", "ln_b"], ["ln"], axis=-1),
            helper.make_node("Transpose", ["wte"], ["wte_t"]),
            helper.make_node("MatMul", ["ln", "wte_t"], ["out"]),
        ]
        consts += [numpy_helper.from_array(np.ones(D, np.float32), "ln_w")]
        consts += [numpy_helper.from_array(np.zeros(D, np.float32), "ln_b")]
        outputs.append(helper.make_tensor_value_info("out", TensorProto.FLOAT, ["b", "t", rows[0]]))
    else:
        outputs.append(helper.make_tensor_value_info("sum", TensorProto.FLOAT, ["b", "t", D]))
    graph = helper.make_graph(nodes, "small", inputs, outputs, [wte, wpe, *consts])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)  # ORT 1.31 reads <= 13
    onnx.save(model, path)
    return path


@pytest.mark.parametrize("positions", ["inside", "cache", "position_ids"])
def test_the_analysis_says_what_it_found_and_claims_only_that(tmp_path, positions):
    onnx_file = pytest.importorskip("gpt2_conformance.backends.files.onnx_file")
    found = onnx_file.analyse(_graph(str(tmp_path / "g.onnx"), positions))
    assert (found.wte, found.wpe, found.n_embd, found.ids_input) == ("wte", "wpe", D, "input_ids")
    assert found.h_tensor == "sum" and found.tied and found.head_input == "ln" and found.logits_output == "out"
    assert found.positions == positions
    caps = found.capabilities("onnxruntime")
    assert caps.kv_cache == (positions == "cache") and caps.tied_head and caps.sizes == (D,)
    why = found.not_claimed_why()
    if positions == "cache":
        assert "kv_cache" not in why
        assert found.cut_inputs == ("input_ids", "past_key", "h_final")
    else:
        assert ("no cache" if positions == "inside" else "'position_ids' input") in why["kv_cache"]


def test_a_file_without_a_head_claims_no_tied_head(tmp_path):
    onnx_file = pytest.importorskip("gpt2_conformance.backends.files.onnx_file")
    found = onnx_file.analyse(_graph(str(tmp_path / "g.onnx"), head=False))
    assert found.head is None and not found.capabilities("onnxruntime").tied_head
    assert "no head" in found.not_claimed_why()["tied_head"]


@pytest.mark.parametrize("positions", ["inside", "cache"])
def test_the_cut_graph_runs_the_files_own_embedding_and_head(tmp_path, positions):
    """h is the file's Add on the suite's tables, the head its MatMul on the suite's h_final, the
    offset (cache files) the file's own Range over the cache length fed."""
    pytest.importorskip("onnxruntime")
    onnx_file = pytest.importorskip("gpt2_conformance.backends.files.onnx_file")
    from gpt2_conformance.api.adapter import AdapterConfig

    adapter = onnx_file.adapter_for(_graph(str(tmp_path / "g.onnx"), positions))(AdapterConfig(n_embd=D))
    rng = np.random.default_rng(1)
    wte = rng.standard_normal((gpt2.N_VOCAB, D)).astype(np.float32)
    wpe = rng.standard_normal((gpt2.N_CTX, D)).astype(np.float32)
    adapter.load_tables(wte, wpe)
    ids = np.array([[0, 50256, 7]])
    past = 5 if positions == "cache" else 0
    assert np.array_equal(adapter.embed(ids, past), wte[ids] + wpe[past : past + 3])
    h = rng.standard_normal((1, 2, D)).astype(np.float32)
    np.testing.assert_allclose(adapter.logits(h), h @ wte.T, rtol=1e-5, atol=1e-5)


# -- bad input: one line naming the file and what is missing, exit 2 ------------------------


def _refused(out: subprocess.CompletedProcess, *needles: str) -> None:
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2, (out.returncode, out.stdout[-2000:], out.stderr[-2000:])
    assert len(lines) == 1, out.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])


@pytest.mark.parametrize("flag", ["--onnx", "--gguf"])
def test_a_missing_file_is_refused(tmp_path, flag):
    pytest.importorskip("gguf" if flag == "--gguf" else "onnxruntime")  # without its engine, that is said first
    path = str(tmp_path / "nothing.bin")
    _refused(_cli(flag, path), path, "no such file")


def test_a_file_that_is_not_onnx_is_refused(tmp_path):
    pytest.importorskip("onnx")
    path = tmp_path / "notes.onnx"
    path.write_text("this is not a protobuf\n" * 20)
    _refused(_cli("--onnx", str(path)), str(path), "not an ONNX model")


def test_an_onnx_whose_external_data_is_missing_names_the_data_file(tmp_path):
    """A model saved with external data, its .data file left behind (copied without it): the
    refusal names that file, run from the model's folder as a user would (it said "not an ONNX model")."""
    onnx = pytest.importorskip("onnx")
    model = onnx.load(_graph(str(tmp_path / "small.onnx")))
    onnx.save(model, str(tmp_path / "model.onnx"), save_as_external_data=True, location="model.onnx.data")
    (tmp_path / "model.onnx.data").unlink()
    out = _cli("--onnx", "model.onnx", cwd=tmp_path)
    assert (out.returncode, out.stdout) == (2, ""), out.stdout + out.stderr
    assert out.stderr == (
        f"gpt2-conformance: error: {tmp_path / 'model.onnx'}: its external data file model.onnx.data is missing "
        "(its tensors are stored there, beside the .onnx): copy it beside the model, as the export wrote it\n"
    ), out.stderr


def test_an_onnx_without_gpt2_tables_is_refused(tmp_path):
    pytest.importorskip("onnx")
    path = _graph(str(tmp_path / "small.onnx"), tables=False)
    _refused(_cli("--onnx", path), path, "no [50257, d] float initializer", "no [1024, d] float initializer")


def test_a_gguf_of_another_architecture_is_refused(tmp_path):
    gguf = pytest.importorskip("gguf")
    path = str(tmp_path / "llama.gguf")
    writer = gguf.GGUFWriter(path, "llama")
    writer.add_tensor("token_embd.weight", np.zeros((8, 4), np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    _refused(_cli("--gguf", path), path, "general.architecture is 'llama', not 'gpt2'")


def test_a_file_that_is_not_gguf_is_refused(tmp_path):
    pytest.importorskip("gguf")
    path = tmp_path / "model.gguf"
    path.write_bytes(b"GGML" + bytes(64))
    _refused(_cli("--gguf", str(path)), str(path), "not a GGUF file")


def test_engine_without_onnx_is_refused(tmp_path):
    _refused(_cli("--backend", "numpy", "--engine", "tract"), "--engine", "--onnx")


# -- the files users make (slow) -------------------------------------------------------------


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """Every file of tests/helpers/file_exports.py, and the three mutants, in one folder."""
    for module in ("torch", "transformers", "onnx", "onnxscript", "onnxruntime"):
        pytest.importorskip(module)
    from helpers import file_exports as fe

    folder = tmp_path_factory.mktemp("files")
    model = fe.gpt2_model(0)
    paths = {v: fe.export_onnx(model, str(folder / f"{v}.onnx"), v) for v in fe.VARIANTS}
    paths["restarted"] = fe.restart_positions(paths["past_mask"], str(folder / "restarted.onnx"))
    paths["untied"] = fe.untie_head(paths["logits"], str(folder / "untied.onnx"))
    paths["guarded"] = fe.refuse_negative_ids(paths["logits"], str(folder / "guarded.onnx"))
    if _has("gguf") and _has("llama_cpp"):
        for dtype in ("f32", "f16"):
            paths[f"gguf-{dtype}"] = fe.write_gguf(model, str(folder / f"gpt2-{dtype}.gguf"), dtype)
    return paths


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def _judge(tmp_path, flag: str, path: str) -> tuple[dict, dict, subprocess.CompletedProcess]:
    """(clause id -> JSON row, the report, the process) of `run FLAG PATH --report-dir`."""
    out = _cli(flag, path, "--report-dir", str(tmp_path))
    reports = [f for f in os.listdir(tmp_path) if f.endswith(".json")]
    assert len(reports) == 1, (out.returncode, out.stdout[-3000:], out.stderr[-3000:])
    with open(tmp_path / reports[0], encoding="utf-8") as f:
        report = json.load(f)
    assert out.returncode == report["exit_code"] and out.returncode in (0, 1), (out.returncode, out.stderr[-2000:])
    assert not report["error"], report["error"]
    rows = {c["id"]: c for c in report["clauses"]}
    assert len(rows) >= 30 and not [c for c in rows.values() if c["status"] == "ERROR"], rows
    assert "found in the file: " in out.stdout
    return rows, report, out


@pytest.mark.slow
def test_a_logits_only_export_gets_a_full_scorecard(made, tmp_path):
    rows, report, _ = _judge(tmp_path, "--onnx", made["logits"])
    assert rows["LOOKUP-EXACT"]["status"] == "PASS" and rows["TIED-LOGITS"]["status"] == "PASS"
    for clause in ("POSITIONS-OFFSET", "POSITIONS-DECODE", "POSITIONS-CHUNKED", "POSITIONS-BATCH-SHARED"):
        assert rows[clause]["status"] == "NOT CLAIMED"
        assert rows[clause]["message"].startswith("kv_cache: the file takes no cache"), rows[clause]["message"]
    assert "tied: wte itself" in report["environment"]["found"]


@pytest.mark.slow
def test_an_export_with_past_inputs_is_judged_through_its_own_cache(made, tmp_path):
    """The positions are the file's: it computes them from the length of the cache it is fed."""
    rows, report, _ = _judge(tmp_path, "--onnx", made["past_mask"])
    for clause in ("POSITIONS-OFFSET", "POSITIONS-DECODE", "POSITIONS-CHUNKED", "BOUNDS-PAST-LENGTH"):
        assert rows[clause]["status"] == "PASS", rows[clause]
    assert "positions from the cache the file is fed" in report["environment"]["found"]


@pytest.mark.slow
def test_an_export_with_position_ids_is_not_fed_positions_of_the_suites(made, tmp_path):
    rows, report, _ = _judge(tmp_path, "--onnx", made["past_position_ids"])
    assert rows["LOOKUP-EXACT"]["status"] == "PASS"
    assert rows["POSITIONS-OFFSET"]["status"] == "NOT CLAIMED"
    assert "'position_ids' input" in rows["POSITIONS-OFFSET"]["message"]


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_a_gguf_as_llama_cpps_converter_writes_it_gets_a_full_scorecard(made, tmp_path, dtype):
    if f"gguf-{dtype}" not in made:
        pytest.skip("gguf or llama-cpp-python is not installed")
    rows, report, _ = _judge(tmp_path, "--gguf", made[f"gguf-{dtype}"])
    for clause in ("LOOKUP-EXACT", "POSITIONS-OFFSET", "POSITIONS-DECODE", "TIED-LOGITS"):
        assert rows[clause]["status"] == "PASS", rows[clause]
    assert f"token_embd.weight [50257, 768] {dtype.upper()}" in report["environment"]["found"]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("mutant", "correct", "clauses"),
    [
        ("restarted", "past_mask", ("POSITIONS-OFFSET", "POSITIONS-DECODE")),
        ("untied", "logits", ("TIED-LOGITS",)),
        ("logits", "guarded", ("BOUNDS-TOKEN",)),  # the export as torch writes it: ONNX Gather wraps -1
    ],
)
def test_a_file_mutant_fails_the_clause_named_for_it(made, tmp_path, mutant, correct, clauses):
    """Each mutant fails its clauses where the file it was made from (or made into) passes them."""
    bad, _, _ = _judge(tmp_path / "mutant", "--onnx", made[mutant])
    good, _, _ = _judge(tmp_path / "correct", "--onnx", made[correct])
    for clause in clauses:
        assert (good[clause]["status"], bad[clause]["status"]) == ("PASS", "FAIL"), (good[clause], bad[clause])


def test_the_files_own_tables_are_checked_against_the_golden_data():
    """A file holding the real wpe and the known real wte values is told so; one changed wpe row
    and one changed wte value are told too."""
    from gpt2_conformance.golden import data

    golden = data.load()
    wte = np.zeros((gpt2.N_VOCAB, golden.wpe.shape[1]), np.float32)
    for k in golden.wte_known:
        wte[k.row, k.col] = k.value
    wpe = np.array(golden.wpe)

    class Real:
        @staticmethod
        def file_tables():
            return wte, wpe

    n = len(golden.wte_known)
    assert run_files.own_tables(Real) == (
        f"its own wpe is GPT-2's real wpe, bit for bit; its own wte agrees with {n} of {n} known real GPT-2 wte values"
    )
    wpe[3, 0] += 1e-3
    first = golden.wte_known[0]
    wte[first.row, first.col] += 1.0
    assert run_files.own_tables(Real) == (
        f"its own wpe is not GPT-2's real wpe (1 of {gpt2.N_CTX} rows differ); its own wte agrees with {n - 1} of {n} "
        "known real GPT-2 wte values"
    )
    assert run_files.own_tables(object()) == ""  # an adapter that cannot read its file's tables


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["openvino", "tract"])
def test_the_other_engines_run_the_same_file(made, tmp_path, engine):
    """--engine: the openvino-hf and tract-hf backends' engines, given the user's file."""
    pytest.importorskip(engine)
    out_dir = tmp_path / engine
    out = _cli("--onnx", made["past_mask"], "--engine", engine, "--report-dir", str(out_dir))
    (report,) = [f for f in os.listdir(out_dir) if f.endswith(".json")]
    with open(out_dir / report, encoding="utf-8") as f:
        rows = {c["id"]: c for c in json.load(f)["clauses"]}
    assert out.returncode in (0, 1), out.stderr[-2000:]
    for clause in ("LOOKUP-EXACT", "POSITIONS-OFFSET", "TIED-LOGITS"):
        assert rows[clause]["status"] == "PASS", rows[clause]
    assert f"run by {engine}" in out.stdout
