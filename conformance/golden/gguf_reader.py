"""GGUF checkpoints (llama.cpp's format), read with the gguf package: its GGUFReader parses the
file and gguf.quants.dequantize turns F16/BF16/Q8_0/... tables into float32. No parser here.

llama.cpp's names for GPT-2's tables (gguf-py at tag gguf-v0.19.0, the gguf release pinned in
constraints.txt; line numbers read from that release):
- MODEL_TENSORS[MODEL_ARCH.GPT2] starts with TOKEN_EMBD and POS_EMBD
  https://github.com/ggml-org/llama.cpp/blob/gguf-v0.19.0/gguf-py/gguf/constants.py#L2180-L2182
- named "token_embd" and "position_embd" (constants.py#L1027 and #L1030), plus ".weight"
- HF's "transformer.wte"/"wte" map to TOKEN_EMBD and "transformer.wpe"/"wpe" to POS_EMBD
  https://github.com/ggml-org/llama.cpp/blob/gguf-v0.19.0/gguf-py/gguf/tensor_mapping.py#L13
  (and #L21, #L61, #L63); GPT2Model.modify_tensors in
  https://github.com/ggml-org/llama.cpp/blob/gguf-v0.19.0/convert_hf_to_gguf.py transposes only
  c_attn/c_proj/c_fc, so the tables keep HF's [50257, d] and [1024, d] layout; its
  prepare_tensors keeps POS_EMBD in F32 whatever --outtype ("Some tensor types are always in
  float32"), so a converted file has wpe in F32 and wte in the chosen type.

Dims: GGUF lists a tensor's dims fastest first (ne[0] is the row length). GGUFWriter writes
numpy's shape reversed (gguf_writer.py#L266-L268) and GGUFReader reverses it back for `data`
(gguf_reader.py#L330) while ReaderTensor.shape stays in GGUF order: a [50257, 768] table has
ReaderTensor.shape [768, 50257] and data.shape (50257, 768) (tests/test_golden_gguf.py checks).

TensorInfo.dtype is the stored type (numpy's name where numpy has the type, "bfloat16", else
ggml's name: "Q8_0"); load() returns float32 for every floating type except F64 (dequantised).
"""

from __future__ import annotations

import functools
import itertools
import os

import numpy as np

from gpt2_conformance.golden.checkpoint import CheckpointError, TensorInfo

TABLE_NAMES = {"wte": "token_embd.weight", "wpe": "position_embd.weight"}
_NUMPY_TYPES = {
    "F32": "float32",
    "F16": "float16",
    "F64": "float64",
    "I8": "int8",
    "I16": "int16",
    "I32": "int32",
    "I64": "int64",
}  # the types GGUFReader returns as typed numpy arrays
NOT_DEQUANTISED = ("float64", "int8", "int16", "int32", "int64")  # load() returns these as stored


class GGUFTensors(dict):
    """{tensor name: TensorInfo} and the file's general.architecture (for error messages)."""

    architecture: str | None = None


def dtype_name(qtype) -> str:
    return _NUMPY_TYPES.get(qtype.name, "bfloat16" if qtype.name == "BF16" else qtype.name)


def dequantised_to_float32(dtype: str) -> bool:
    """Whether load() of a GGUF tensor stored as `dtype` returns float32 values."""
    return dtype not in NOT_DEQUANTISED


def _version() -> str:
    from importlib import metadata

    return metadata.version("gguf")


def read(path: str) -> GGUFTensors:
    try:
        import gguf
    except ImportError:
        raise CheckpointError(path, "reading .gguf needs the gguf package (pip install gguf)") from None
    reader = _open(path, gguf)
    swapped = reader.byte_order == "S"  # a big-endian file on this little-endian host
    infos = GGUFTensors()
    for tensor in reader.tensors:
        shape = tuple(int(n) for n in reversed(tensor.shape.tolist()))  # GGUF order -> numpy order
        infos[tensor.name] = TensorInfo(
            tensor.name, dtype_name(tensor.tensor_type), shape, functools.partial(_load, path, tensor, swapped, gguf)
        )
    arch = reader.get_field("general.architecture")
    try:
        infos.architecture = arch.contents() if arch is not None else None
    except Exception:  # noqa: BLE001 - a non-string value: not worth failing the read for
        infos.architecture = None
    return infos


def _open(path: str, gguf):
    size = os.path.getsize(path)

    class CheckedReader(gguf.GGUFReader):
        # GGUFReader builds every tensor's view in its constructor; a truncated file then fails
        # in numpy's reshape without the tensor's name. This hook (the reader's own parsed
        # tensor-info fields, gguf_reader.py#L318) checks each tensor's type tag and byte range
        # first, so the error names the tensor and the rule.
        def _build_tensors(self, start_offs, fields):
            _check_tensor_ranges(path, size, int(start_offs), fields, gguf)
            super()._build_tensors(start_offs, fields)

    try:
        return CheckedReader(path)
    except CheckpointError:
        raise
    except Exception as exc:  # noqa: BLE001 - bad magic, short header, bad KV type, ...
        hint = "not a GGUF file" if "magic" in str(exc) else "not a readable GGUF file"
        raise CheckpointError(path, f"{hint} ({type(exc).__name__}: {exc})") from None


def _check_tensor_ranges(path: str, size: int, start: int, fields, gguf) -> None:
    """Each tensor's type tag is a ggml type, its row fits the type's blocks, and its bytes lie in
    the file without running into the next tensor's (a wrong type tag or shape shows up so)."""
    ranges = []
    for field in fields:
        _, name_data, _, dims, raw_type, offset = field.parts
        name = bytes(name_data).decode("utf-8", "replace")
        tag = int(raw_type[0])
        try:
            qtype = gguf.GGMLQuantizationType(tag)
            block, type_size = gguf.GGML_QUANT_SIZES[qtype]
        except (ValueError, KeyError):
            raise CheckpointError(
                path, f"tensor type tag {tag} is not a ggml type known to gguf {_version()}", name
            ) from None
        ne = [int(n) for n in dims]
        shape = list(reversed(ne))
        if ne and ne[0] % block:
            raise CheckpointError(
                path,
                f"type {qtype.name} stores blocks of {block} elements, but the row "
                f"length is {ne[0]} (shape {shape}): a wrong type tag or shape",
                name,
            )
        n_elements = int(np.prod(ne, dtype=object)) if ne else 1
        begin = start + int(offset[0])
        end = begin + n_elements // block * type_size
        if end > size:
            raise CheckpointError(
                path,
                f"{qtype.name}{shape} data ends at byte {end} but the file has {size} "
                "bytes: truncated (or a type tag or shape that does not fit the data)",
                name,
            )
        ranges.append((begin, end, name, qtype.name, shape))
    ranges.sort()
    for (begin, end, name, qname, shape), following in itertools.pairwise(ranges):
        if end > following[0]:
            raise CheckpointError(
                path,
                f"{qname}{shape} data (bytes {begin}..{end}) runs into the data of "
                f"{following[2]!r} at byte {following[0]}: a wrong type tag or shape",
                name,
            )


def _load(path: str, tensor, swapped: bool, gguf) -> np.ndarray:
    qtype = tensor.tensor_type
    try:
        if tensor.data.dtype != np.uint8:  # F32/F16/F64/I*: a typed view, maybe byte-swapped
            native = np.array(tensor.data, tensor.data.dtype.newbyteorder("="))  # a copy, not the mmap
            return gguf.quants.dequantize(native, qtype) if qtype.name == "F16" else native
        if swapped:
            raise CheckpointError(
                path,
                f"type {qtype.name} in a big-endian GGUF is not read: gguf's dequantize reads little-endian blocks",
                tensor.name,
            )
        return np.ascontiguousarray(gguf.quants.dequantize(np.asarray(tensor.data), qtype), np.float32)
    except CheckpointError:
        raise
    except NotImplementedError as exc:
        raise CheckpointError(
            path, f"type {qtype.name} cannot be dequantised by gguf {_version()} ({exc})", tensor.name
        ) from None
    except Exception as exc:  # noqa: BLE001 - a short read from the mmap, a block size mismatch
        raise CheckpointError(path, f"{type(exc).__name__}: {exc}", tensor.name) from None


def find_tables(path: str, infos: GGUFTensors) -> tuple[TensorInfo, TensorInfo]:
    """token_embd.weight and position_embd.weight, or an error naming what the file holds."""
    found = []
    for table, name in TABLE_NAMES.items():
        if name not in infos:
            listing = ", ".join(f"{i.name} {list(i.shape)} {i.dtype}" for i in list(infos.values())[:8])
            more = f" and {len(infos) - 8} more" if len(infos) > 8 else ""
            raise CheckpointError(
                path,
                f"no {name} tensor (llama.cpp's name for GPT-2's {table}): not a GPT-2 "
                f"GGUF? general.architecture is {infos.architecture!r}; it has "
                f"{len(infos)} tensor(s): {listing or 'none'}{more}",
            )
        found.append(infos[name])
    return found[0], found[1]
