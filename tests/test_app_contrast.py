"""WCAG contrast, measured (app/views/common/theme.py): every text colour on every background the
window draws it on, in Corral's light and dark palettes, is at least 4.5:1 (3:1 for large
text); Inspect's token text on each probability colour too."""

from __future__ import annotations

import pytest
from PySide6.QtGui import QColor

from app.views.chat.token_view import TOKEN_TEXT, probability_colour
from app.views.common import theme


@pytest.fixture(params=["light", "dark"])
def palette_colours(request, qapp):
    theme.apply_appearance(request.param)
    yield theme.colors()
    theme.apply_appearance("system")


def test_the_contrast_formula_matches_wcag():
    assert theme.contrast(QColor("#000000"), QColor("#ffffff")) == pytest.approx(21.0)
    assert theme.contrast(QColor("#777777"), QColor("#ffffff")) == pytest.approx(4.48, abs=0.01)
    assert theme.contrast(QColor("#ffffff"), QColor("#ffffff")) == pytest.approx(1.0)


def test_every_text_pair_meets_aa(palette_colours):
    pairs = theme.text_pairs(palette_colours)
    assert len(pairs) >= 20
    failing = [
        f"{where}: {fg.name()} on {bg.name()} is {theme.contrast(fg, bg):.2f}:1"
        for where, fg, bg, large in pairs
        if theme.contrast(fg, bg) < (theme.AA_LARGE if large else theme.AA_TEXT)
    ]
    assert failing == []


def test_inspect_tokens_are_readable_on_every_probability_colour():
    text = QColor(TOKEN_TEXT)
    for logprob in (None, -20.0, -5.0, -2.0, -1.0, -0.5, -0.1, 0.0):
        background = QColor(probability_colour(logprob))
        assert theme.contrast(text, background) >= theme.AA_TEXT, (logprob, background.name())


@pytest.mark.parametrize("appearance", ["light", "dark"])
def test_a_dialogs_close_icon_is_readable_on_its_button(qapp, appearance):
    """Preferences' Close: the × its platform draws for a light background was nearly
    invisible in dark; Corral's style draws it in the button's text colour."""
    from PySide6.QtGui import QPalette
    from PySide6.QtWidgets import QApplication, QStyle

    from app.views.common.style import install_style

    install_style()
    theme.apply_appearance(appearance)  # after the style: a new style resets the palette
    try:
        style = QApplication.style()
        background = QApplication.palette().color(QPalette.ColorRole.Button)
        for kind in (
            QStyle.StandardPixmap.SP_DialogCloseButton,
            QStyle.StandardPixmap.SP_DialogOkButton,
        ):
            image = style.standardIcon(kind).pixmap(32, 32).toImage()
            inked = [
                image.pixelColor(x, y)
                for x in range(image.width())
                for y in range(image.height())
                if image.pixelColor(x, y).alpha() == 255
            ]
            assert inked, "the icon draws nothing"
            assert max(theme.contrast(QColor(p.rgb()), background) for p in inked) >= theme.AA_TEXT
    finally:
        theme.apply_appearance("system")
