"""Line icons drawn from small SVG paths in the palette's colours, and the icon button that
redraws them when the palette changes (light/dark). 24-unit grid, 1.75 stroke, round caps."""

from __future__ import annotations

from functools import cache

from PySide6.QtCore import QByteArray, QEvent, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QGuiApplication, QIcon, QPainter, QPixmap
from PySide6.QtSvg import QSvgRenderer
from PySide6.QtWidgets import QToolButton, QWidget

from app.views.common import theme

PATHS = {
    "copy": '<rect x="8.5" y="8.5" width="11" height="11" rx="2"/>'
    '<path d="M15.5 8.5V6.5a2 2 0 0 0-2-2h-7a2 2 0 0 0-2 2v7a2 2 0 0 0 2 2h2"/>',
    "check": '<path d="M5 12.5l4.5 4.5L19 7.5"/>',
    "edit": '<path d="M4.5 19.5h3.8L19 8.8 15.2 5 4.5 15.7z"/><path d="M13 7.2l3.8 3.8"/>',
    "regenerate": '<path d="M19.5 12a7.5 7.5 0 1 1-2.2-5.3"/><path d="M19.5 4.5v4.7h-4.7"/>',
    "versions": '<path d="M12 4 4 8.5l8 4.5 8-4.5z"/><path d="M4 12.5l8 4.5 8-4.5"/>'
    '<path d="M4 16.5l8 4.5 8-4.5"/>',
    "continue": '<path d="M5 12h13"/><path d="M13 6.5l5.5 5.5-5.5 5.5"/>',
    "send": '<path d="M12 18.5v-13"/><path d="M6.5 11L12 5.5 17.5 11"/>',
    "stop": '<rect x="7" y="7" width="10" height="10" rx="1.5" fill="currentColor"/>',
    "sidebar": '<rect x="3.5" y="4.5" width="17" height="15" rx="2.5"/><path d="M9.5 4.5v15"/>',
    "new": '<path d="M12 4.5H6.5a2 2 0 0 0-2 2v11a2 2 0 0 0 2 2h11a2 2 0 0 0 2-2V12"/>'
    '<path d="M17.3 3.7l3 3-7.6 7.6H9.7v-3z"/>',
    "settings": '<path d="M4 7h9.5M18.5 7H20M4 17h3.5M12.5 17H20"/>'
    '<circle cx="16" cy="7" r="2.5"/><circle cx="10" cy="17" r="2.5"/>',
    "tools": '<path d="M14.6 4.2a4.8 4.8 0 0 0-4.3 6.6L4.4 16.7a2 2 0 0 0 2.9 2.9l5.9-5.9'
    'a4.8 4.8 0 0 0 6.6-4.3l-2.6 2.6-3-.6-.6-3z"/>',
    "close": '<path d="M7 7l10 10M17 7L7 17"/>',
    "left": '<path d="M14.5 6.5L9 12l5.5 5.5"/>',
    "right": '<path d="M9.5 6.5L15 12l-5.5 5.5"/>',
    "down": '<path d="M7 10l5 5 5-5"/>',
    "braces": '<path d="M9 4.5H8a2 2 0 0 0-2 2V10l-1.5 2L6 14v3.5a2 2 0 0 0 2 2h1"/>'
    '<path d="M15 4.5h1a2 2 0 0 1 2 2V10l1.5 2-1.5 2v3.5a2 2 0 0 1-2 2h-1"/>',
    "file": '<path d="M13.5 3.5H7a2 2 0 0 0-2 2v13a2 2 0 0 0 2 2h10a2 2 0 0 0 2-2V9z"/>'
    '<path d="M13.5 3.5V9H19"/><path d="M12 11.5v6M9.2 14.8l2.8 2.8 2.8-2.8"/>',
    "attach": '<path d="M19 11.5l-7.2 7.2a4.6 4.6 0 0 1-6.5-6.5l7.6-7.6a3.1 3.1 0 0 1 4.4 4.4'
    'l-7.6 7.6a1.5 1.5 0 0 1-2.2-2.2l7-7"/>',
    "search": '<circle cx="11" cy="11" r="6"/><path d="M19.5 19.5l-4.2-4.2"/>',
    "inspect": '<path d="M4.5 19.5h15"/><path d="M7.5 16v-4M12 16V6.5M16.5 16V9.5"/>',
    "alert": '<circle cx="12" cy="12" r="8.5"/><path d="M12 7.8v5"/>'
    '<circle cx="12" cy="16.2" r=".9" fill="currentColor"/>',
    "model": '<rect x="5.5" y="5.5" width="13" height="13" rx="2.5"/>'
    '<path d="M9.5 2.5v3M14.5 2.5v3M9.5 18.5v3M14.5 18.5v3M2.5 9.5h3M2.5 14.5h3'
    'M18.5 9.5h3M18.5 14.5h3"/>',
    "download": '<path d="M12 4.5v10.5"/><path d="M7.5 10.5l4.5 4.5 4.5-4.5"/>'
    '<path d="M5 19.5h14"/>',
    "table": '<rect x="4" y="5" width="16" height="14" rx="2"/><path d="M4 10h16M10 10v9"/>',
    "more": '<circle cx="6" cy="12" r="1.3" fill="currentColor"/>'
    '<circle cx="12" cy="12" r="1.3" fill="currentColor"/>'
    '<circle cx="18" cy="12" r="1.3" fill="currentColor"/>',
}


def _svg(name: str, color: str, stroke: float) -> bytes:
    body = PATHS[name].replace("currentColor", color)
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24" fill="none" '
        f'stroke="{color}" stroke-width="{stroke}" stroke-linecap="round" '
        f'stroke-linejoin="round">{body}</svg>'
    ).encode()


@cache
def _pixmap(name: str, color: str, size: int, ratio: float, stroke: float) -> QPixmap:
    pixmap = QPixmap(int(size * ratio), int(size * ratio))
    pixmap.fill(Qt.GlobalColor.transparent)
    renderer = QSvgRenderer(QByteArray(_svg(name, color, stroke)))
    painter = QPainter(pixmap)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    renderer.render(painter, QRectF(0, 0, size * ratio, size * ratio))
    painter.end()
    pixmap.setDevicePixelRatio(ratio)
    return pixmap


def line_pixmap(name: str, color: str, size: int, stroke: float = 1.75) -> QPixmap:
    """`name` drawn in `color` (a "#rrggbb"), `size` pixels square at the screen's ratio."""
    screen = QGuiApplication.primaryScreen()
    ratio = max(1.0, screen.devicePixelRatio()) if screen is not None else 1.0
    return _pixmap(name, color, size, ratio, stroke)


def icon(name: str, color: QColor | None = None, size: int = 18, stroke: float = 1.75) -> QIcon:
    """`name` drawn in `color` (default: secondary text), brighter when active, faint when
    disabled."""
    c = theme.colors()
    screen = QGuiApplication.primaryScreen()
    ratio = max(1.0, screen.devicePixelRatio()) if screen is not None else 1.0
    normal = color or c.secondary
    result = QIcon()
    for mode, colour in (
        (QIcon.Mode.Normal, normal),
        (QIcon.Mode.Active, c.text if color is None else color),
        (QIcon.Mode.Disabled, c.faint),
        (QIcon.Mode.Selected, c.text if color is None else color),
    ):
        result.addPixmap(_pixmap(name, theme.css(colour), size, ratio, stroke), mode)
    return result


class IconButton(QToolButton):
    """A borderless icon button with a tooltip; redraws its icon for a new palette."""

    def __init__(
        self,
        name: str,
        tooltip: str,
        parent: QWidget | None = None,
        *,
        size: int = 18,
        color_role: str | None = None,
    ) -> None:
        super().__init__(parent)
        self._name = name
        self._size = size
        self._color_role = color_role
        self.setObjectName("iconButton")
        self.setToolTip(tooltip)
        self.setAccessibleName(tooltip.split(" (")[0])
        self.setAutoRaise(True)
        self.setCursor(Qt.CursorShape.PointingHandCursor)
        self.setIconSize(QSize(size, size))
        self._refresh()

    def set_icon_name(self, name: str) -> None:
        self._name = name
        self._refresh()

    def icon_name(self) -> str:
        return self._name

    def _refresh(self) -> None:
        color = getattr(theme.colors(), self._color_role) if self._color_role else None
        self.setIcon(icon(self._name, color, self._size))

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange:
            self._refresh()
