"""Turn the icon source (resources/brand/corral.png, 1024x1024) into .icns and .ico files.

On macOS `sips` scales the PNG into an .iconset and `iconutil` packs it, as Apple's tools
expect. Elsewhere (and where those tools are missing) Qt scales the PNG and the .icns/.ico
containers are written here: both are a small header plus PNG-encoded images.
"""

from __future__ import annotations

import shutil
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[1] / "resources" / "brand" / "corral.png"

# .iconset file name -> pixel size (what iconutil expects), and the .icns type codes.
ICONSET = {
    "icon_16x16.png": 16,
    "icon_16x16@2x.png": 32,
    "icon_32x32.png": 32,
    "icon_32x32@2x.png": 64,
    "icon_128x128.png": 128,
    "icon_128x128@2x.png": 256,
    "icon_256x256.png": 256,
    "icon_256x256@2x.png": 512,
    "icon_512x512.png": 512,
    "icon_512x512@2x.png": 1024,
}
ICNS_TYPES = {
    "icon_16x16.png": b"icp4",
    "icon_16x16@2x.png": b"ic11",
    "icon_32x32.png": b"icp5",
    "icon_32x32@2x.png": b"ic12",
    "icon_128x128.png": b"ic07",
    "icon_128x128@2x.png": b"ic13",
    "icon_256x256.png": b"ic08",
    "icon_256x256@2x.png": b"ic14",
    "icon_512x512.png": b"ic09",
    "icon_512x512@2x.png": b"ic10",
}
ICO_SIZES = (16, 24, 32, 48, 64, 128, 256)


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height from a PNG's IHDR chunk."""
    if data[:8] != b"\x89PNG\r\n\x1a\n" or data[12:16] != b"IHDR":
        raise ValueError("not a PNG file")
    return struct.unpack(">II", data[16:24])


def scaled_png(source: Path, size: int) -> bytes:
    """`source` scaled to `size` x `size` with smooth filtering, PNG-encoded (uses Qt)."""
    from PySide6.QtCore import QBuffer, QByteArray, QIODevice, Qt
    from PySide6.QtGui import QImage

    image = QImage(str(source))
    if image.isNull():
        raise ValueError(f"{source}: Qt could not read the icon image")
    if image.width() != size:
        image = image.scaled(
            size,
            size,
            Qt.AspectRatioMode.IgnoreAspectRatio,
            Qt.TransformationMode.SmoothTransformation,
        )
    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    image.save(buffer, "PNG")
    buffer.close()
    return bytes(data.data())


def write_icns(pngs: dict[str, bytes], out: Path) -> Path:
    """Write an .icns from PNGs keyed by .iconset file name."""
    chunks = b"".join(
        ICNS_TYPES[name] + struct.pack(">I", 8 + len(data)) + data for name, data in pngs.items()
    )
    out.write_bytes(b"icns" + struct.pack(">I", 8 + len(chunks)) + chunks)
    return out


def write_ico(pngs: list[bytes], out: Path) -> Path:
    """Write a Windows .ico holding PNG-encoded images (Vista and later read these)."""
    header = struct.pack("<HHH", 0, 1, len(pngs))
    offset = 6 + 16 * len(pngs)
    entries, blobs = b"", b""
    for data in pngs:
        w, h = png_size(data)
        entries += struct.pack("<BBBBHHII", w % 256, h % 256, 0, 0, 1, 32, len(data), offset)
        offset += len(data)
        blobs += data
    out.write_bytes(header + entries + blobs)
    return out


def make_icns(out: Path, source: Path = SOURCE) -> Path:
    """Build `out` (.icns) from the source PNG: sips + iconutil on macOS, Qt elsewhere."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tools = sys.platform == "darwin" and shutil.which("sips") and shutil.which("iconutil")
    if not tools:
        return write_icns({name: scaled_png(source, px) for name, px in ICONSET.items()}, out)
    with tempfile.TemporaryDirectory() as tmp:
        iconset = Path(tmp) / "Corral.iconset"
        iconset.mkdir()
        for name, px in ICONSET.items():
            subprocess.run(
                ["sips", "-z", str(px), str(px), str(source), "--out", str(iconset / name)],
                check=True,
                capture_output=True,
            )
        subprocess.run(["iconutil", "-c", "icns", str(iconset), "-o", str(out)], check=True)
    return out


def make_ico(out: Path, source: Path = SOURCE) -> Path:
    """Build `out` (.ico) from the source PNG."""
    out.parent.mkdir(parents=True, exist_ok=True)
    return write_ico([scaled_png(source, px) for px in ICO_SIZES], out)
