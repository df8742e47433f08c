"""HEIC/HEIF photos (an iPhone's): recognised by their header, and refused with how to
convert them where no HEIF plugin for Pillow is installed."""

from __future__ import annotations

import struct

import pytest

from engine.prompt.images import BadImageError, check_image, heif_readable, is_heif
from tests.vision_support import png


def heic_header(brand: bytes = b"heic") -> bytes:
    """The start of a HEIC file: its `ftyp` box (size, type, major brand, version, brands)."""
    box = b"ftyp" + brand + struct.pack(">I", 0) + b"mif1" + brand
    return struct.pack(">I", len(box) + 4) + box + b"\x00" * 64


@pytest.mark.parametrize("brand", [b"heic", b"heix", b"mif1"])
def test_heic_is_recognised_by_its_header(brand: bytes) -> None:
    assert is_heif(heic_header(brand))
    assert not is_heif(png())
    assert not is_heif(b"....ftypisom" + b"\x00" * 16)  # an MP4 video is not a photo


def test_heic_photo_is_refused_with_how_to_convert_it() -> None:
    if heif_readable():
        pytest.skip("a HEIF plugin for Pillow is installed here: HEIC photos are read")
    with pytest.raises(BadImageError) as refused:
        check_image(heic_header(), "IMG_0042.HEIC")
    message = str(refused.value)
    assert message.startswith("IMG_0042.HEIC: a HEIC/HEIF photo")
    assert "export it as JPEG or PNG" in message
