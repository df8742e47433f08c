"""Read a GGUF file's header (metadata and tensor table) without loading tensor data.

Every count, length and offset is checked against the file before it is used, so a damaged
or hostile file gets an error naming the field rather than a huge allocation or a read past
the end. Arrays can be skipped (the library only needs scalars), which makes a scan of a
folder of multi-gigabyte models take milliseconds per file. Tensor data is then read as
zero-copy views of a memory map, one tensor at a time.
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Container, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

from engine.errors import ModelLoadError

MAGIC = b"GGUF"
_MAX_COUNT = 1 << 20  # tensors or metadata entries; real files have a few thousand
_MAX_DIMS = 4  # GGML_MAX_DIMS
_MAX_ELEMENTS = 1 << 48

# GGUF metadata value types: struct format and numpy dtype of the fixed-size ones.
_SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q"}
_SCALAR |= {11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9


@dataclass(frozen=True)
class SkippedArray:
    """An array left unread (`read_header(arrays=...)`): its element type and length."""

    item_type: int
    length: int


@dataclass(frozen=True)
class TensorInfo:
    """One tensor: name, shape in numpy order (rows first), GGML type, and its bytes."""

    name: str
    shape: tuple[int, ...]
    ggml_type: int
    offset: int  # from the start of the file
    nbytes: int

    @property
    def type_name(self) -> str:
        return type_name(self.ggml_type)

    @property
    def n_elements(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) if self.shape else 1


@dataclass(frozen=True)
class GGUFHeader:
    """What a GGUF file says about itself."""

    path: Path
    version: int
    metadata: dict[str, Any]
    tensors: list[TensorInfo]
    file_size: int

    @property
    def architecture(self) -> str | None:
        arch = self.metadata.get("general.architecture")
        return arch if isinstance(arch, str) else None


def type_name(ggml_type: int) -> str:
    """`GGMLQuantizationType` name of a type id, or `type N` for one gguf does not know."""
    try:
        return GGMLQuantizationType(ggml_type).name
    except ValueError:
        return f"type {ggml_type}"


class _Cursor:
    """Reads little-endian values from a buffer, refusing to read past its end."""

    def __init__(self, buf: mmap.mmap, source: Path) -> None:
        self.buf = buf
        self.pos = 0
        self.size = len(buf)
        self.source = source

    def fail(self, what: str) -> ModelLoadError:
        return ModelLoadError(f"{self.source}: not a valid GGUF file: {what}")

    def need(self, n: int, what: str) -> None:
        if n < 0 or self.pos + n > self.size:
            raise self.fail(f"{what} runs past the end of the file (truncated?)")

    def scalar(self, fmt: str, what: str) -> Any:
        n = struct.calcsize(fmt)
        self.need(n, what)
        (value,) = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += n
        return value

    def string(self, what: str) -> str:
        n = int(self.scalar("<Q", what))
        self.need(n, what)
        raw = self.buf[self.pos : self.pos + n]
        self.pos += n
        return raw.decode("utf-8", errors="replace")

    def skip_string(self, what: str) -> None:
        n = int(self.scalar("<Q", what))
        self.need(n, what)
        self.pos += n

    def value(self, vtype: int, key: str, keep_array: bool) -> Any:
        if vtype in _SCALAR:
            return self.scalar(_SCALAR[vtype], key)
        if vtype == _STRING:
            return self.string(key)
        if vtype != _ARRAY:
            raise self.fail(f"metadata {key!r} has unknown value type {vtype}")
        item_type = int(self.scalar("<I", key))
        length = int(self.scalar("<Q", key))
        if item_type in _SCALAR:
            width = struct.calcsize(_SCALAR[item_type])
            self.need(length * width, f"array {key!r}")
            start, self.pos = self.pos, self.pos + length * width
            if not keep_array:
                return SkippedArray(item_type, length)
            dtype = np.dtype(_SCALAR[item_type])
            return np.frombuffer(self.buf, dtype=dtype, count=length, offset=start).copy()
        if item_type != _STRING:
            raise self.fail(f"array {key!r} has unsupported item type {item_type}")
        # Each string costs at least its 8-byte length: a bound before the loop.
        self.need(length * 8, f"array {key!r}")
        if not keep_array:
            for _ in range(length):
                self.skip_string(key)
            return SkippedArray(item_type, length)
        return [self.string(key) for _ in range(length)]


def _read(buf: mmap.mmap, source: Path, arrays: bool | Container[str]) -> GGUFHeader:
    cur = _Cursor(buf, source)
    cur.need(4, "magic")
    if bytes(buf[:4]) != MAGIC:
        raise ModelLoadError(f"{source}: not a GGUF file (bad magic {bytes(buf[:4])!r})")
    cur.pos = 4
    version = int(cur.scalar("<I", "version"))
    if version not in (2, 3):
        raise cur.fail(f"version {version} (Corral reads versions 2 and 3)")
    n_tensors = int(cur.scalar("<Q", "tensor count"))
    n_kv = int(cur.scalar("<Q", "metadata count"))
    if n_tensors > _MAX_COUNT:
        raise cur.fail(f"tensor count {n_tensors} is implausible")
    if n_kv > _MAX_COUNT:
        raise cur.fail(f"metadata count {n_kv} is implausible")

    metadata: dict[str, Any] = {}
    for _ in range(n_kv):
        key = cur.string("metadata key")
        vtype = int(cur.scalar("<I", f"type of {key!r}"))
        keep = arrays if isinstance(arrays, bool) else key in arrays
        metadata[key] = cur.value(vtype, key, keep)

    infos: list[tuple[str, tuple[int, ...], int, int]] = []
    for _ in range(n_tensors):
        name = cur.string("tensor name")
        n_dims = int(cur.scalar("<I", f"dimensions of {name!r}"))
        if not 0 < n_dims <= _MAX_DIMS:
            raise cur.fail(f"tensor {name!r} has {n_dims} dimensions")
        dims = [int(cur.scalar("<Q", f"shape of {name!r}")) for _ in range(n_dims)]
        ggml_type = int(cur.scalar("<I", f"type of {name!r}"))
        offset = int(cur.scalar("<Q", f"offset of {name!r}"))
        infos.append((name, tuple(reversed(dims)), ggml_type, offset))

    alignment = metadata.get("general.alignment", 32)
    if not isinstance(alignment, int) or alignment <= 0 or alignment & (alignment - 1):
        raise cur.fail(f"general.alignment {alignment!r} is not a power of two")
    data_start = -(-cur.pos // alignment) * alignment
    tensors = []
    for name, shape, ggml_type, offset in infos:
        n_elements = 1
        for d in shape:
            n_elements *= d
        if n_elements > _MAX_ELEMENTS:
            raise cur.fail(f"tensor {name!r} declares {n_elements} elements")
        known = _known_type(ggml_type)
        sizes = GGML_QUANT_SIZES.get(known) if known is not None else None
        if sizes is None:  # a type gguf cannot even size: it cannot be imported either
            nbytes = 0
        else:
            block, type_size = sizes
            if shape[-1] % block:
                raise cur.fail(
                    f"tensor {name!r} has rows of {shape[-1]} values, not a multiple of "
                    f"the {type_name(ggml_type)} block size {block}"
                )
            nbytes = n_elements // block * type_size
        start = data_start + offset
        if start + nbytes > cur.size:
            raise ModelLoadError(
                f"{source}: truncated GGUF file: tensor {name!r} ({type_name(ggml_type)}) "
                f"needs bytes up to {start + nbytes:,} but the file has {cur.size:,}"
            )
        tensors.append(TensorInfo(name, shape, ggml_type, start, nbytes))
    return GGUFHeader(source, version, metadata, tensors, cur.size)


def _known_type(ggml_type: int) -> GGMLQuantizationType | None:
    try:
        return GGMLQuantizationType(ggml_type)
    except ValueError:
        return None


@contextmanager
def open_gguf(
    path: str | Path, *, arrays: bool | Container[str] = True
) -> Iterator[tuple[GGUFHeader, mmap.mmap]]:
    """Map `path` and read its header; yields (header, map) for `tensor_bytes`.

    Args:
        path: the .gguf file (Ollama's blobs have no suffix).
        arrays: read metadata arrays (True), skip them (False), or read only those keys.
    """
    source = Path(path)
    if not source.exists():
        raise ModelLoadError(f"{source}: no such file")
    if not source.is_file():
        raise ModelLoadError(f"{source}: not a file")
    try:
        with open(source, "rb") as f:
            size = f.seek(0, 2)
            if size < 4:
                raise ModelLoadError(f"{source}: not a GGUF file (only {size} bytes)")
            buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except OSError as exc:
        raise ModelLoadError(f"{source}: cannot read: {exc.strerror or exc}") from exc
    try:
        yield _read(buf, source, arrays), buf
    finally:
        try:
            buf.close()
        except BufferError:  # a caller still holds a tensor view: the map closes with it
            pass


def read_header(path: str | Path, *, arrays: bool | Container[str] = False) -> GGUFHeader:
    """The header of the GGUF file at `path` (arrays skipped unless asked for).

    Args:
        path: the file to read.
        arrays: as for `open_gguf`; by default arrays are skipped.
    """
    with open_gguf(path, arrays=arrays) as (header, _):
        return header


def tensor_bytes(buf: mmap.mmap, info: TensorInfo) -> np.ndarray:
    """A tensor's raw bytes as a read-only uint8 view of the map (no copy)."""
    return np.frombuffer(buf, dtype=np.uint8, count=info.nbytes, offset=info.offset)


def release(buf: mmap.mmap, info: TensorInfo) -> None:
    """Drop a converted tensor's pages from this process's memory (the file keeps them):
    mapped pages that were read count as resident until the map is closed."""
    advice = getattr(mmap, "MADV_DONTNEED", None)
    if advice is None or info.nbytes == 0:
        return
    start = info.offset - info.offset % mmap.PAGESIZE
    length = min(info.offset + info.nbytes, len(buf)) - start
    try:
        buf.madvise(advice, start, length)
    except (OSError, ValueError):
        pass  # only an optimisation


def is_gguf_file(path: str | Path) -> bool:
    """True if `path` is a regular file that starts with the GGUF magic."""
    try:
        with open(path, "rb") as f:
            return f.read(4) == MAGIC
    except OSError:
        return False
