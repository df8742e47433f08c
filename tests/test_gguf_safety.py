"""GGUF import never deletes what it did not write, keys its cache by content, cleans up
after killed imports, and refuses crafted headers before MLX's native loader sees them.

Crashing inputs run in a child process (`python -m engine import-gguf ...`), so a
regression fails the test instead of taking pytest down.
"""

from __future__ import annotations

import json
import os
import random
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from gguf_support import header_only_gguf, write_tiny_gguf

from engine.errors import ModelLoadError
from engine.files import OutsideFolder, remove_tree
from engine.library.gguf_file import read_header
from engine.library.gguf_import import import_gguf
from engine.library.import_cache import MARKER, TEMP_PREFIX, safe_folder_name

REPO = Path(__file__).resolve().parents[1]


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "engine", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **(env or {})},
    )


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("CORRAL_CACHE_DIR", str(folder))
    return folder


# ---- never delete a user's folder ----


def test_import_into_a_users_folder_is_refused_and_the_folder_kept(tmp_path: Path) -> None:
    gguf = write_tiny_gguf(tmp_path / "tiny.gguf")
    folder = tmp_path / "thesis"
    folder.mkdir()
    (folder / "chapter1.txt").write_text("three years of work")
    run = _cli("import-gguf", str(gguf), str(folder))
    assert run.returncode == 2, run.stderr
    assert "not empty" in run.stderr and "never replaces a folder it did not write" in run.stderr
    assert (folder / "chapter1.txt").read_text() == "three years of work"
    assert sorted(p.name for p in folder.iterdir()) == ["chapter1.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["thesis", "tiny.gguf"]


def test_a_folder_with_an_import_marker_and_other_files_is_still_refused(tmp_path: Path) -> None:
    gguf = write_tiny_gguf(tmp_path / "tiny.gguf")
    out = import_gguf(gguf, tmp_path / "model")
    (out / "notes.md").write_text("mine")
    (out / "config.json").unlink()  # incomplete, and holding a file Corral did not write
    with pytest.raises(ModelLoadError, match="not empty"):
        import_gguf(gguf, out)
    assert (out / "notes.md").read_text() == "mine"


def test_output_may_be_new_empty_or_corrals_import_of_the_same_file(tmp_path: Path) -> None:
    gguf = write_tiny_gguf(tmp_path / "tiny.gguf")
    empty = tmp_path / "empty"
    empty.mkdir()
    assert import_gguf(gguf, empty) == empty
    assert (empty / "model.safetensors").is_file()
    stages: list[str] = []
    assert import_gguf(gguf, empty, lambda s, f: stages.append(s)) == empty  # current: kept
    assert "Converting weights" not in stages
    # an import of another file is not "Corral's import of the same file"
    other = write_tiny_gguf(tmp_path / "other.gguf", seed=1)
    with pytest.raises(ModelLoadError, match="not Corral's import of other.gguf"):
        import_gguf(other, empty)
    # an unfinished import of the same file is replaced
    (empty / "model.safetensors").unlink()
    import_gguf(gguf, empty)
    assert (empty / "model.safetensors").is_file()
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]
    assert leftovers == []


def test_an_import_finished_meanwhile_by_another_process_is_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from engine.library import gguf_import

    gguf = write_tiny_gguf(tmp_path / "tiny.gguf")
    out = tmp_path / "model"
    convert = gguf_import.convert_gguf

    def racing(*args, **kwargs):  # the other process writes `out` while this one converts
        monkeypatch.setattr(gguf_import, "convert_gguf", convert)
        import_gguf(gguf, out)
        return convert(*args, **kwargs)

    monkeypatch.setattr(gguf_import, "convert_gguf", racing)
    assert import_gguf(gguf, out) == out
    assert (out / "model.safetensors").is_file()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


@pytest.mark.parametrize("kind", ["file", "link"])
def test_output_that_is_a_file_or_a_link_is_refused(tmp_path: Path, kind: str) -> None:
    gguf = write_tiny_gguf(tmp_path / "tiny.gguf")
    target = tmp_path / "elsewhere"
    target.mkdir()
    out = tmp_path / "out"
    if kind == "file":
        out.write_text("a file")
    else:
        out.symlink_to(target)
    with pytest.raises(ModelLoadError, match="not a folder" if kind == "file" else "is a link"):
        import_gguf(gguf, out)
    assert out.exists() and target.is_dir()


@pytest.mark.parametrize("name", ["...gguf", "..gguf", ".gguf"])
def test_a_gguf_named_dot_dot_imports_inside_the_cache(tmp_path: Path, name: str) -> None:
    cache = tmp_path / "home" / "cache"
    (cache / "models" / "keep").mkdir(parents=True)
    (cache / "models" / "keep" / "weights.bin").write_text("another model")
    (tmp_path / "home" / "documents.txt").write_text("mine")
    (tmp_path / "downloads").mkdir()
    gguf = write_tiny_gguf(tmp_path / "downloads" / name)
    run = _cli("import-gguf", str(gguf), env={"CORRAL_CACHE_DIR": str(cache)})
    assert run.returncode == 0, run.stderr
    out = Path(run.stdout.strip())
    assert out.parent == (cache / "models").resolve() and (out / MARKER).is_file()
    assert (cache / "models" / "keep" / "weights.bin").read_text() == "another model"
    assert (tmp_path / "home" / "documents.txt").read_text() == "mine"


def test_cache_folder_names_are_sanitised() -> None:
    assert safe_folder_name("..") == "model"
    assert safe_folder_name(".") == "model"
    assert safe_folder_name("../../etc") == "etc"
    assert safe_folder_name("Llama 3.1 8B (Q4)") == "Llama-3.1-8B-Q4"
    assert safe_folder_name("x" * 300) == "x" * 64


def test_removal_outside_corrals_folder_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "inner").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    with pytest.raises(OutsideFolder):
        remove_tree(root / "..", root)
    with pytest.raises(OutsideFolder):
        remove_tree(root, root)
    (root / "link").symlink_to(outside)
    remove_tree(root / "link", root)  # the link goes, what it points at stays
    assert outside.is_dir() and not (root / "link").exists()
    remove_tree(root / "inner", root)
    assert not (root / "inner").exists()


# ---- the cache key ----


def test_same_name_and_size_but_other_content_gets_its_own_import(
    cache: Path, tmp_path: Path
) -> None:
    from engine.library.load import ensure_gguf_imported

    path = tmp_path / "model.gguf"
    write_tiny_gguf(path, seed=0)
    first = ensure_gguf_imported(path)
    before = path.stat()
    # The same name and size, other weights, even with the old modification time.
    path.write_bytes(write_tiny_gguf(tmp_path / "b.gguf", seed=1).read_bytes())
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert path.stat().st_size == before.st_size
    second = ensure_gguf_imported(path)
    assert second != first
    assert (second / "model.safetensors").read_bytes() != (first / "model.safetensors").read_bytes()
    marker = json.loads((second / MARKER).read_text())
    assert len(marker["sha256"]) == 64 and second.name.endswith(marker["sha256"][:16])
    # and asked again, the unchanged file is found without hashing it
    stages: list[str] = []
    assert ensure_gguf_imported(path, lambda s, f: stages.append(s)) == second
    assert stages == []


def test_an_import_reads_the_header_once(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check before hashing and the conversion share one read of the header."""
    from engine.library import gguf_file
    from engine.library.load import ensure_gguf_imported

    reads: list[Path] = []
    read = gguf_file._read

    def counted(*args: Any) -> gguf_file.GGUFHeader:
        reads.append(args[1])  # (map, path, arrays)
        return read(*args)

    monkeypatch.setattr(gguf_file, "_read", counted)
    path = write_tiny_gguf(tmp_path / "tiny.gguf")
    out = ensure_gguf_imported(path)
    assert (out / "model.safetensors").is_file()
    assert reads == [path.resolve()]


# ---- temporary folders of killed imports ----

_KILLED_IMPORT = """
import os, signal, sys
from pathlib import Path
from engine.library.import_cache import make_temp_folder
tmp = make_temp_folder(Path(sys.argv[1]))
(tmp / "model.safetensors").write_bytes(b"half written")
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_temp_folders_of_killed_imports_are_removed_at_start(cache: Path) -> None:
    models = cache / "models"
    models.mkdir(parents=True)
    run = subprocess.run([sys.executable, "-c", _KILLED_IMPORT, str(models)], cwd=REPO)
    assert run.returncode == -signal.SIGKILL
    (stale,) = [p for p in models.iterdir() if p.name.startswith(TEMP_PREFIX)]
    # a folder of an earlier Corral (no owner file), an hour old, import files only
    legacy = models / ".model.abcd1234"
    legacy.mkdir()
    (legacy / "config.json").write_text("{}")
    hour_ago = time.time() - 7200
    os.utime(legacy, (hour_ago, hour_ago))
    # hidden folders that are not Corral's, or not stale, stay
    mine = models / ".notes.abcd1234"
    mine.mkdir()
    (mine / "todo.txt").write_text("keep")
    os.utime(mine, (hour_ago, hour_ago))
    from engine.library.import_cache import make_temp_folder

    live = make_temp_folder(models)  # this process is alive: its import is under way
    from engine.library import load as model_module

    model_module._cleaned.clear()
    model_module.models_dir()
    names = {p.name for p in models.iterdir()}
    assert stale.name not in names and legacy.name not in names
    assert {mine.name, live.name} <= names


# ---- crafted headers ----


def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack("<Q", len(data)) + data


def _crafted(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    one_tensor = _string("t.weight") + struct.pack("<I", 1) + struct.pack("<Q", 32)
    return {
        "2^62 tensors": (
            header_only_gguf(tmp_path / "tensors.gguf", tensors=2**62, tail=bytes(64)),
            "tensor_count",
        ),
        "2^62 metadata entries": (
            header_only_gguf(tmp_path / "kvs.gguf", kvs=2**62, tail=bytes(64)),
            "metadata_kv_count",
        ),
        "a key longer than the file": (
            header_only_gguf(
                tmp_path / "key.gguf", kvs=1, tail=struct.pack("<Q", 2**40) + bytes(64)
            ),
            "metadata key 1",
        ),
        "an array of 2^40 strings": (
            header_only_gguf(
                tmp_path / "array.gguf",
                kvs=1,
                tail=_string("k") + struct.pack("<IIQ", 9, 8, 2**40) + bytes(64),
            ),
            "metadata 'k'",
        ),
        "alignment 0": (
            header_only_gguf(
                tmp_path / "align.gguf",
                kvs=1,
                tail=_string("general.alignment") + struct.pack("<II", 4, 0) + bytes(64),
            ),
            "general.alignment",
        ),
        "9 dimensions": (
            header_only_gguf(
                tmp_path / "dims.gguf",
                tensors=1,
                tail=_string("t.weight") + struct.pack("<I", 9) + bytes(80),
            ),
            "n_dims",
        ),
        "a tensor past the end": (
            header_only_gguf(
                tmp_path / "offset.gguf",
                tensors=1,
                tail=one_tensor + struct.pack("<IQ", 0, 2**40) + bytes(64),
            ),
            "run past the end",
        ),
        "an unknown tensor type": (
            header_only_gguf(
                tmp_path / "type.gguf",
                tensors=1,
                tail=one_tensor + struct.pack("<IQ", 4, 0) + bytes(64),
            ),
            "unknown tensor type 4",
        ),
    }


def test_crafted_headers_are_refused_without_a_crash(tmp_path: Path) -> None:
    for what, (path, field) in _crafted(tmp_path).items():
        run = _cli(
            "import-gguf",
            str(path),
            str(tmp_path / "out"),
            env={"CORRAL_CACHE_DIR": str(tmp_path / "c")},
        )
        assert run.returncode == 2, f"{what}: rc {run.returncode}\n{run.stderr[-500:]}"
        assert "not a valid GGUF" in run.stderr and field in run.stderr, (what, run.stderr)
        assert not (tmp_path / "out").exists()


def _kv(key: str, type_id: int, value: bytes) -> bytes:
    return _string(key) + struct.pack("<I", type_id) + value


def _tensor(name: str, dims: tuple[int, ...], type_id: int, offset: int) -> bytes:
    packed = struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
    return _string(name) + packed + struct.pack("<IQ", type_id, offset)


def _nested(depth: int) -> bytes:
    """An array of arrays `depth` deep around one empty uint8 array."""
    return struct.pack("<IQ", 9, 1) + _nested(depth - 1) if depth else struct.pack("<IQ", 0, 0)


@pytest.mark.parametrize(
    ("tensors", "kvs", "tail", "message"),
    [
        (0, 2, _kv("a", 4, bytes(4)) * 2 + bytes(64), "metadata key 'a': appears twice"),
        (0, 1, _kv("s", 8, struct.pack("<Q", 2**40)) + bytes(64), "metadata 's': length"),
        (0, 1, _kv("k", 9, _nested(5)) + bytes(64), "arrays nested more than 4 deep"),
        (0, 1, _kv("k", 13, bytes(64)), "metadata 'k': unknown value type 13"),
        (0, 1, _kv("k", 9, struct.pack("<IQ", 13, 1)) + bytes(64), "unknown array item type"),
        (
            0,
            1,
            _kv("general.alignment", 10, struct.pack("<Q", 32)) + bytes(64),
            "must be a power of two (uint32), got 32",
        ),
        (1, 0, _tensor("t", (0,), 0, 0) + bytes(64), "dimensions [0]"),
        (2, 0, _tensor("t", (8,), 0, 0) * 2 + bytes(64), "tensor 't': appears twice"),
        (1, 0, _tensor("t", (8,), 0, 4) + bytes(64), "offset 4 is not a multiple of 32"),
        (1, 0, _tensor("t", (16,), 2, 0) + bytes(64), "not a multiple of Q4_0's block of 32"),
    ],
)
def test_each_header_field_is_checked(
    tmp_path: Path, tensors: int, kvs: int, tail: bytes, message: str
) -> None:
    path = header_only_gguf(tmp_path / "crafted.gguf", tensors=tensors, kvs=kvs, tail=tail)
    with pytest.raises(ModelLoadError, match="not a valid GGUF") as err:
        read_header(path, arrays=True)
    assert message in str(err.value)
    assert str(path) in str(err.value)


def test_version_and_size_are_checked(tmp_path: Path) -> None:
    old = tmp_path / "v1.gguf"
    old.write_bytes(b"GGUF" + struct.pack("<IQQ", 1, 0, 0) + bytes(8))
    with pytest.raises(ModelLoadError, match="version: 1 "):
        read_header(old)
    short = tmp_path / "short.gguf"
    short.write_bytes(b"GGUF" + struct.pack("<I", 3))
    with pytest.raises(ModelLoadError, match="the file has 8 bytes, fewer than a GGUF header's"):
        read_header(short)


def test_device_files_are_not_read_as_gguf() -> None:
    with pytest.raises(ModelLoadError, match="not a regular file"):
        read_header("/dev/zero")


_LOAD_ALL = """
import sys, mlx.core as mx
for path in sys.argv[1:]:
    print(path, flush=True)
    try:
        mx.load(path, return_metadata=True)
    except Exception:
        pass
"""


def test_every_header_the_check_passes_loads_without_a_crash(tmp_path: Path) -> None:
    """Mutate a real header 300 ways: each is refused, or MLX reads it without dying."""
    source = write_tiny_gguf(tmp_path / "tiny.gguf").read_bytes()
    header_end = read_header(tmp_path / "tiny.gguf").header_size
    rng = random.Random(11)
    passed: list[str] = []
    for i in range(300):
        data = bytearray(source)
        if i % 3 == 0:
            pos = rng.randrange(4, header_end - 8)
            data[pos : pos + 8] = struct.pack(
                "<Q", rng.choice([2**62, 2**32 + 5, 2**63 - 1, 10**6])
            )
        elif i % 3 == 1:
            for _ in range(rng.randint(1, 4)):
                data[rng.randrange(4, header_end)] = rng.randrange(256)
        else:
            data = data[: rng.randrange(24, len(data))]
        path = tmp_path / f"m{i}.gguf"
        path.write_bytes(bytes(data))
        try:
            read_header(path)
            passed.append(str(path))
        except ModelLoadError as exc:
            assert "not a valid GGUF" in str(exc)
    assert 10 < len(passed) < 290  # the mutations exercise both sides
    run = subprocess.run(
        [sys.executable, "-c", _LOAD_ALL, *passed], capture_output=True, text=True, timeout=300
    )
    last = run.stdout.split()[-1:] or ["(none)"]
    assert run.returncode == 0, f"MLX crashed (rc {run.returncode}) on {last[0]}"
