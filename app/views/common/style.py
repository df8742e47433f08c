"""The app's style: the platform's own, with the standard icons of dialog buttons (Close,
OK, Cancel) drawn as Corral's line icons in the palette's button-text colour at paint time.
The platform's pictures are drawn for a light background: in dark mode Close's × was
nearly invisible; these follow light and dark, and keep 4.5:1 (tests/test_app_contrast.py).
Where the platform shows no icons on dialog buttons (macOS), none are shown."""

from __future__ import annotations

from PySide6.QtCore import QRect, QSize
from PySide6.QtGui import QIcon, QIconEngine, QPainter, QPalette, QPixmap
from PySide6.QtWidgets import QApplication, QProxyStyle, QStyle, QStyleOption, QWidget

from app.views.common import theme
from app.views.common.icons import line_pixmap

SP = QStyle.StandardPixmap
DIALOG_ICONS = {
    SP.SP_DialogCloseButton: "close",
    SP.SP_DialogCancelButton: "close",
    SP.SP_DialogNoButton: "close",
    SP.SP_DialogDiscardButton: "close",
    SP.SP_DialogOkButton: "check",
    SP.SP_DialogYesButton: "check",
    SP.SP_DialogApplyButton: "check",
}


def icon_colour(mode: QIcon.Mode) -> str:
    """The colour a dialog button's icon is drawn in now: its text's, or faint disabled."""
    if mode == QIcon.Mode.Disabled:
        return theme.css(theme.colors().faint)
    return theme.css(QApplication.palette().color(QPalette.ColorRole.ButtonText))


class PaletteIcon(QIconEngine):
    """A line icon drawn in the current palette's colour each time it is painted."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name

    def pixmap(self, size: QSize, mode: QIcon.Mode, state: QIcon.State) -> QPixmap:
        return line_pixmap(self.name, icon_colour(mode), min(size.width(), size.height()))

    def paint(self, painter: QPainter, rect: QRect, mode: QIcon.Mode, state: QIcon.State) -> None:
        painter.drawPixmap(rect, self.pixmap(rect.size(), mode, state))

    def clone(self) -> QIconEngine:
        return PaletteIcon(self.name)


class CorralStyle(QProxyStyle):
    """The platform's style, with dialog buttons' icons that follow the palette."""

    def standardIcon(
        self,
        standardIcon: QStyle.StandardPixmap,  # noqa: N803 (Qt's name)
        option: QStyleOption | None = None,
        widget: QWidget | None = None,
    ) -> QIcon:
        name = DIALOG_ICONS.get(standardIcon)
        if name is not None:
            return QIcon(PaletteIcon(name))
        return super().standardIcon(standardIcon, option, widget)


def install_style() -> None:
    """Wrap the application's style in CorralStyle, once (before the palette is set: a new
    style resets it)."""
    app = QApplication.instance()
    if isinstance(app, QApplication) and not isinstance(app.style(), CorralStyle):
        app.setStyle(CorralStyle(app.style().name()))
