"""Draw Corral's app icon (resources/brand/corral.png, 1024x1024) with Qt, no fonts needed.

The icon is a macOS-style rounded square (824 px body on the 1024 px grid) with a ring of
fence posts (the corral) around a pair of braces (the structured output it keeps in).
Everything is a vector path, so the picture is the same on every machine. The build makes
the .icns/.ico from this PNG (packaging/icons.py); rerun this only to change the design:

    QT_QPA_PLATFORM=offscreen .venv/bin/python packaging/make_icon.py
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "resources" / "brand" / "corral.png"
SIZE = 1024


def _brace(painter, cx: float, cy: float, h: float, w: float, mirror: bool) -> None:
    from PySide6.QtGui import QPainterPath

    s = -1.0 if mirror else 1.0
    x = lambda dx: cx + s * dx  # noqa: E731 - local shorthand for the mirrored x
    top, mid, bot = cy - h / 2, cy, cy + h / 2
    path = QPainterPath()
    path.moveTo(x(w / 2), top)
    path.cubicTo(x(0), top, x(0), top + h * 0.06, x(0), top + h * 0.16)
    path.lineTo(x(0), mid - h * 0.14)
    path.cubicTo(x(0), mid - h * 0.04, x(-w / 2), mid, x(-w / 2), mid)
    path.cubicTo(x(-w / 2), mid, x(0), mid + h * 0.04, x(0), mid + h * 0.14)
    path.lineTo(x(0), bot - h * 0.16)
    path.cubicTo(x(0), bot - h * 0.06, x(0), bot, x(w / 2), bot)
    painter.drawPath(path)


def render(size: int = SIZE):
    """The icon as a QImage of `size` x `size` pixels (ARGB, transparent corners)."""
    from PySide6.QtCore import QPointF, QRectF, Qt
    from PySide6.QtGui import QBrush, QColor, QImage, QLinearGradient, QPainter, QPen

    image = QImage(size, size, QImage.Format.Format_ARGB32_Premultiplied)
    image.fill(Qt.GlobalColor.transparent)
    p = QPainter(image)
    p.setRenderHint(QPainter.RenderHint.Antialiasing)
    p.scale(size / SIZE, size / SIZE)

    # Body: Apple's icon grid puts an 824 px rounded square in the 1024 px canvas.
    body = QRectF(100, 100, 824, 824)
    shadow = QColor(0, 0, 0, 60)
    p.setPen(Qt.PenStyle.NoPen)
    p.setBrush(shadow)
    p.drawRoundedRect(body.translated(0, 10), 185, 185)
    gradient = QLinearGradient(QPointF(512, 100), QPointF(512, 924))
    gradient.setColorAt(0.0, QColor("#1f7a6d"))
    gradient.setColorAt(1.0, QColor("#0d3b4f"))
    p.setBrush(QBrush(gradient))
    p.drawRoundedRect(body, 185, 185)

    # The corral: a rail ring and 16 posts around it.
    centre, radius = QPointF(512, 512), 300.0
    p.setBrush(Qt.BrushStyle.NoBrush)
    p.setPen(QPen(QColor("#e9d8a6"), 22, Qt.PenStyle.SolidLine, Qt.PenCapStyle.RoundCap))
    p.drawEllipse(centre, radius, radius)
    p.setPen(Qt.PenStyle.NoPen)
    p.setBrush(QColor("#f4e9c9"))
    for i in range(16):
        angle = 2 * math.pi * i / 16
        p.save()
        p.translate(centre.x() + radius * math.cos(angle), centre.y() + radius * math.sin(angle))
        p.rotate(math.degrees(angle) + 90)
        p.drawRoundedRect(QRectF(-17, -46, 34, 92), 12, 12)
        p.restore()

    # The braces inside.
    pen = QPen(
        QColor("#ffffff"),
        44,
        Qt.PenStyle.SolidLine,
        Qt.PenCapStyle.RoundCap,
        Qt.PenJoinStyle.RoundJoin,
    )
    p.setPen(pen)
    p.setBrush(Qt.BrushStyle.NoBrush)
    _brace(p, 430, 512, 300, 90, mirror=False)
    _brace(p, 594, 512, 300, 90, mirror=True)
    p.end()
    return image


def main() -> int:
    OUT.parent.mkdir(parents=True, exist_ok=True)
    if not render().save(str(OUT), "PNG"):
        print(f"could not write {OUT}", file=sys.stderr)
        return 1
    print(OUT)
    return 0


if __name__ == "__main__":
    sys.exit(main())
