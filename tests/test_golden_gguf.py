"""GGUF checkpoints (llama.cpp's format) written by the gguf package's own GGUFWriter: the dims
order, every stored type read back as float32, the judging of dequantised tables (float16 and
bfloat16 rounding, Q8_0's derived bound), `golden --checkpoint` on full-size files with the real
wpe, and malformed files, each a CheckpointError naming the file, the tensor and the rule."""

import argparse
import os

import numpy as np
import pytest

from gpt2_conformance.golden import command, data, dequantised, readers
from gpt2_conformance.runtime import numerics
from helpers.golden_writers import GGUF_NAMES, write_gguf

gguf = pytest.importorskip("gguf")
WTE, WPE = GGUF_NAMES["wte"], GGUF_NAMES["wpe"]


@pytest.fixture(scope="module")
def golden():
    return data.load()


def _error(fn, *args) -> str:
    with pytest.raises(readers.CheckpointError) as err:
        fn(*args)
    return str(err.value)


def _load_all(path):
    for info in readers.read_gguf(path).values():
        info.load()


def _scaled_rows(seed: int, shape=(16, 64)) -> np.ndarray:
    """Rows of very different magnitudes (2^-30 .. 2^4), so float16 subnormals and Q8_0 scales
    below float16's smallest normal are exercised too."""
    rng = np.random.default_rng(seed)
    scale = np.exp2(rng.uniform(-30, 4, (shape[0], 1)))
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def _tag_offset(path: str, name: str) -> int:
    """File offset of a tensor's type tag, from the reader's own parsed tensor-info field."""
    tensor = next(t for t in gguf.GGUFReader(path).tensors if t.name == name)
    return tensor.field.offset + sum(int(p.nbytes) for p in tensor.field.parts[:4])


def _patch_tag(path: str, name: str, tag: int) -> None:
    offset = _tag_offset(path, name)
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(int(tag).to_bytes(4, "little"))


# -- layout and stored types ---------------------------------------------------------------


def test_dims_are_stored_reversed_and_read_back_in_numpy_order(tmp_path, golden):
    """GGUF lists ne[0] (the row length) first: GGUFReader's shape is [768, 1024] for the real
    [1024, 768] wpe, its data (1024, 768); read_gguf gives numpy order and the rows in place."""
    path = write_gguf(tmp_path, {WPE: golden.wpe, "x": np.arange(6, dtype=np.float32).reshape(2, 3)})
    tensor = next(t for t in gguf.GGUFReader(path).tensors if t.name == WPE)
    assert tensor.shape.tolist() == [768, 1024] and tensor.data.shape == (1024, 768)
    infos = readers.read_gguf(path)
    assert (infos[WPE].dtype, infos[WPE].shape, infos["x"].shape) == ("float32", (1024, 768), (2, 3))
    wpe = infos[WPE].load()
    assert wpe.tobytes() == golden.wpe.tobytes(), "the real wpe differs after a GGUF round trip"
    assert wpe[300].tobytes() == golden.wpe[300].tobytes() and not isinstance(wpe, np.memmap)
    np.testing.assert_array_equal(infos["x"].load(), np.arange(6, dtype=np.float32).reshape(2, 3))


@pytest.mark.parametrize("stored,dtype", [("F32", "float32"), ("F16", "float16"), ("BF16", "bfloat16")])
def test_float_types_read_as_their_float32_values(tmp_path, stored, dtype):
    """F16/BF16 written by gguf's quantize read back as round_to_dtype(x): gguf's conversions and
    the DTYPE clauses' rounding agree (nearest even), subnormals included."""
    x = _scaled_rows(1)
    info = readers.read_gguf(write_gguf(tmp_path, {"t": x}, {"t": stored}))["t"]
    got = info.load()
    assert (info.dtype, info.shape, got.dtype) == (dtype, x.shape, np.float32)
    want = numerics.round_to_dtype(x, dtype)
    assert got.tobytes() == want.tobytes(), f"{stored} read back differs from round_to_dtype(x, {dtype!r})"


def test_q8_0_reads_within_its_bound(tmp_path):
    x = _scaled_rows(2)
    info = readers.read_gguf(write_gguf(tmp_path, {"t": x}, {"t": "Q8_0"}))["t"]
    got = info.load()
    assert (info.dtype, info.shape, got.dtype) == ("Q8_0", x.shape, np.float32)
    err = np.abs(got.astype(np.float64) - x)
    assert (err <= dequantised.q8_0_bound(x)).all() and err.max() > 0


def test_big_endian_file(tmp_path, golden):
    """A big-endian GGUF (GGUFWriter(endianess=BIG)): F32/F16 values read correctly; block types
    are refused by name (gguf's dequantize reads little-endian blocks)."""
    x = _scaled_rows(3)
    path = write_gguf(tmp_path, {WPE: golden.wpe, "h": x, "q": x}, {"h": "F16", "q": "Q8_0"}, big_endian=True)
    infos = readers.read_gguf(path)
    assert infos[WPE].load().tobytes() == golden.wpe.tobytes()
    assert infos["h"].load().tobytes() == numerics.round_to_dtype(x, "float16").tobytes()
    message = _error(infos["q"].load)
    assert path in message and "'q'" in message and "big-endian" in message


def test_detect_format_by_extension_and_magic(tmp_path):
    path = write_gguf(tmp_path, {"x": np.zeros(2, np.float32)})
    assert readers.detect_format(path) == "gguf"
    plain = tmp_path / "no_extension"
    plain.write_bytes(open(path, "rb").read())
    assert readers.detect_format(str(plain)) == "gguf"
    os.remove(plain)
    assert readers.resolve_folder(str(tmp_path)) == path


# -- judging dequantised tables ------------------------------------------------------------


def _q8_0_round_trip(x: np.ndarray) -> np.ndarray:
    q8_0 = gguf.GGMLQuantizationType.Q8_0
    return gguf.quants.dequantize(gguf.quants.quantize(x, q8_0), q8_0)


def test_q8_0_bound_holds_and_is_tight():
    """On 200,000 blocks over 2^-30..2^4 (f16-subnormal scales included) quantised by gguf's
    Q8_0 (bit-exact with ggml's reference): every error within the bound, the largest close to it."""
    x = _scaled_rows(4, (200_000, 32))
    deq = _q8_0_round_trip(x)
    ratio = np.abs(deq.astype(np.float64) - x) / dequantised.q8_0_bound(x)
    assert ratio.max() <= 1, f"Q8_0 error / bound = {ratio.max()} > 1"
    assert ratio.max() > 0.95, f"the bound is loose: largest error / bound {ratio.max():.3f}"


def test_half_the_scale_alone_is_not_q8_0s_bound(golden):
    """Why the bound has its float16-scale term: the real wpe quantised by gguf's Q8_0 exceeds
    d/2 in 916 elements, by up to 0.549 d (the numbers in dequantised.py's docstring)."""
    real = golden.wpe
    deq = _q8_0_round_trip(real)
    blocks = real.reshape(-1, 32)
    d = (np.abs(blocks).max(axis=1, keepdims=True) / np.float32(127)).astype(np.float64)
    err = np.abs(deq.reshape(-1, 32).astype(np.float64) - blocks)
    assert (int((err > d / 2).sum()), round(float((err / d).max()), 3)) == (916, 0.549)


def _one_off(table: np.ndarray, index, dtype: str) -> np.ndarray:
    """`table` with one element moved to the next `dtype` value up."""
    out = table.copy()
    out[index] = np.float32(out[index] + numerics.ulp(out[index], dtype))
    return out


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_rounded_wpe_matches_and_one_ulp_off_does_not(golden, dtype):
    rounded = numerics.round_to_dtype(golden.wpe, dtype)
    verdict, lines = dequantised.judge_wpe(rounded, dtype, golden.wpe)
    assert verdict is True and f"MATCHES the real GPT-2 124M wpe rounded to {dtype}" in lines[0], lines
    verdict, lines = dequantised.judge_wpe(_one_off(rounded, (700, 3), dtype), dtype, golden.wpe)
    assert verdict is False and "1 of 786432 elements differ; first at wpe[700, 3]" in lines[0], lines


def test_bfloat16_by_truncation_does_not_match(golden):
    truncated = (golden.wpe.view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32)
    verdict, lines = dequantised.judge_wpe(truncated, "bfloat16", golden.wpe)
    assert verdict is False and "DOES NOT MATCH" in lines[0], lines


def test_largest_error_names_the_worst_element(golden):
    rounded = numerics.round_to_dtype(golden.wpe, "float16")
    err = np.abs(rounded.astype(np.float64) - golden.wpe)
    i, j = np.unravel_index(np.argmax(err), err.shape)
    line = dequantised.largest_error("wpe", rounded, golden.wpe)
    assert f"|diff| {err[i, j]:.3g} at wpe[{i}, {j}] = {float(rounded[i, j])!r}" in line, line


def test_q8_0_wpe_within_and_a_changed_element_exceeds(golden):
    q8 = _q8_0_round_trip(golden.wpe)
    verdict, lines = dequantised.judge_wpe(q8, "Q8_0", golden.wpe)
    assert verdict is True and "WITHIN Q8_0's error bound" in lines[0] and "no DTYPE clause" in lines[1], lines
    bad = q8.copy()
    bad[5, 9] += np.float32(dequantised.q8_0_bound(golden.wpe)[5, 9] * 2)
    verdict, lines = dequantised.judge_wpe(bad, "Q8_0", golden.wpe)
    assert verdict is False and "EXCEEDS" in lines[0] and "first at wpe[5, 9]" in lines[0], lines


def test_other_types_are_reported_not_judged(golden):
    verdict, lines = dequantised.judge_wpe(golden.wpe + np.float32(1e-3), "Q4_K", golden.wpe)
    assert verdict is None and "NOT JUDGED" in lines[0] and "largest error" in lines[1], lines


def test_dequantised_wte_is_checked_at_its_known_values(golden):
    standin = data.standin_wte(golden, np.zeros((50257, 768), np.float32))
    verdict, lines = dequantised.judge_wte(numerics.round_to_dtype(standin, "float16"), "float16", golden.wte_known)
    assert verdict is None and "CANNOT BE VERIFIED in full" in lines[0] and "all 77 known" in lines[0], lines
    verdict, lines = dequantised.judge_wte(standin, "float16", golden.wte_known)  # exact values: not float16 ones
    assert verdict is False and "DOES NOT MATCH" in lines[0], lines
    verdict, lines = dequantised.judge_wte(standin, "Q8_0", golden.wte_known)
    assert verdict is None and "CANNOT BE VERIFIED" in lines[0] and "largest error" in lines[1], lines


# -- full-size files and `golden --checkpoint` ------------------------------------------------


def _run(argv, capsys) -> tuple[int, str]:
    parser = argparse.ArgumentParser()
    command.add_parser(parser.add_subparsers(dest="command"))
    code = command.run(parser.parse_args(["golden", *argv]))
    captured = capsys.readouterr()
    return code, captured.out + captured.err


@pytest.fixture
def full_size(tmp_path):
    """Writes full-size GGUFs (zero-page wte: no memory until written) and removes them after."""
    paths = []

    def write(wte, wpe, types=None, name="model.gguf"):
        paths.append(write_gguf(tmp_path, {WTE: wte, WPE: wpe}, types, name=name))
        return paths[-1]

    yield write
    for path in paths:
        os.remove(path)  # up to 158 MB each; pytest keeps recent tmp_path folders


def test_golden_command_recognizes_the_real_wpe_in_an_f32_gguf(full_size, golden, capsys):
    path = full_size(np.zeros((50257, 768), np.float32), golden.wpe)
    ckpt = readers.load_checkpoint(path)
    assert (ckpt.format, ckpt.size, ckpt.wte_name, ckpt.wpe_name, ckpt.dequantised) == ("gguf", "124M", WTE, WPE, ())
    code, out = _run(["--checkpoint", path], capsys)
    assert "wpe  MATCHES the real GPT-2 124M wpe" in out, out
    assert "all 786432 elements of wpe are bit-identical to the real table" in out
    assert "wte  DOES NOT MATCH the real GPT-2 124M wte" in out and "0 of 77 known real wte values agree" in out
    for clause, verdict in (
        ("GOLDEN-TABLES-ROUNDTRIP", "PASS"),
        ("GOLDEN-WPE-ROWS", "PASS"),
        ("GOLDEN-H", "FAIL"),
        ("GOLDEN-DECODE", "PASS"),
        ("GOLDEN-LOGITS", "PASS"),
    ):
        assert any(line.split()[:2] == [clause, verdict] for line in out.splitlines()), f"{clause} {verdict}\n{out}"
    assert code == 1


def test_one_ulp_in_one_wpe_element_of_a_gguf_is_rejected_naming_it(full_size, golden, capsys):
    wpe = golden.wpe.copy()
    wpe[300, 7] = np.nextafter(wpe[300, 7], np.float32(np.inf))
    code, out = _run(["--checkpoint", full_size(np.zeros((50257, 768), np.float32), wpe), "--digests-only"], capsys)
    assert code == 1 and "wpe  DOES NOT MATCH the real GPT-2 124M wpe" in out, out
    assert "1 of 786432 elements of wpe differ" in out and "first at wpe[300, 7]" in out and "1 ulp apart" in out


def test_f16_gguf_is_reported_with_its_quantisation_error(full_size, golden, capsys):
    """Both tables F16: wpe matches the real one rounded to float16, with its largest error and
    that element; wte's known values agree after rounding but the rest cannot be verified (exit 1)."""
    standin = data.standin_wte(golden, np.zeros((50257, 768), np.float32))
    path = full_size(standin, golden.wpe, {WTE: "F16", WPE: "F16"})
    code, out = _run(["--checkpoint", path, "--digests-only"], capsys)
    rounded = numerics.round_to_dtype(golden.wpe, "float16")
    err = np.abs(rounded.astype(np.float64) - golden.wpe)
    i, j = np.unravel_index(np.argmax(err), err.shape)
    assert "float16, dequantised to float32: GPT-2 124M by shape" in out, out
    assert "wpe  float16: MATCHES the real GPT-2 124M wpe rounded to float16" in out
    assert f"largest error against the real wpe: |diff| {err[i, j]:.3g} at wpe[{i}, {j}]" in out
    assert "wte  float16: CANNOT BE VERIFIED in full" in out and "all 77 known real wte values agree" in out
    assert code == 1


def test_llama_cpp_layout_f32_wpe_f16_wte(full_size, golden, capsys):
    """convert_hf_to_gguf.py keeps position_embd in F32 whatever --outtype (POS_EMBD is in its
    always-float32 list): wpe is digest-checked, wte F16 is judged at its known values."""
    path = full_size(np.zeros((50257, 768), np.float32), golden.wpe, {WTE: "F16"})
    code, out = _run(["--checkpoint", path, "--digests-only"], capsys)
    assert "wpe  MATCHES the real GPT-2 124M wpe" in out and "wte  float16: DOES NOT MATCH" in out, out
    assert code == 1


def test_q8_0_wpe_in_a_gguf(full_size, golden, capsys):
    path = full_size(np.zeros((50257, 768), np.float32), golden.wpe, {WTE: "F16", WPE: "Q8_0"})
    code, out = _run(["--checkpoint", path, "--digests-only"], capsys)
    assert "wpe  Q8_0: WITHIN Q8_0's error bound of the real GPT-2 124M wpe in all 786432 elements" in out, out
    assert "largest error against the real wpe" in out and code == 1


def test_run_checkpoint_gets_the_dequantised_float32_tables(full_size, golden):
    """`run --checkpoint` (plugin fixture golden_tables -> data.checkpoint_tables): float32,
    read-only, the dequantised values, and the origin line says so."""
    path = full_size(np.zeros((50257, 768), np.float32), golden.wpe, {WTE: "F16", WPE: "F16"})
    tables = data.checkpoint_tables(path)
    assert tables.wpe.dtype == np.float32 and not tables.wpe.flags.writeable and tables.n_embd == 768
    assert tables.wpe.tobytes() == numerics.round_to_dtype(golden.wpe, "float16").tobytes()
    assert "float16, dequantised to float32" in tables.origin, tables.origin


# -- malformed files -----------------------------------------------------------------------


def test_not_a_gguf_file(tmp_path):
    path = tmp_path / "model.gguf"
    path.write_bytes(b"GGML" + bytes(100))
    message = _error(readers.load_checkpoint, str(path))
    assert str(path) in message and "not a GGUF file" in message and "magic" in message


@pytest.mark.parametrize("keep", [0, 30], ids=["empty", "header"])
def test_truncated_header(tmp_path, keep):
    path = write_gguf(tmp_path, {"x": np.zeros((8, 64), np.float32)})
    with open(path, "r+b") as f:
        f.truncate(keep)
    message = _error(readers.read_gguf, path)
    assert path in message and "GGUF" in message


def test_truncated_data_names_the_tensor(tmp_path):
    path = write_gguf(tmp_path, {"a": np.ones((8, 64), np.float32), WPE: np.ones((8, 64), np.float32)})
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) - 100)
    message = _error(readers.read_gguf, path)
    assert path in message and f"'{WPE}'" in message and "truncated" in message, message


def test_wrong_shape_names_the_tensor(tmp_path):
    path = write_gguf(tmp_path, {WTE: np.zeros((500, 8), np.float32), WPE: np.zeros((1024, 8), np.float32)})
    message = _error(readers.load_checkpoint, path)
    assert path in message and f"'{WTE}'" in message and "[500, 8]" in message and "50257" in message


def test_transposed_table_is_rejected(tmp_path, golden):
    path = write_gguf(tmp_path, {WTE: np.zeros((50257, 768), np.float32), WPE: golden.wpe.T.copy()})
    try:
        message = _error(readers.load_checkpoint, path)
    finally:
        os.remove(path)
    assert f"'{WPE}'" in message and "[768, 1024]" in message and "[1024, d]" in message, message


def test_integer_table_is_the_wrong_dtype(tmp_path):
    path = write_gguf(tmp_path, {WTE: np.zeros((50257, 8), np.int32), WPE: np.zeros((1024, 8), np.float32)})
    message = _error(readers.load_checkpoint, path)
    assert path in message and f"'{WTE}'" in message and "dtype int32" in message and "dequantises" in message


def test_type_the_reader_cannot_dequantise(tmp_path):
    """Q8_1 (ggml's activation type): the file is valid, gguf 0.19.0 has no dequantiser for it."""
    block, size = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType.Q8_1]
    path = write_gguf(tmp_path, {WPE: np.zeros((8, 64 // block * size), np.uint8)}, {WPE: "Q8_1"})  # raw blocks
    message = _error(_load_all, path)
    assert path in message and f"'{WPE}'" in message and "Q8_1 cannot be dequantised" in message, message


def test_unknown_type_tag(tmp_path):
    path = write_gguf(tmp_path, {WPE: np.zeros((8, 64), np.float32)})
    _patch_tag(path, WPE, 99)
    message = _error(readers.read_gguf, path)
    assert path in message and f"'{WPE}'" in message and "type tag 99" in message, message


def test_type_tag_that_does_not_fit_the_data(tmp_path):
    """F16 data relabelled F32 claims twice its bytes: it runs into the next tensor (or, last,
    past the end of the file)."""
    tensors = {WPE: np.ones((8, 64), np.float32), WTE: np.ones((8, 64), np.float32)}
    path = write_gguf(tmp_path, tensors, {WPE: "F16", WTE: "F16"})
    _patch_tag(path, WPE, gguf.GGMLQuantizationType.F32)
    message = _error(readers.read_gguf, path)
    assert path in message and f"'{WPE}'" in message and f"runs into the data of '{WTE}'" in message, message
    path = write_gguf(tmp_path, tensors, {WPE: "F16", WTE: "F16"}, name="last.gguf")
    _patch_tag(path, WTE, gguf.GGMLQuantizationType.F32)
    message = _error(readers.read_gguf, path)
    assert f"'{WTE}'" in message and "truncated (or a type tag or shape" in message, message


def test_row_not_a_multiple_of_the_block(tmp_path):
    path = write_gguf(tmp_path, {WPE: np.zeros((8, 48), np.float32)})
    _patch_tag(path, WPE, gguf.GGMLQuantizationType.Q8_0)
    message = _error(readers.read_gguf, path)
    assert f"'{WPE}'" in message and "blocks of 32 elements" in message and "48" in message, message


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_missing_table_names_what_the_file_holds(tmp_path, arch):
    path = write_gguf(
        tmp_path, {WTE: np.zeros((50257, 8), np.float32), "output_norm.weight": np.ones(8, np.float32)}, arch=arch
    )
    message = _error(readers.load_checkpoint, path)
    assert path in message and f"no {WPE} tensor" in message and f"general.architecture is '{arch}'" in message
    assert "output_norm.weight [8] float32" in message, message
