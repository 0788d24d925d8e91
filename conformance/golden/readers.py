"""wte and wpe from a real GPT-2 checkpoint, in any of five formats.

    read_safetensors(path)   HF model.safetensors (the safetensors library)
    read_torch(path)         HF pytorch_model.bin: torch zip or legacy, restricted unpickler
    read_tf(path)            OpenAI model.ckpt (.index + .data-*), tensors model/wte, model/wpe
    read_npz(path)           numpy .npz (allow_pickle=False)
    read_gguf(path)          llama.cpp .gguf (the gguf package; gguf_reader.py), tensors
                             token_embd.weight, position_embd.weight; F16/BF16/Q8_0/... tables
                             are dequantised to float32 and the stored type is kept
    load_checkpoint(path)    detect the format, find wte/wpe, check dtype and shapes, recognize
                             the size (124M/355M/774M/1558M) from n_embd

Each per-format function returns {tensor name: TensorInfo} with a `load()` that reads the
bytes of that tensor only. Every error is a CheckpointError naming the file, the tensor (where
there is one) and the rule broken.
"""

from __future__ import annotations

import functools
import json
import os
import re
import struct
import zipfile

import numpy as np

from gpt2_conformance.api import gpt2
from gpt2_conformance.golden import tf_bundle, torch_pickle
from gpt2_conformance.golden.checkpoint import Checkpoint, CheckpointError, TensorInfo, wrap

FORMATS = ("safetensors", "torch", "tf", "npz", "gguf")
_NAME_TAIL = {"", "weight", "embeddings", "ATTRIBUTES", "VARIABLE_VALUE"}  # after the "wte"/"wpe" part


# -- the four formats ------------------------------------------------------------------


def read_safetensors(path: str) -> dict[str, TensorInfo]:
    try:
        from safetensors import safe_open
    except ImportError:
        raise CheckpointError(
            path, "reading .safetensors needs the safetensors package (pip install safetensors)"
        ) from None
    names = {
        "F32": "float32",
        "F16": "float16",
        "BF16": "bfloat16",
        "F64": "float64",
        "I64": "int64",
        "I32": "int32",
        "U8": "uint8",
        "BOOL": "bool",
    }
    _check_safetensors_header(path)
    try:
        with safe_open(path, framework="numpy") as f:
            infos = {}
            for key in f.keys():
                sl = f.get_slice(key)
                infos[key] = TensorInfo(
                    key,
                    names.get(sl.get_dtype(), sl.get_dtype()),
                    tuple(sl.get_shape()),
                    functools.partial(_safetensors_tensor, path, key),
                )
            return infos
    except Exception as exc:  # noqa: BLE001 - SafetensorError and friends, named with the file
        raise wrap(path, None, exc) from exc


def _check_safetensors_header(path: str) -> None:
    """The header's byte ranges fit in the file (a truncated file is named before reading)."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise CheckpointError(path, f"{size} bytes is too short for a safetensors file (8-byte header length)")
        n = struct.unpack("<Q", head)[0]
        if n > size - 8:
            raise CheckpointError(
                path,
                f"safetensors header length {n} exceeds the file ({size} bytes): truncated or not a safetensors file",
            )
        try:
            header = json.loads(f.read(n))
        except ValueError as exc:
            raise CheckpointError(path, f"safetensors header is not valid JSON ({exc})") from None
    if not isinstance(header, dict):
        raise CheckpointError(path, "safetensors header is not a JSON object")
    for key, meta in header.items():
        if key == "__metadata__":
            continue
        try:
            end = int(meta["data_offsets"][1])
        except (KeyError, IndexError, TypeError, ValueError):
            raise CheckpointError(path, "safetensors header entry has no valid data_offsets", key) from None
        if 8 + n + end > size:
            raise CheckpointError(
                path, f"data ends at byte {8 + n + end} but the file has {size} bytes: truncated", key
            )


def _safetensors_tensor(path: str, key: str) -> np.ndarray:
    from safetensors import safe_open

    try:
        with safe_open(path, framework="numpy") as f:
            return f.get_tensor(key)
    except Exception as exc:  # noqa: BLE001
        raise wrap(path, key, exc) from exc


def read_torch(path: str) -> dict[str, TensorInfo]:
    try:
        torch_file = torch_pickle.TorchFile(path)
    except (torch_pickle.UnsafePickleError, torch_pickle.TorchFormatError) as exc:
        raise CheckpointError(path, str(exc)) from None
    except Exception as exc:  # noqa: BLE001 - truncated zip or pickle: BadZipFile, EOFError, ...
        raise CheckpointError(path, f"not a readable torch file ({type(exc).__name__}: {exc})") from None

    def load(name):
        try:
            return torch_file.materialize(name)
        except Exception as exc:  # noqa: BLE001 - zipfile's "Bad CRC-32", short reads
            raise wrap(path, name, exc) from None

    return {
        name: TensorInfo(name, ref.dtype, ref.shape, functools.partial(load, name))
        for name, ref in torch_file.refs.items()
    }


def tf_prefix(path: str) -> str:
    """The checkpoint prefix for a prefix, a .index or .data-* file, or a folder of one checkpoint."""
    if os.path.isdir(path):
        indexes = sorted(f for f in os.listdir(path) if f.endswith(".index"))
        if len(indexes) != 1:
            raise CheckpointError(path, f"folder has {len(indexes)} *.index files; name the checkpoint")
        return os.path.join(path, indexes[0][: -len(".index")])
    if path.endswith(".index"):
        return path[: -len(".index")]
    return re.sub(r"\.data-\d{5}-of-\d{5}$", "", path)


def read_tf(path: str) -> dict[str, TensorInfo]:
    prefix = tf_prefix(path)
    index = prefix + ".index"
    try:
        header, entries = tf_bundle.read_index(index)
    except FileNotFoundError:
        raise CheckpointError(index, "TF checkpoint index not found") from None
    except tf_bundle.BundleError as exc:
        raise CheckpointError(index, str(exc)) from None

    def load(entry):
        try:
            raw = tf_bundle.read_tensor_bytes(prefix, header, entry)
        except tf_bundle.BundleError as exc:
            raise CheckpointError(
                tf_bundle.data_path(prefix, entry.shard_id, header.get("num_shards", 1)), str(exc), entry.name
            ) from None
        if entry.dtype not in ("float32", "float64", "float16", "int32", "int64"):
            raise CheckpointError(index, f"dtype {entry.dtype} is not read", entry.name)
        expected = int(np.prod(entry.shape)) * np.dtype(entry.dtype).itemsize
        if len(raw) != expected:
            raise CheckpointError(
                index, f"{len(raw)} bytes for shape {list(entry.shape)} {entry.dtype} ({expected} expected)", entry.name
            )
        return np.frombuffer(raw, np.dtype(entry.dtype).newbyteorder("<")).reshape(entry.shape)

    return {e.name: TensorInfo(e.name, e.dtype, e.shape, functools.partial(load, e)) for e in entries.values()}


def read_npz(path: str) -> dict[str, TensorInfo]:
    try:
        npz = np.load(path, allow_pickle=False)
        if not isinstance(npz, np.lib.npyio.NpzFile):
            raise CheckpointError(path, "a single .npy array, not an .npz archive of named tensors")
        infos = {}
        assert npz.zip is not None  # numpy's stubs allow None: the archive once closed; np.load just opened it
        for key in npz.files:
            with npz.zip.open(key + ".npy") as member:
                major, _ = np.lib.format.read_magic(member)
                read_header = np.lib.format.read_array_header_1_0 if major == 1 else np.lib.format.read_array_header_2_0
                shape, _, dtype = read_header(member)  # the header only, not the data
            infos[key] = TensorInfo(key, dtype.name, tuple(shape), functools.partial(_npz_tensor, path, npz, key))
        return infos
    except CheckpointError:
        raise
    except Exception as exc:  # noqa: BLE001 - BadZipFile, ValueError on object arrays, ...
        raise CheckpointError(path, f"not a readable .npz ({type(exc).__name__}: {exc})") from None


def _npz_tensor(path: str, npz, key: str) -> np.ndarray:
    try:
        return npz[key]
    except Exception as exc:  # noqa: BLE001 - "Object arrays cannot be loaded when allow_pickle=False", bad CRC
        raise wrap(path, key, exc) from None


def read_gguf(path: str) -> dict[str, TensorInfo]:
    from gpt2_conformance.golden import gguf_reader  # imports this module: loaded on first use

    return gguf_reader.read(path)


READERS = {"safetensors": read_safetensors, "torch": read_torch, "tf": read_tf, "npz": read_npz, "gguf": read_gguf}


# -- detection, table lookup, size recognition -------------------------------------------


def resolve_folder(path: str) -> str:
    """A folder holding one checkpoint (an HF snapshot, an OpenAI models/124M folder): its file."""
    if not os.path.isdir(path):
        return path
    names = os.listdir(path)
    if any(n.endswith(".index") for n in names):
        return path  # a TF checkpoint folder: tf_prefix picks the prefix
    for preferred in ("model.safetensors", "pytorch_model.bin"):
        if preferred in names:
            return os.path.join(path, preferred)
    found = sorted(n for n in names if n.endswith((".safetensors", ".bin", ".pt", ".pth", ".npz", ".gguf")))
    if len(found) == 1:
        return os.path.join(path, found[0])
    raise CheckpointError(
        path, f"folder holds {len(found)} candidate checkpoint files ({', '.join(found) or 'none'}); name the file"
    )


def detect_format(path: str) -> str:
    """By extension first, then by magic bytes."""
    if (
        os.path.isdir(path)
        or path.endswith(".index")
        or re.search(r"\.data-\d{5}-of-\d{5}$", path)
        or (not os.path.exists(path) and os.path.exists(path + ".index"))
    ):
        return "tf"
    if not os.path.exists(path):
        raise CheckpointError(path, "no such file")
    ext = os.path.splitext(path)[1].lower()
    by_ext = {
        ".safetensors": "safetensors",
        ".bin": "torch",
        ".pt": "torch",
        ".pth": "torch",
        ".npz": "npz",
        ".gguf": "gguf",
    }
    if ext in by_ext:
        return by_ext[ext]
    with open(path, "rb") as f:
        head = f.read(9)
    if head.startswith(b"PK\x03\x04"):
        with zipfile.ZipFile(path) as z:
            names = z.namelist()
        return "torch" if any(n.endswith("data.pkl") for n in names) else "npz"
    if head[:1] == b"\x80":
        return "torch"
    if head.startswith(b"GGUF"):
        return "gguf"
    if len(head) == 9 and head[8:9] == b"{":
        return "safetensors"
    raise CheckpointError(
        path,
        "unknown checkpoint format (expected .safetensors, torch .bin/.pt, a TF "
        "model.ckpt prefix/.index, .npz or .gguf)",
    )


def _is_table_name(name: str, table: str) -> bool:
    parts = re.split(r"[./:]", name)
    if table not in parts:
        return False
    tail = parts[len(parts) - 1 - parts[::-1].index(table) + 1 :]
    return all(p in _NAME_TAIL or p == "0" for p in tail)  # "wte:0" is a TF variable's tensor


def find_table(path: str, infos: dict[str, TensorInfo], table: str) -> TensorInfo:
    found = [i for n, i in infos.items() if _is_table_name(n, table)]
    if len(found) == 1:
        return found[0]
    if found:
        raise CheckpointError(
            path, f"{len(found)} tensors could be GPT-2's {table}: {', '.join(i.name for i in found)}; keep one"
        )
    listing = ", ".join(f"{i.name} {list(i.shape)} {i.dtype}" for i in list(infos.values())[:8])
    more = f" and {len(infos) - 8} more" if len(infos) > 8 else ""
    raise CheckpointError(
        path,
        f"no GPT-2 {table} tensor (a name like {table}.weight, transformer.{table}.weight "
        f"or model/{table}): not a GPT-2 checkpoint? It has {len(infos)} tensor(s): "
        f"{listing or 'none'}{more}",
    )


def recognize_size(path: str, wte: TensorInfo, wpe: TensorInfo) -> tuple[str, int]:
    """GPT-2 size from the table shapes: wte [50257, d], wpe [1024, d], d in SIZES."""
    sizes = ", ".join(f"{d} ({name})" for name, d in gpt2.SIZES.items())
    for info, rows in ((wte, gpt2.N_VOCAB), (wpe, gpt2.N_CTX)):
        if len(info.shape) != 2 or info.shape[0] != rows or info.shape[1] not in gpt2.SIZES.values():
            raise CheckpointError(
                path,
                f"shape {list(info.shape)} is not a GPT-2 table shape: expected [{rows}, d] with d in {sizes}",
                info.name,
            )
    if wte.shape[1] != wpe.shape[1]:
        raise CheckpointError(
            path, f"n_embd {wpe.shape[1]} differs from wte's ({wte.name} {list(wte.shape)})", wpe.name
        )
    d = wte.shape[1]
    return next(name for name, n in gpt2.SIZES.items() if n == d), d


def _check_float32(path: str, info: TensorInfo, fmt: str) -> None:
    if info.dtype == "float32":
        return
    if fmt == "gguf":  # llama.cpp files store tables in F16/BF16/Q8_0/...: read as their float32 values
        from gpt2_conformance.golden import gguf_reader

        if gguf_reader.dequantised_to_float32(info.dtype):
            return
        raise CheckpointError(
            path,
            f"dtype {info.dtype}, but the tables must be float32 or a GGUF type that "
            "dequantises to float32 (F16, BF16, Q8_0, ...)",
            info.name,
        )
    raise CheckpointError(
        path,
        f"dtype {info.dtype}, but the tables must be float32 (the real GPT-2 "
        "tables and their reference digests are float32)",
        info.name,
    )


def _load_float32(path: str, info: TensorInfo) -> np.ndarray:
    array = info.load()
    if array.dtype != np.float32 or array.shape != info.shape:
        raise CheckpointError(
            path, f"read {array.dtype}{list(array.shape)}, the header says float32{list(info.shape)}", info.name
        )
    array = np.ascontiguousarray(array, np.float32)
    array.flags.writeable = False
    return array


def format_of(path: str) -> str:
    """The format of the checkpoint at `path` (a file, a TF prefix or a folder holding one), read
    without loading it: a CheckpointError where it is missing or of no format read here."""
    return detect_format(resolve_folder(path))


def load_checkpoint(path: str, fmt: str | None = None) -> Checkpoint:
    """wte and wpe of a GPT-2 checkpoint, float32 and C-contiguous, after every check above."""
    path = resolve_folder(path)
    fmt = fmt or detect_format(path)
    if fmt not in READERS:
        raise CheckpointError(path, f"unknown format {fmt!r}; known: {', '.join(FORMATS)}")
    infos = READERS[fmt](path)
    if fmt == "gguf":
        from gpt2_conformance.golden import gguf_reader

        assert isinstance(infos, gguf_reader.GGUFTensors)  # READERS["gguf"] is read_gguf
        wte, wpe = gguf_reader.find_tables(path, infos)
    else:
        wte, wpe = find_table(path, infos, "wte"), find_table(path, infos, "wpe")
    _check_float32(path, wte, fmt)
    _check_float32(path, wpe, fmt)
    size, d = recognize_size(path, wte, wpe)
    return Checkpoint(
        path, fmt, _load_float32(path, wte), _load_float32(path, wpe), wte.name, wpe.name, size, d, wte.dtype, wpe.dtype
    )
