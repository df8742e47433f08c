"""Read a GGUF file's header, checked against the file, and its tensors as views of a map.

MLX's GGUF loader (gguflib, in C) and numpy views both trust the header: a file that
declares 2^62 tensors, a string longer than the file or a tensor past its end makes them
allocate without bound or read out of bounds. Here every count, length and offset is
bounded by the file's size before it is used, and a wrong one raises
ModelLoadError("PATH: not a valid GGUF: FIELD: ...") naming the first field at fault.
Metadata arrays can be skipped (the library scan needs only scalars), so describing a
multi-gigabyte model takes milliseconds; tensor data is then read as zero-copy views of a
memory map, one tensor at a time (`open_gguf`, `tensor_bytes`), never copied whole.
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Container, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

from engine.errors import ModelLoadError
from engine.files import FileRefused, open_regular

MAGIC = b"GGUF"
SUPPORTED_VERSIONS = (2, 3)
DEFAULT_ALIGNMENT = 32
MAX_DIMS = 4  # GGML_MAX_DIMS
MAX_NAME_BYTES = 65_535  # a key or tensor name
MAX_ARRAY_NESTING = 4
_MAX_COUNT = 1 << 20  # tensors or metadata entries; real files have a few thousand
_MAX_ITEMS = 2**31 - 1  # items in one metadata array
_MAX_DIM = 2**31 - 1  # MLX shapes are int32
_MAX_ELEMENTS = 1 << 48  # in one tensor
_MIN_HEADER = 24  # magic, version and the two counts

# GGUF metadata value types: struct formats of the fixed-size ones.
_SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q"}
_SCALAR |= {11: "<q", 12: "<d"}
_UINT32, _STRING, _ARRAY = 4, 8, 9
_U64 = struct.Struct("<Q")


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
    """What a GGUF file says about itself, every field checked against the file."""

    path: Path
    version: int
    metadata: dict[str, Any]
    tensors: list[TensorInfo]
    file_size: int
    alignment: int
    data_offset: int  # where the tensor data starts
    header_size: int  # bytes before the padding that precedes the tensor data

    @property
    def architecture(self) -> str | None:
        arch = self.metadata.get("general.architecture")
        return arch if isinstance(arch, str) else None


class MappedGGUF(NamedTuple):
    """A GGUF file opened by `open_gguf`: its checked header and its memory map."""

    header: GGUFHeader
    buf: mmap.mmap


def type_name(ggml_type: int) -> str:
    """`GGMLQuantizationType` name of a type id, or `type N` for one gguf does not know."""
    try:
        return GGMLQuantizationType(ggml_type).name
    except ValueError:
        return f"type {ggml_type}"


def _block(ggml_type: int) -> tuple[int, int] | None:
    """(values per block, bytes per block) of a tensor type, None for an unknown one."""
    try:
        return GGML_QUANT_SIZES[GGMLQuantizationType(ggml_type)]
    except (ValueError, KeyError):
        return None


class _Invalid(Exception):
    """A header field is wrong; the message names it."""


class _Cursor:
    """Reads little-endian values from a buffer, refusing to read past its end."""

    def __init__(self, buf: mmap.mmap) -> None:
        self.buf = buf
        self.pos = 0
        self.size = len(buf)

    def left(self) -> int:
        return self.size - self.pos

    def need(self, n: int, what: str) -> None:
        if n < 0 or n > self.left():
            raise _Invalid(
                f"{what}: needs {n:,} bytes at offset {self.pos:,}, past the end of the file"
            )

    def scalar(self, fmt: str, what: str) -> Any:
        n = struct.calcsize(fmt)
        self.need(n, what)
        (value,) = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += n
        return value

    def u32(self, what: str) -> int:
        return int(self.scalar("<I", what))

    def u64(self, what: str) -> int:
        return int(self.scalar("<Q", what))

    def _length(self, what: str, limit: int | None) -> int:
        n = self.u64(f"{what} (length)")
        if n > self.left():
            raise _Invalid(f"{what}: length {n:,} runs past the end of the file")
        if limit is not None and n > limit:
            raise _Invalid(f"{what}: {n:,} bytes long (at most {limit:,})")
        return n

    def string(self, what: str, limit: int | None = None) -> str:
        n = self._length(what, limit)
        raw = self.buf[self.pos : self.pos + n]
        self.pos += n
        return raw.decode("utf-8", errors="replace")

    def strings(self, count: int, what: str, keep: bool) -> list[str] | None:
        """Read (`keep`) or skip `count` strings (a vocabulary: tens of thousands), checking
        each length; a tight loop, as this is most of a header's bytes."""
        buf, pos, size, unpack = self.buf, self.pos, self.size, _U64.unpack_from
        out: list[str] | None = [] if keep else None
        for i in range(count):
            if pos + 8 > size:
                self.pos = pos
                raise _Invalid(f"{what}[{i}] (length): past the end of the file")
            start = pos + 8
            pos = start + unpack(buf, pos)[0]
            if pos > size:
                raise _Invalid(f"{what}[{i}]: runs past the end of the file")
            if out is not None:
                out.append(buf[start:pos].decode("utf-8", errors="replace"))
        self.pos = pos
        return out

    def value(self, vtype: int, what: str, keep: bool, nesting: int = 0) -> Any:
        """One metadata value; an array is read when `keep`, else skipped (checked all the
        same) and returned as a SkippedArray."""
        if vtype in _SCALAR:
            return self.scalar(_SCALAR[vtype], what)
        if vtype == _STRING:
            return self.string(what)
        if vtype != _ARRAY:
            raise _Invalid(f"{what}: unknown value type {vtype}")
        if nesting >= MAX_ARRAY_NESTING:
            raise _Invalid(f"{what}: arrays nested more than {MAX_ARRAY_NESTING} deep")
        item_type = self.u32(f"{what} (array item type)")
        count = self.u64(f"{what} (array length)")
        if count > _MAX_ITEMS:
            raise _Invalid(f"{what}: array of {count:,} items (at most {_MAX_ITEMS:,})")
        if item_type in _SCALAR:
            width = struct.calcsize(_SCALAR[item_type])
            self.need(count * width, f"{what} ({count:,} items)")
            start, self.pos = self.pos, self.pos + count * width
            if not keep:
                return SkippedArray(item_type, count)
            dtype = np.dtype(_SCALAR[item_type])
            return np.frombuffer(self.buf, dtype=dtype, count=count, offset=start).copy()
        # Each string costs at least its 8-byte length, each array 12: a bound before the loop.
        if item_type == _STRING:
            if count * 8 > self.left():
                raise _Invalid(f"{what}: {count:,} strings cannot fit in the rest of the file")
            items = self.strings(count, what, keep)
            return items if items is not None else SkippedArray(item_type, count)
        if item_type == _ARRAY:
            if count * 12 > self.left():
                raise _Invalid(f"{what}: {count:,} arrays cannot fit in the rest of the file")
            items = [self.value(_ARRAY, f"{what}[{i}]", keep, nesting + 1) for i in range(count)]
            return items if keep else SkippedArray(item_type, count)
        raise _Invalid(f"{what}: unknown array item type {item_type}")


def _metadata(cur: _Cursor, n_kv: int, arrays: bool | Container[str]) -> dict[str, Any]:
    metadata: dict[str, Any] = {}
    for i in range(n_kv):
        key = cur.string(f"metadata key {i + 1}", MAX_NAME_BYTES)
        if key in metadata:
            raise _Invalid(f"metadata key {key!r}: appears twice")
        vtype = cur.u32(f"metadata {key!r} (type)")
        keep = arrays if isinstance(arrays, bool) else key in arrays
        value = cur.value(vtype, f"metadata {key!r}", keep)
        if key == "general.alignment" and (vtype != _UINT32 or value == 0 or value & (value - 1)):
            raise _Invalid(
                f"metadata 'general.alignment': must be a power of two (uint32), got {value}"
            )
        metadata[key] = value
    return metadata


def _tensor_infos(cur: _Cursor, n_tensors: int) -> list[tuple[str, tuple[int, ...], int, int]]:
    """(name, shape in numpy order, type, offset in the data) of each tensor."""
    infos: list[tuple[str, tuple[int, ...], int, int]] = []
    names: set[str] = set()
    for i in range(n_tensors):
        name = cur.string(f"tensor {i + 1} (name)", MAX_NAME_BYTES)
        if name in names:
            raise _Invalid(f"tensor {name!r}: appears twice")
        names.add(name)
        n_dims = cur.u32(f"tensor {name!r} (n_dims)")
        if not 1 <= n_dims <= MAX_DIMS:
            raise _Invalid(f"tensor {name!r}: n_dims is {n_dims} (1 to {MAX_DIMS})")
        dims = [cur.u64(f"tensor {name!r} (dimension {d + 1})") for d in range(n_dims)]
        if any(not 1 <= d <= _MAX_DIM for d in dims):
            raise _Invalid(f"tensor {name!r}: dimensions {dims} (each 1 to {_MAX_DIM:,})")
        ggml_type = cur.u32(f"tensor {name!r} (type)")
        if _block(ggml_type) is None:
            raise _Invalid(f"tensor {name!r}: unknown tensor type {ggml_type}")
        offset = cur.u64(f"tensor {name!r} (offset)")
        infos.append((name, tuple(reversed(dims)), ggml_type, offset))  # GGUF lists cols first
    return infos


def _tensor(
    name: str, shape: tuple[int, ...], ggml_type: int, offset: int, data_offset: int, size: int
) -> TensorInfo:
    """A tensor's entry, its bytes checked to lie inside the file."""
    block, block_bytes = _block(ggml_type) or (1, 0)
    kind = type_name(ggml_type)
    n_elements = 1
    for d in shape:
        n_elements *= d
    if n_elements > _MAX_ELEMENTS:
        raise _Invalid(f"tensor {name!r}: {n_elements:,} elements (at most {_MAX_ELEMENTS:,})")
    if shape[-1] % block:
        raise _Invalid(
            f"tensor {name!r}: rows of {shape[-1]:,} values are not a multiple of {kind}'s "
            f"block of {block}"
        )
    nbytes = n_elements // block * block_bytes
    start = data_offset + offset
    if start > size or nbytes > size - start:
        raise _Invalid(
            f"tensor {name!r} ({kind}): {nbytes:,} bytes at offset {start:,} run past the end "
            f"of the {size:,}-byte file (truncated?)"
        )
    return TensorInfo(name, shape, ggml_type, start, nbytes)


def _read(buf: mmap.mmap, source: Path, arrays: bool | Container[str]) -> GGUFHeader:
    cur = _Cursor(buf)
    magic = bytes(buf[:4])
    if magic != MAGIC:
        raise _Invalid(f"magic: expected {MAGIC!r}, found {magic!r}")
    cur.pos = 4
    version = cur.u32("version")
    if version not in SUPPORTED_VERSIONS:
        raise _Invalid(f"version: {version} (Corral reads GGUF versions 2 and 3)")
    n_tensors = cur.u64("tensor_count")
    n_kv = cur.u64("metadata_kv_count")
    # Every key-value pair takes at least 13 bytes and every tensor info at least 25.
    size = cur.size
    if n_kv > cur.left() // 13:
        raise _Invalid(f"metadata_kv_count: {n_kv:,} entries cannot fit in a {size:,}-byte file")
    if n_tensors > cur.left() // 25:
        raise _Invalid(f"tensor_count: {n_tensors:,} tensors cannot fit in a {size:,}-byte file")
    if n_kv > _MAX_COUNT:
        raise _Invalid(f"metadata_kv_count: {n_kv:,} entries (at most {_MAX_COUNT:,})")
    if n_tensors > _MAX_COUNT:
        raise _Invalid(f"tensor_count: {n_tensors:,} tensors (at most {_MAX_COUNT:,})")
    metadata = _metadata(cur, n_kv, arrays)
    infos = _tensor_infos(cur, n_tensors)
    alignment = int(metadata.get("general.alignment", DEFAULT_ALIGNMENT))
    header_size = cur.pos
    data_offset = header_size + (-header_size) % alignment
    tensors = []
    for name, shape, ggml_type, offset in infos:
        if offset % alignment:
            raise _Invalid(f"tensor {name!r}: offset {offset:,} is not a multiple of {alignment}")
        tensors.append(_tensor(name, shape, ggml_type, offset, data_offset, size))
    return GGUFHeader(source, version, metadata, tensors, size, alignment, data_offset, header_size)


@contextmanager
def open_gguf(path: str | Path, *, arrays: bool | Container[str] = True) -> Iterator[MappedGGUF]:
    """Map `path` and check its whole header; yields (header, map) for `tensor_bytes`.

    Args:
        path: the .gguf file (Ollama's blobs have no suffix).
        arrays: read metadata arrays (True), skip them (False), or read only those keys.

    Raises ModelLoadError naming the file: missing, not a regular file, or "not a valid
    GGUF: FIELD: what is wrong".
    """
    source = Path(path)
    try:
        with open_regular(source, "GGUF file") as (fd, size):
            if size < _MIN_HEADER:
                raise ModelLoadError(
                    f"{source}: not a valid GGUF: header: the file has {size} bytes, fewer "
                    f"than a GGUF header's {_MIN_HEADER}"
                )
            buf = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
    except FileRefused as exc:
        raise ModelLoadError(str(exc)) from None
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"{source}: cannot be read ({exc})") from None
    try:
        try:
            header = _read(buf, source, arrays)
        except _Invalid as exc:
            raise ModelLoadError(f"{source}: not a valid GGUF: {exc}") from None
        yield MappedGGUF(header, buf)
    finally:
        try:
            buf.close()
        except BufferError:  # a caller still holds a tensor view: the map closes with it
            pass


def read_header(path: str | Path, *, arrays: bool | Container[str] = False) -> GGUFHeader:
    """The checked header of the GGUF file at `path` (arrays skipped unless asked for).

    Args:
        path: the file to read.
        arrays: as for `open_gguf`; by default arrays are skipped (each still checked).
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
