"""Bad checkpoints: truncated, corrupted, wrong shapes or dtype, another model, a pickle with
code in it. Each gives a CheckpointError naming the file and (where there is one) the tensor,
and nothing from the file is executed."""

import io
import os
import pickle
import zipfile

import numpy as np
import pytest

from gpt2_conformance.golden import readers
from helpers.golden_writers import write_npz, write_safetensors, write_tf, write_torch

SMALL = {
    "transformer.wte.weight": np.arange(4000, dtype=np.float32).reshape(200, 20),
    "transformer.wpe.weight": np.ones((30, 20), np.float32),
}


def _error(fn, *args) -> str:
    with pytest.raises(readers.CheckpointError) as err:
        fn(*args)
    return str(err.value)


def _load_all(path, reader):
    for info in reader(path).values():
        info.load()


def _truncate(path, keep: int):
    with open(path, "r+b") as f:
        f.truncate(keep)


def _offset_of(path, array) -> int:
    """Where the array's bytes sit in the file (stored uncompressed)."""
    with open(path, "rb") as f:
        offset = f.read().find(np.ascontiguousarray(array).tobytes())
    assert offset >= 0
    return offset


def _flip(path, offset: int):
    with open(path, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ 0x01]))


# -- truncated ----------------------------------------------------------------------------


def test_truncated_safetensors_names_file_and_tensor(tmp_path):
    path = write_safetensors(tmp_path, SMALL)
    _truncate(path, os.path.getsize(path) - 100)
    message = _error(readers.read_safetensors, path)
    assert path in message and "truncated" in message and "transformer.w" in message


@pytest.mark.parametrize("legacy", [False, True], ids=["zip", "legacy"])
def test_truncated_torch_file(tmp_path, legacy):
    path = write_torch(tmp_path, SMALL, legacy=legacy)
    _truncate(path, os.path.getsize(path) - 500)
    message = _error(_load_all, path, readers.read_torch)
    assert path in message and ("truncated" in message or "zip" in message)
    if legacy:  # the stream has no index: the tensor whose bytes are cut is named
        assert "'transformer.w" in message, message


def test_truncated_tf_data_file_names_tensor(tmp_path):
    prefix = write_tf(
        tmp_path, {"model/wte": SMALL["transformer.wte.weight"], "model/wpe": SMALL["transformer.wpe.weight"]}
    )
    data = prefix + ".data-00000-of-00001"
    _truncate(data, os.path.getsize(data) - 8)
    message = _error(_load_all, prefix, readers.read_tf)
    assert data in message and "truncated" in message and "'model/" in message


def test_truncated_tf_index(tmp_path):
    prefix = write_tf(tmp_path, {"model/wte": SMALL["transformer.wte.weight"]})
    _truncate(prefix + ".index", 40)
    message = _error(readers.read_tf, prefix)
    assert prefix + ".index" in message and "footer" in message


def test_truncated_npz(tmp_path):
    path = write_npz(tmp_path, SMALL)
    _truncate(path, os.path.getsize(path) // 2)
    message = _error(_load_all, path, readers.read_npz)
    assert path in message


# -- corrupted ----------------------------------------------------------------------------


def test_corrupted_torch_storage_fails_its_crc(tmp_path):
    path = write_torch(tmp_path, SMALL)
    _flip(path, _offset_of(path, SMALL["transformer.wte.weight"]) + 1000)
    message = _error(_load_all, path, readers.read_torch)
    assert path in message and "CRC" in message and "'transformer.w" in message


def test_corrupted_tf_data_fails_its_crc32c(tmp_path):
    prefix = write_tf(tmp_path, {"model/wte": SMALL["transformer.wte.weight"]})
    _flip(prefix + ".data-00000-of-00001", 100)
    message = _error(_load_all, prefix, readers.read_tf)
    assert "crc32c" in message and "'model/wte'" in message and "corrupted" in message


def test_corrupted_tf_index_fails_its_block_crc(tmp_path):
    prefix = write_tf(tmp_path, {"model/wte": SMALL["transformer.wte.weight"]})
    _flip(prefix + ".index", 3)
    message = _error(readers.read_tf, prefix)
    assert prefix + ".index" in message and "corrupted" in message


def test_corrupted_safetensors_header(tmp_path):
    path = write_safetensors(tmp_path, SMALL)
    _flip(path, 9)  # inside the JSON header
    message = _error(readers.read_safetensors, path)
    assert path in message


def test_corrupted_npz_member(tmp_path):
    path = write_npz(tmp_path, SMALL)
    _flip(path, _offset_of(path, SMALL["transformer.wte.weight"]) + 1000)
    message = _error(_load_all, path, readers.read_npz)
    assert path in message and "'transformer.wte.weight'" in message


# -- wrong dtype, another model, ambiguous --------------------------------------------------


def test_wrong_dtype_names_tensor(tmp_path):
    path = write_safetensors(
        tmp_path, {"wte.weight": np.zeros((50257, 8), np.float16), "wpe.weight": np.zeros((1024, 8), np.float16)}
    )
    message = _error(readers.load_checkpoint, path)
    assert path in message and "'wte.weight'" in message and "dtype float16" in message and "float32" in message


def test_wrong_shape_names_tensor(tmp_path):
    path = write_npz(tmp_path, {"wte": np.zeros((500, 8), np.float32), "wpe": np.zeros((1024, 8), np.float32)})
    message = _error(readers.load_checkpoint, path)
    assert path in message and "'wte'" in message and "[500, 8]" in message and "50257" in message


def test_checkpoint_of_another_model(tmp_path):
    bert = {
        "bert.embeddings.word_embeddings.weight": np.zeros((30522, 4), np.float32),
        "bert.embeddings.position_embeddings.weight": np.zeros((512, 4), np.float32),
    }
    path = write_safetensors(tmp_path, bert)
    message = _error(readers.load_checkpoint, path)
    assert path in message and "no GPT-2 wte tensor" in message and "word_embeddings" in message


def test_two_candidate_tables_are_ambiguous(tmp_path):
    path = write_npz(
        tmp_path, {"wte": np.zeros((3, 2), np.float32), "transformer.wte.weight": np.zeros((3, 2), np.float32)}
    )
    message = _error(readers.load_checkpoint, path)
    assert "2 tensors could be GPT-2's wte" in message


def test_npz_object_array_is_not_unpickled(tmp_path):
    path = str(tmp_path / "objects.npz")
    np.savez(path, wte=np.array([{"a": 1}], dtype=object), wpe=np.zeros((1024, 8), np.float32))
    message = _error(readers.load_checkpoint, path)
    assert "'wte'" in message and "dtype object" in message


# -- pickles with code in them --------------------------------------------------------------


class _Payload:
    """Unpickling this opens (creates) `marker` for writing: code execution, if it happens."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def _torch_zip_with(pickled: bytes, path):
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("archive/data.pkl", pickled)
        z.writestr("archive/byteorder", "little")
        z.writestr("archive/version", "3\n")


def test_payload_would_run_under_plain_pickle(tmp_path):
    """The payload is live: plain pickle.loads creates the marker (so the tests below can fail)."""
    marker = tmp_path / "ran"
    pickle.loads(pickle.dumps(_Payload(marker))).close()
    assert marker.exists()


@pytest.mark.parametrize("layout", ["zip", "legacy", "plain"])
def test_malicious_pickle_is_refused_and_not_run(tmp_path, layout):
    marker = tmp_path / "pwned"
    state = {"wte.weight": _Payload(marker), "wpe.weight": 1}
    path = tmp_path / "pytorch_model.bin"
    if layout == "zip":
        _torch_zip_with(pickle.dumps(state, protocol=2), path)
    elif layout == "legacy":
        buf = io.BytesIO()
        for obj in (0x1950A86A20F9469CFC6C, 1001, {"little_endian": True}):
            pickle.dump(obj, buf, protocol=2)
        pickle.dump(state, buf, protocol=2)
        path.write_bytes(buf.getvalue())
    else:
        path.write_bytes(pickle.dumps(_Payload(marker), protocol=2))
    message = _error(readers.load_checkpoint, str(path))
    assert not marker.exists(), "the pickle's code was executed"
    assert str(path) in message and "refused" in message and "nothing from the file was executed" in message
    assert "open" in message  # names the global it refused (builtins.open / io.open)
