"""Helpers of the vision tests: the tiny LLaVA on an engine, the tiny model of each vision
family (`vision_family_dir`), and images good and bad.

Import the fixtures into a test module (`from tests.vision_support import vision_engine`)
to use them; each tiny vision model is built once per session.
"""

from __future__ import annotations

import io
import struct
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from PIL import Image


@pytest.fixture(scope="session")
def vision_model_dir(tmp_path_factory: pytest.TempPathFactory, default_model_dir: Path) -> Path:
    from benchmarks.tiny_vision_model import build_tiny_vision_model

    return build_tiny_vision_model(tmp_path_factory.mktemp("tiny-vision"), default_model_dir)


@pytest.fixture(scope="session")
def vision_family_dir(
    tmp_path_factory: pytest.TempPathFactory, default_model_dir: Path
) -> Callable[[str], Path]:
    """Builds (once per session) the tiny model of a vision family by name; the family's
    chat template is read from ../shared/datasets/chat-templates (skips without it)."""
    from benchmarks.tiny_vision_families import build_family
    from tests.shared_datasets import dataset

    built: dict[str, Path] = {}

    def build(name: str) -> Path:
        if name not in built:
            templates = dataset("chat-templates")
            out = tmp_path_factory.mktemp(f"tiny-{name}")
            built[name] = build_family(name, out, default_model_dir, templates)
        return built[name]

    return build


def picture(color: tuple[int, int, int], size: tuple[int, int] = (90, 70)) -> bytes:
    """A PNG with a dark block in one corner: not a flat colour, so its patches differ."""
    img = Image.new("RGB", size, color)
    img.paste((0, 0, 0), (8, 8, size[0] // 2, size[1] // 2))
    buf = io.BytesIO()
    img.save(buf, "PNG")
    return buf.getvalue()


@pytest.fixture(scope="module")
def vision_engine(vision_model_dir: Path) -> Iterator[object]:
    """The tiny vision model on its own engine (one per test module: its own prompt cache)."""
    from engine.engine import Engine

    eng = Engine()
    eng.load_model(str(vision_model_dir)).result()
    yield eng
    eng.close()


def png(size: tuple[int, int] = (64, 48), color: tuple[int, int, int] = (200, 30, 30)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, color).save(buf, "PNG")
    return buf.getvalue()


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def huge_png(width: int = 20000, height: int = 20000) -> bytes:
    """A PNG whose header says `width` × `height` (a decompression bomb's shape): a few
    hundred bytes, refused before any pixel is decoded."""
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    body = zlib.compress(b"\0" * 1024)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _chunk(b"IHDR", header)
        + _chunk(b"IDAT", body)
        + _chunk(b"IEND", b"")
    )


def animated_gif(frames: int = 3) -> bytes:
    images = [Image.new("RGB", (40, 40), (i * 80, 0, 0)) for i in range(frames)]
    buf = io.BytesIO()
    images[0].save(buf, "GIF", save_all=True, append_images=images[1:], duration=100, loop=0)
    return buf.getvalue()


# name -> (bytes, words the refusal must contain)
BAD_IMAGES: dict[str, tuple[bytes, tuple[str, ...]]] = {
    "not an image": (b"just some text, not a picture\n" * 20, ("not an image",)),
    "truncated": (png((256, 256), (10, 200, 30))[:300], ("corrupt or truncated",)),
    "corrupt": (b"\x89PNG\r\n\x1a\n" + b"\x00garbage" * 40, ("corrupt",)),
    "decompression bomb": (huge_png(), ("20,000 × 20,000", "400.0 megapixels", "at most 40")),
}
