"""Readers for real checkpoint formats: small files written by the real libraries read back
exactly; format detection; the four GPT-2 sizes recognized by shape."""

import os
import shutil

import numpy as np
import pytest

from gpt2_conformance.api import gpt2
from gpt2_conformance.golden import readers
from helpers.golden_writers import write_npz, write_safetensors, write_tf, write_torch


def _tensors():
    rng = np.random.default_rng(3)
    return {
        "transformer.wte.weight": rng.standard_normal((7, 5), dtype=np.float32),
        "h.0.attn.c_attn.bias": rng.standard_normal(9).astype(np.float16),
        "step": np.arange(6, dtype=np.int64).reshape(2, 3),
        "ln_f.weight": np.array([np.float32(2**-149), -0.0, np.inf, 1.0], np.float32),  # denormal, -0, inf
    }


def _check_round_trip(infos, tensors):
    assert set(infos) == set(tensors)
    for name, value in tensors.items():
        info = infos[name]
        assert (info.dtype, info.shape) == (value.dtype.name, value.shape), name
        got = info.load()
        assert got.dtype == value.dtype and got.shape == value.shape, name
        assert got.tobytes() == np.ascontiguousarray(value).tobytes(), f"{name} differs after the round trip"


@pytest.mark.parametrize(
    "writer,reader",
    [(write_safetensors, readers.read_safetensors), (write_npz, readers.read_npz), (write_torch, readers.read_torch)],
    ids=["safetensors", "npz", "torch"],
)
def test_round_trip(tmp_path, writer, reader):
    tensors = _tensors()
    _check_round_trip(reader(writer(tmp_path, tensors)), tensors)


def test_round_trip_torch_legacy_format(tmp_path):
    tensors = _tensors()
    _check_round_trip(readers.read_torch(write_torch(tmp_path, tensors, legacy=True)), tensors)


def test_torch_views_and_nested_dicts(tmp_path):
    """Tensors that are strided views of one storage, and a nanoGPT-style nested checkpoint."""
    torch = pytest.importorskip("torch")
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    path = tmp_path / "ckpt.pt"
    torch.save({"model": {"a": base[1:], "b": base.t(), "c": base[:, 2]}, "iter_num": 5, "config": {"lr": 0.1}}, path)
    infos = readers.read_torch(str(path))
    assert set(infos) == {"model.a", "model.b", "model.c"}
    for name, want in (("model.a", base[1:]), ("model.b", base.t()), ("model.c", base[:, 2])):
        np.testing.assert_array_equal(infos[name].load(), want.numpy())


def test_round_trip_tf_checkpoint(tmp_path):
    """A checkpoint written by TF's own Saver, read without TF (index, data file, crc32c)."""
    tensors = {
        "model/wte": np.random.default_rng(4).standard_normal((11, 3), dtype=np.float32),
        "model/h0/ln_1/b": np.linspace(-1, 1, 5, dtype=np.float32),
        "model/h0/attn/c_attn/w": np.ones((1, 2, 6), np.float16),
    }
    prefix = write_tf(tmp_path, tensors)
    for path in (prefix, prefix + ".index", prefix + ".data-00000-of-00001", str(tmp_path)):
        _check_round_trip(readers.read_tf(path), tensors)


def test_real_openai_index_is_parsed(shared_reference):
    """The OpenAI 124M model.ckpt.index (148 tensors): model/wpe and model/wte as in PROVENANCE.md."""
    from gpt2_conformance.golden import tf_bundle

    header, entries = tf_bundle.read_index(os.path.join(shared_reference, "tf_124M_model.ckpt.index"))
    assert header["num_shards"] == 1 and len(entries) == 148
    wpe, wte = entries["model/wpe"], entries["model/wte"]
    assert (wpe.shape, wpe.offset, wpe.size, wpe.crc32c) == ((1024, 768), 340224000, 3145728, 718256369)
    assert (wte.shape, wte.offset, wte.size, wte.crc32c) == ((50257, 768), 343369728, 154389504, 237602082)
    assert max(e.offset + e.size for e in entries.values()) == 497759232  # the published data-file size


def test_an_index_entry_field_of_the_wrong_wire_type_is_named():
    """A BundleEntryProto whose shape is a number, or whose offset is length-delimited, is a
    BundleError naming the tensor and the field (not a TypeError, nor bytes read as an offset)."""
    from gpt2_conformance.golden import tf_bundle

    shape_as_varint = bytes([2 << 3 | 0, 5])  # field 2, wire type 0 (varint), value 5
    with pytest.raises(
        tf_bundle.BundleError, match="^tensor model/wte: shape is the number 5, but should be a message$"
    ):
        tf_bundle._entry("model/wte", shape_as_varint)
    offset_as_bytes = bytes([4 << 3 | 2, 1]) + b"x"  # field 4, wire type 2 (length-delimited), 1 byte
    with pytest.raises(tf_bundle.BundleError, match=r"^tensor model/wte: offset is length-delimited \(1 bytes\)"):
        tf_bundle._entry("model/wte", offset_as_bytes)


def test_hf_transformers_layouts(tmp_path):
    """A GPT2LMHeadModel saved by transformers (model.safetensors) and its state_dict saved by
    torch (zip and legacy; lm_head.weight shares wte's storage): the tables are found by name."""
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=1, n_embd=8, n_head=2, vocab_size=gpt2.N_VOCAB, n_positions=gpt2.N_CTX)
    model = transformers.GPT2LMHeadModel(config)
    model.save_pretrained(tmp_path / "hf")
    torch.save(model.state_dict(), tmp_path / "zip.bin")
    torch.save(model.state_dict(), tmp_path / "legacy.bin", _use_new_zipfile_serialization=False)
    want = {"wte": model.transformer.wte.weight.detach().numpy(), "wpe": model.transformer.wpe.weight.detach().numpy()}
    for path in (tmp_path / "hf" / "model.safetensors", tmp_path / "zip.bin", tmp_path / "legacy.bin"):
        infos = readers.READERS[readers.detect_format(str(path))](str(path))
        for table, value in want.items():
            info = readers.find_table(str(path), infos, table)
            assert info.name == f"transformer.{table}.weight"
            np.testing.assert_array_equal(info.load(), value)


@pytest.fixture
def shared_reference():
    path = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "gpt2-reference")
    if not os.path.isdir(path):
        pytest.skip("../shared/gpt2-reference is not checked out next to the repository")
    return path


def test_detect_format_by_extension_and_magic(tmp_path):
    tensors = {"x": np.zeros(2, np.float32)}
    paths = {
        "safetensors": write_safetensors(tmp_path, tensors),
        "npz": write_npz(tmp_path, tensors),
        "torch": write_torch(tmp_path, tensors),
    }
    for fmt, path in paths.items():
        assert readers.detect_format(path) == fmt
        plain = str(tmp_path / f"no_extension_{fmt}")
        shutil.copyfile(path, plain)
        assert readers.detect_format(plain) == fmt, f"{fmt} not recognized by its magic bytes"
    assert readers.detect_format(str(tmp_path / "model.ckpt.index")) == "tf"
    assert readers.resolve_folder(str(tmp_path)) == paths["safetensors"]  # an HF snapshot folder
    os.remove(paths["safetensors"])
    assert readers.resolve_folder(str(tmp_path)) == paths["torch"]
    os.remove(paths["torch"])
    assert readers.resolve_folder(str(tmp_path)) == paths["npz"]
    with pytest.raises(readers.CheckpointError, match="no such file"):
        readers.detect_format(str(tmp_path / "missing.bin.x"))


@pytest.mark.parametrize(
    "name,table,expected",
    [
        ("wte.weight", "wte", True),
        ("transformer.wte.weight", "wte", True),
        ("model/wte", "wte", True),
        ("wpe", "wpe", True),
        ("_orig_mod.transformer.wpe.weight", "wpe", True),
        ("model/wte/.ATTRIBUTES/VARIABLE_VALUE", "wte", True),
        ("model/wte:0", "wte", True),
        ("model/wte/Adam", "wte", False),
        ("lm_head.weight", "wte", False),
        ("transformer.wte_proj.weight", "wte", False),
        ("wte.weight", "wpe", False),
    ],
)
def test_table_names(name, table, expected):
    assert readers._is_table_name(name, table) is expected


@pytest.mark.parametrize("size,d", list(gpt2.SIZES.items()))
def test_four_sizes_recognized_by_shape(size, d):
    wte = readers.TensorInfo("wte", "float32", (gpt2.N_VOCAB, d), lambda: None)
    wpe = readers.TensorInfo("wpe", "float32", (gpt2.N_CTX, d), lambda: None)
    assert readers.recognize_size("f", wte, wpe) == (size, d)


@pytest.mark.parametrize(
    "wte_shape,wpe_shape,bad",
    [
        ((50257, 700), (1024, 700), "wte"),
        ((50304, 768), (1024, 768), "wte"),
        ((50257, 768), (2048, 768), "wpe"),
        ((50257, 768), (1024, 1024), "wpe"),
        ((50257, 768, 1), (1024, 768), "wte"),
    ],
)
def test_other_shapes_are_rejected_naming_the_tensor(wte_shape, wpe_shape, bad):
    wte = readers.TensorInfo("transformer.wte.weight", "float32", wte_shape, lambda: None)
    wpe = readers.TensorInfo("transformer.wpe.weight", "float32", wpe_shape, lambda: None)
    with pytest.raises(readers.CheckpointError) as err:
        readers.recognize_size("model.safetensors", wte, wpe)
    assert f"transformer.{bad}.weight" in str(err.value) and "model.safetensors" in str(err.value)
