"""PyTorch `torch.save` files (pytorch_model.bin) read without torch and without running them.

A torch file's tensors are described by a pickle. Unpickling an arbitrary pickle runs code
(any global it names can be called), so this reader uses a restricted Unpickler: the only
globals it resolves are stand-ins for torch's tensor-rebuild functions, storage classes and
OrderedDict, which build inert TensorRef descriptions (storage key, dtype, offset, shape,
stride). Any other global, e.g. `os.system` or `builtins.exec` in a malicious file, raises
UnsafePickleError before anything is called. Tensor bytes are read only for the tensors asked
for. Both layouts are read: the zip archive (torch >= 1.6: `<name>/data.pkl`,
`<name>/data/<key>`, `<name>/byteorder`) and the legacy stream (magic number, protocol, sys
info, the pickle, the storage keys, then each storage as int64 numel + bytes).
"""

from __future__ import annotations

import io
import pickle
import struct
import zipfile
from collections import OrderedDict
from dataclasses import dataclass
from typing import IO

import numpy as np

LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
STORAGE_DTYPES = {
    "FloatStorage": "<f4",
    "DoubleStorage": "<f8",
    "HalfStorage": "<f2",
    "BFloat16Storage": "bfloat16",
    "LongStorage": "<i8",
    "IntStorage": "<i4",
    "ShortStorage": "<i2",
    "CharStorage": "i1",
    "ByteStorage": "u1",
    "BoolStorage": "?",
}
ITEMSIZE = {"bfloat16": 2}


class UnsafePickleError(pickle.UnpicklingError):
    """The pickle names a global outside the allowlist; nothing was called."""


class TorchFormatError(ValueError):
    """Malformed torch file; readers.py adds the file name."""


@dataclass(frozen=True)
class StorageRef:
    key: str
    dtype: str  # numpy dtype string, or "bfloat16"
    numel: int


@dataclass(frozen=True)
class TensorRef:
    storage: StorageRef
    offset: int  # in elements
    shape: tuple[int, ...]
    stride: tuple[int, ...]

    @property
    def dtype(self) -> str:
        return self.storage.dtype if self.storage.dtype == "bfloat16" else np.dtype(self.storage.dtype).name


class _StorageType:
    def __init__(self, name: str):
        self.name = name


def _rebuild_tensor(storage, storage_offset, size, stride, *_ignored):
    if not isinstance(storage, StorageRef):
        raise TorchFormatError(f"tensor rebuilt from {type(storage).__name__}, not a storage")
    return TensorRef(storage, int(storage_offset), tuple(int(s) for s in size), tuple(int(s) for s in stride))


def _rebuild_parameter(data, *_ignored):
    return data


def _rebuild_from_type_v2(func, _new_type, args, _state):
    if func not in (_rebuild_tensor, _rebuild_parameter):
        raise TorchFormatError("_rebuild_from_type_v2 with a function other than a tensor rebuild")
    return func(*args)


_ALLOWED = {
    ("collections", "OrderedDict"): OrderedDict,
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
    ("torch._utils", "_rebuild_tensor"): _rebuild_tensor,
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
    ("torch._tensor", "_rebuild_from_type_v2"): _rebuild_from_type_v2,
    ("torch.nn.parameter", "Parameter"): _StorageType("Parameter"),  # only passed as a marker
}


class _SafeUnpickler(pickle.Unpickler):
    def __init__(self, f: IO[bytes]) -> None:
        super().__init__(f)
        self.storages: dict[str, StorageRef] = {}

    def find_class(self, module, name):
        if module == "torch" and name in STORAGE_DTYPES:
            return _StorageType(name)
        try:
            return _ALLOWED[(module, name)]
        except KeyError:
            raise UnsafePickleError(
                f"the pickle asks for global {module}.{name}, which is not a tensor-rebuild function; "
                "refused, nothing from the file was executed"
            ) from None

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) >= 5 and pid[0] == "storage"):
            raise TorchFormatError(f"unexpected persistent id {pid!r:.80}")
        storage_type, key, _location, numel = pid[1:5]
        if len(pid) > 5 and pid[5] is not None:
            raise TorchFormatError("storage views (pre-1.0 torch files) are not supported")
        if not isinstance(storage_type, _StorageType) or storage_type.name not in STORAGE_DTYPES:
            raise TorchFormatError(f"unknown storage type in persistent id {pid!r:.80}")
        ref = StorageRef(str(key), STORAGE_DTYPES[storage_type.name], int(numel))
        self.storages[ref.key] = ref
        return ref


def _safe_load(f, storages: dict | None = None):
    unpickler = _SafeUnpickler(f)
    obj = unpickler.load()
    if storages is not None:
        storages.update(unpickler.storages)
    return obj


def flatten(obj, prefix: str = "") -> dict[str, TensorRef]:
    """name -> TensorRef of every tensor in (nested) dicts; other values are dropped."""
    out: dict[str, TensorRef] = {}
    if isinstance(obj, TensorRef):
        out[prefix] = obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
    return out


class TorchFile:
    """Tensor refs of a torch file; materialize(name) reads one tensor's bytes."""

    def __init__(self, path: str):
        self.path = path
        with open(path, "rb") as f:
            head = f.read(4)
        if head.startswith(b"PK\x03\x04"):
            self._init_zip()
        elif head[:1] == b"\x80":
            self._init_legacy()
        else:
            raise TorchFormatError("neither a torch zip archive nor a legacy torch pickle (bad magic bytes)")

    def _init_zip(self):
        self.zip = zipfile.ZipFile(self.path)
        pkls = [n for n in self.zip.namelist() if n.endswith("/data.pkl") or n == "data.pkl"]
        if len(pkls) != 1:
            raise TorchFormatError(f"zip archive has {len(pkls)} data.pkl records, not 1: not a torch.save file")
        self.root = pkls[0][: -len("data.pkl")]
        order = self.root + "byteorder"
        if order in self.zip.namelist() and self.zip.read(order).strip() != b"little":
            raise TorchFormatError("big-endian torch file")
        self.refs = flatten(_safe_load(io.BytesIO(self.zip.read(pkls[0]))))

    def _init_legacy(self) -> None:
        self.zip = None
        with open(self.path, "rb") as f:
            if _safe_load(f) != LEGACY_MAGIC:
                raise TorchFormatError("pickle without torch's magic number: not a torch.save file")
            _safe_load(f)  # protocol version
            sys_info = _safe_load(f)
            if isinstance(sys_info, dict) and not sys_info.get("little_endian", True):
                raise TorchFormatError("big-endian torch file")
            storages: dict[str, StorageRef] = {}
            self.refs = flatten(_safe_load(f, storages))
            keys = _safe_load(f)
            if not isinstance(keys, list):
                raise TorchFormatError("no storage key list after the pickle")
            self._offsets = {}
            for key in keys:
                numel_bytes = f.read(8)
                if len(numel_bytes) != 8:
                    break  # truncated: the tensors of the missing storages say so when read
                numel = struct.unpack("<q", numel_bytes)[0]
                if str(key) not in storages:
                    raise TorchFormatError(f"storage {key!r} is listed but no tensor uses it")
                dtype = storages[str(key)].dtype
                self._offsets[str(key)] = f.tell()
                f.seek(numel * (ITEMSIZE.get(dtype) or np.dtype(dtype).itemsize), 1)

    def _storage_bytes(self, storage: StorageRef) -> bytes:
        itemsize = ITEMSIZE.get(storage.dtype) or np.dtype(storage.dtype).itemsize
        if self.zip is not None:
            name = f"{self.root}data/{storage.key}"
            try:
                raw = self.zip.read(name)
            except KeyError:
                raise TorchFormatError(f"storage record {name} is missing") from None
        else:
            if storage.key not in self._offsets:
                raise TorchFormatError(f"storage {storage.key!r} is missing: the file ends before it (truncated)")
            with open(self.path, "rb") as f:
                f.seek(self._offsets[storage.key])
                raw = f.read(storage.numel * itemsize)
        if len(raw) < storage.numel * itemsize:
            raise TorchFormatError(
                f"storage {storage.key!r} has {len(raw)} bytes, {storage.numel * itemsize} expected: truncated"
            )
        return raw

    def materialize(self, name: str) -> np.ndarray:
        ref = self.refs[name]
        if ref.storage.dtype == "bfloat16":
            raise TorchFormatError("bfloat16 tensor")
        flat = np.frombuffer(self._storage_bytes(ref.storage), ref.storage.dtype, count=ref.storage.numel)
        itemsize = flat.dtype.itemsize
        if len(ref.stride) != len(ref.shape) or min(ref.stride, default=0) < 0 or ref.offset < 0:
            raise TorchFormatError(f"bad shape/stride/offset {ref.shape}/{ref.stride}/{ref.offset}")
        if 0 in ref.shape:
            return np.zeros(ref.shape, flat.dtype.newbyteorder("="))
        last = ref.offset + sum((n - 1) * s for n, s in zip(ref.shape, ref.stride, strict=False))
        if last >= ref.storage.numel:
            raise TorchFormatError(f"offset/stride reach element {last} of a {ref.storage.numel}-element storage")
        view = np.lib.stride_tricks.as_strided(flat[ref.offset :], ref.shape, tuple(s * itemsize for s in ref.stride))
        return np.ascontiguousarray(view).astype(view.dtype.newbyteorder("="), copy=False)
