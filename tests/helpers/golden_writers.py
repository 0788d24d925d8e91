"""Checkpoints written by the real libraries, for the GOLDEN reader tests.

safetensors.numpy.save_file; torch.save of a state_dict (zip, or the legacy stream); a TF
checkpoint written by tf.compat.v1.train.Saver from variables named like OpenAI's (model/wte,
model/wpe); np.savez; gguf.GGUFWriter (llama.cpp's names token_embd.weight, position_embd.weight;
tensors stored as F32 or quantised by gguf.quants.quantize). Each writer takes {name: array}
and returns the path to read.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

FORMATS = ("safetensors", "torch", "tf", "npz")
HF_NAMES = {"wte": "wte.weight", "wpe": "wpe.weight"}  # HF openai-community/gpt2 model.safetensors
TF_NAMES = {"wte": "model/wte", "wpe": "model/wpe"}  # OpenAI model.ckpt
GGUF_NAMES = {"wte": "token_embd.weight", "wpe": "position_embd.weight"}  # llama.cpp (gguf_reader.py)


def write_safetensors(directory, tensors: dict) -> str:
    save_file = pytest.importorskip("safetensors.numpy").save_file

    path = os.path.join(directory, "model.safetensors")
    save_file({k: np.ascontiguousarray(v) for k, v in tensors.items()}, path)
    return path


def write_torch(directory, tensors: dict, legacy: bool = False) -> str:
    torch = pytest.importorskip("torch")
    path = os.path.join(directory, "pytorch_model.bin")
    state = {k: torch.from_numpy(np.array(v, copy=True)) for k, v in tensors.items()}  # writable copies
    torch.save(state, path, _use_new_zipfile_serialization=not legacy)
    return path


def write_tf(directory, tensors: dict) -> str:
    tf = pytest.importorskip("tensorflow")
    prefix = os.path.join(directory, "model.ckpt")
    graph = tf.Graph()
    with graph.as_default():
        feeds, assigns = {}, []
        for name, value in tensors.items():
            var = tf.compat.v1.get_variable(name, shape=value.shape, dtype=tf.as_dtype(value.dtype))
            placeholder = tf.compat.v1.placeholder(var.dtype, value.shape)
            feeds[placeholder] = value
            assigns.append(var.assign(placeholder))
        saver = tf.compat.v1.train.Saver()
        with tf.compat.v1.Session(graph=graph) as session:
            session.run(assigns, feeds)
            saver.save(session, prefix)
    return prefix


def write_npz(directory, tensors: dict) -> str:
    path = os.path.join(directory, "gpt2.npz")
    np.savez(path, **tensors)
    return path


def write_gguf(
    directory,
    tensors: dict,
    types: dict | None = None,
    name: str = "model.gguf",
    arch: str = "gpt2",
    big_endian: bool = False,
) -> str:
    """tensors[k] stored as types[k] ("F32", "F16", "BF16", "Q8_0", ...: gguf.quants.quantize; a
    uint8 array is taken as that type's raw blocks), or as its own numpy dtype when types has no
    entry for it."""
    gguf = pytest.importorskip("gguf")
    path = os.path.join(directory, name)
    writer = gguf.GGUFWriter(path, arch, endianess=gguf.GGUFEndian.BIG if big_endian else gguf.GGUFEndian.LITTLE)
    for key, value in tensors.items():
        if key in (types or {}):
            qtype = gguf.GGMLQuantizationType[types[key]]
            data = value if value.dtype == np.uint8 else gguf.quants.quantize(np.asarray(value, np.float32), qtype)
            writer.add_tensor(key, data, raw_dtype=qtype if data.dtype == np.uint8 else None)
        else:
            writer.add_tensor(key, np.ascontiguousarray(value))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def write(fmt: str, directory, wte: np.ndarray, wpe: np.ndarray, extra: dict | None = None) -> str:
    """A GPT-2-shaped checkpoint in `fmt` with the names that format uses for real GPT-2."""
    names = {"tf": TF_NAMES, "gguf": GGUF_NAMES}.get(fmt, HF_NAMES)
    tensors = {names["wte"]: wte, names["wpe"]: wpe, **(extra or {})}
    os.makedirs(directory, exist_ok=True)
    return {
        "safetensors": write_safetensors,
        "torch": write_torch,
        "tf": write_tf,
        "npz": write_npz,
        "gguf": write_gguf,
    }[fmt](directory, tensors)


def random_wte(n_embd: int = 768, seed: int = 7) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.standard_normal((50257, n_embd), dtype=np.float32) * np.float32(0.02)
