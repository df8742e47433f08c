"""Corral's design system in one place: spacing and type scales, colours derived from the
current palette (so light and dark both work), the appearance setting, and the style sheet.

docs/design.md explains the choices. Views take their numbers from here (`SPACE`, `type_scale`)
and their colours from `colors()`, never from literals, so a palette change (the system
switching to dark mode, or the user's override in Preferences) recolours everything.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from enum import StrEnum

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QFont, QGuiApplication, QPalette
from PySide6.QtWidgets import QApplication


class Space:
    """The spacing scale, in device-independent pixels: every margin and gap is one of these."""

    XXS = 2
    XS = 4
    S = 8
    M = 12
    L = 16
    XL = 24
    XXL = 32


SPACE = Space

RADIUS_S = 6  # chips, code blocks, inputs
RADIUS_L = 14  # message bubbles, the composer card
FOCUS_RING = 2  # px: the ring round the control with keyboard focus
CHAT_MAX_WIDTH = 780  # a readable line length for the conversation column
USER_BUBBLE_RATIO = 0.8  # a user bubble takes at most this share of the column


class Appearance(StrEnum):
    SYSTEM = "system"
    LIGHT = "light"
    DARK = "dark"


@dataclass(frozen=True)
class TypeScale:
    """Point sizes on the system font. Chat text (messages, the composer) has its own size,
    the user's choice; the rest of the window follows the system's UI font: secondary text
    (stats, hints) smaller and lighter, titles larger."""

    chat: float
    body: float
    secondary: float
    caption: float
    title: float
    display: float

    @classmethod
    def make(cls, chat_pt: float, body_pt: float) -> TypeScale:
        return cls(
            chat=chat_pt,
            body=body_pt,
            secondary=round(body_pt * 0.93, 1),
            caption=round(body_pt * 0.86, 1),
            title=round(body_pt * 1.15, 1),
            display=round(body_pt * 1.9, 1),
        )


def system_font() -> QFont:
    return QGuiApplication.font()


def default_chat_pt() -> float:
    """The chat text size when the user has not chosen one: a step above the system font
    (14 pt on macOS, whose UI font is 13 pt)."""
    base = system_font().pointSizeF()
    return round(max(base, 9.0) * 14 / 13)


_chat_pt: float | None = None


def set_chat_pt(points: float | None) -> None:
    """The user's chat text size (None: the default)."""
    global _chat_pt
    _chat_pt = points


def type_scale() -> TypeScale:
    body = max(system_font().pointSizeF(), 9.0)
    return TypeScale.make(_chat_pt or default_chat_pt(), body)


def font(size_pt: float, weight: QFont.Weight = QFont.Weight.Normal) -> QFont:
    f = QFont(system_font())
    f.setPointSizeF(size_pt)
    f.setWeight(weight)
    return f


def mono_font(size_pt: float) -> QFont:
    from PySide6.QtGui import QFontDatabase

    f = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
    f.setPointSizeF(size_pt * 0.92)  # monospace looks larger than the text face at one size
    return f


# ---- colours ----


def mix(a: QColor, b: QColor, amount: float) -> QColor:
    """`a` moved `amount` (0..1) of the way towards `b`."""
    return QColor.fromRgbF(
        a.redF() + (b.redF() - a.redF()) * amount,
        a.greenF() + (b.greenF() - a.greenF()) * amount,
        a.blueF() + (b.blueF() - a.blueF()) * amount,
    )


# How far secondary text is mixed towards the surface: 0.40 left reply tags and labels on
# tinted backgrounds under 4.5:1 (tests/test_app_contrast.py measures every pair).
SECONDARY_MIX = 0.34


@dataclass(frozen=True)
class Colors:
    """The roles the views use, derived from a QPalette."""

    dark: bool
    window: QColor  # the sidebar and panels
    surface: QColor  # the conversation and inputs
    text: QColor
    secondary: QColor  # stats, hints, timestamps
    faint: QColor  # placeholders, disabled icons
    border: QColor
    hover: QColor  # the background of a hovered row or button
    accent: QColor
    accent_text: QColor
    user_bubble: QColor
    code_background: QColor
    chip: QColor
    danger: QColor
    warning: QColor
    success: QColor  # a reply valid against its schema
    selection: QColor


def colors(palette: QPalette | None = None) -> Colors:
    p = palette or QGuiApplication.palette()
    role = QPalette.ColorRole
    surface, text = p.color(role.Base), p.color(role.Text)
    window = p.color(role.Window)
    accent = p.color(role.Highlight)
    dark = surface.lightnessF() < 0.5
    red = QColor("#ff7b72") if dark else QColor("#c9352b")
    amber = QColor("#e5b45a") if dark else QColor("#9a6200")
    green = QColor("#5cc87a") if dark else QColor("#1d7a3a")
    return Colors(
        dark=dark,
        window=window,
        surface=surface,
        text=text,
        secondary=mix(text, surface, SECONDARY_MIX),
        faint=mix(text, surface, 0.62),
        border=mix(text, surface, 0.86 if dark else 0.88),
        hover=mix(text, surface, 0.92 if dark else 0.94),
        accent=accent,
        accent_text=p.color(role.HighlightedText),
        user_bubble=mix(surface, accent, 0.22 if dark else 0.12),
        code_background=mix(surface, text, 0.07 if dark else 0.045),
        chip=mix(surface, accent, 0.16 if dark else 0.09),
        danger=red,
        warning=amber,
        success=green,
        selection=mix(surface, accent, 0.35),
    )


def css(color: QColor) -> str:
    return color.name(QColor.NameFormat.HexRgb)


# ---- appearance ----

_LIGHT = {
    "Window": "#f3f3f5",
    "WindowText": "#1d1d1f",
    "Base": "#ffffff",
    "AlternateBase": "#f6f6f8",
    "Text": "#1d1d1f",
    "Button": "#f3f3f5",
    "ButtonText": "#1d1d1f",
    "BrightText": "#ffffff",
    "Light": "#ffffff",
    "Midlight": "#e4e4e8",
    "Mid": "#b9b9bf",
    "Dark": "#8e8e93",
    "Shadow": "#5a5a60",
    "Highlight": "#2f6fde",
    "HighlightedText": "#ffffff",
    "Link": "#2f6fde",
    "LinkVisited": "#6a4fc8",
    "PlaceholderText": "#6e6e73",  # 5.1:1 on Base (#8e8e93 was 3.3:1)
    "ToolTipBase": "#ffffff",
    "ToolTipText": "#1d1d1f",
    "Accent": "#2f6fde",
}
_DARK = {
    "Window": "#1f1f22",
    "WindowText": "#ececef",
    "Base": "#28282c",
    "AlternateBase": "#2e2e33",
    "Text": "#ececef",
    "Button": "#323237",
    "ButtonText": "#ececef",
    "BrightText": "#ffffff",
    "Light": "#48484f",
    "Midlight": "#3a3a40",
    "Mid": "#5e5e66",
    "Dark": "#161618",
    "Shadow": "#000000",
    "Highlight": "#2f6fde",  # white on it: 4.7:1 (a lighter blue was 3.2:1)
    "HighlightedText": "#ffffff",
    "Link": "#7aaaff",
    "LinkVisited": "#b49cff",
    "PlaceholderText": "#9a9aa2",  # 5.3:1 on Base
    "ToolTipBase": "#323237",
    "ToolTipText": "#ececef",
    "Accent": "#2f6fde",
}


def palette_for(appearance: Appearance) -> QPalette:
    """Corral's own light or dark palette (used when the user overrides the system)."""
    values = _DARK if appearance == Appearance.DARK else _LIGHT
    palette = QPalette()
    for name, value in values.items():
        role = getattr(QPalette.ColorRole, name, None)
        if role is None:  # Accent is Qt >= 6.6
            continue
        colour = QColor(value)
        palette.setColor(QPalette.ColorGroup.All, role, colour)
        if name in ("Text", "WindowText", "ButtonText"):
            dim = mix(colour, QColor(values["Base"]), 0.55)
            palette.setColor(QPalette.ColorGroup.Disabled, role, dim)
    return palette


def apply_appearance(appearance: Appearance | str) -> None:
    """Follow the system (default) or force light or dark, at once, for the whole app."""
    app = QApplication.instance()
    if not isinstance(app, QApplication):
        return
    appearance = Appearance(appearance)
    hints = QGuiApplication.styleHints()
    if hasattr(hints, "setColorScheme"):  # Qt >= 6.8: native controls (macOS) follow too
        scheme = {
            Appearance.SYSTEM: Qt.ColorScheme.Unknown,
            Appearance.LIGHT: Qt.ColorScheme.Light,
            Appearance.DARK: Qt.ColorScheme.Dark,
        }[appearance]
        hints.setColorScheme(scheme)
    if appearance == Appearance.SYSTEM:
        # An empty palette resets the app to the platform's, which then follows the
        # system's light/dark switch by itself.
        app.setPalette(QPalette())
        if sys.platform != "darwin" and _looks_unstyled(app.palette()):
            app.setPalette(palette_for(Appearance.LIGHT))
    else:
        app.setPalette(palette_for(appearance))


def _looks_unstyled(palette: QPalette) -> bool:
    """Qt's bare fallback palette (no desktop theme: offscreen, minimal X sessions) draws
    placeholder text in full black; use Corral's light palette there instead."""
    role = QPalette.ColorRole
    return palette.color(role.PlaceholderText) == palette.color(role.Text)


# ---- the style sheet ----


def style_sheet(c: Colors | None = None, t: TypeScale | None = None) -> str:
    """The window's style sheet for the current palette and chat text size."""
    c = c or colors()
    t = t or type_scale()
    return f"""
QMainWindow, #shell {{ background: {css(c.window)}; }}
#sidebar {{ background: {css(c.window)}; }}
#sidebar QListView {{
    background: transparent; border: none; font-size: {t.secondary}pt; outline: 0;
}}
#sidebar QListView::item {{ padding: {SPACE.S - 1}px {SPACE.S}px; border-radius: {RADIUS_S}px; }}
#sidebar QListView::item:hover {{ background: {css(c.hover)}; }}
#sidebar QListView::item:selected {{ background: {css(c.chip)}; color: {css(c.text)}; }}
#sidebarTitle {{ font-size: {t.caption}pt; font-weight: 600; color: {css(c.secondary)}; }}
#search {{
    border: 1px solid {css(c.border)}; border-radius: {RADIUS_S}px;
    padding: {SPACE.XS + 1}px {SPACE.S}px; background: {css(c.surface)};
}}
#chatArea, #chatView, #chatView > QWidget > QWidget, #chatColumn {{ background: {css(c.surface)}; }}
#chatArea {{ border-left: 1px solid {css(c.border)}; }}
#inspector {{ background: {css(c.window)}; border-left: 1px solid {css(c.border)}; }}
#inspector[overlay="true"] {{ border-left: 1px solid {css(c.faint)}; }}
#sidebar[overlay="true"] {{ border-right: 1px solid {css(c.faint)}; }}
#scrim {{ background: rgba(0, 0, 0, {40 if c.dark else 22}); }}
#message {{ border: 2px solid transparent; border-radius: {RADIUS_S + 2}px; }}
#message:focus {{ border-color: {css(mix(c.accent, c.surface, 0.35))}; }}
#message[role="user"] #bubble {{
    background: {css(c.user_bubble)}; border-radius: {RADIUS_L}px;
}}
#roleTag, #constraintTag {{
    color: {css(c.secondary)}; font-size: {t.caption}pt;
}}
#constraintTag {{
    background: {css(c.chip)}; border-radius: {RADIUS_S}px; padding: 1px {SPACE.S}px;
}}
#stats, #hint, #sectionHint {{ color: {css(c.secondary)}; font-size: {t.caption}pt; }}
#replyNote {{ color: {css(c.secondary)}; font-size: {t.secondary}pt; }}
#validMark {{ color: {css(c.success)}; font-size: {t.secondary}pt; }}
#replyNote[kind="error"] {{ color: {css(c.danger)}; }}
#replyNote[kind="warning"] {{ color: {css(c.warning)}; }}
#noteAction {{
    border: 1px solid {css(c.border)}; border-radius: {RADIUS_S}px;
    padding: 2px {SPACE.S + 2}px; background: {css(c.surface)}; font-size: {t.secondary}pt;
}}
#noteAction:hover {{ background: {css(c.hover)}; }}
#messageActions QToolButton, #codeHeader QToolButton, #iconButton {{
    border: none; border-radius: {RADIUS_S}px; padding: 3px;
}}
#messageActions QToolButton:hover, #codeHeader QToolButton:hover, #iconButton:hover {{
    background: {css(c.hover)};
}}
#branchLabel {{ color: {css(c.secondary)}; font-size: {t.caption}pt; }}
#codeBlock {{
    background: {css(c.code_background)}; border-radius: {RADIUS_S}px;
    border: 1px solid {css(c.border)};
}}
#codeHeader {{ border-bottom: 1px solid {css(c.border)}; }}
#codeLanguage {{ color: {css(c.secondary)}; font-size: {t.caption}pt; }}
#toolCard {{
    background: {css(c.code_background)}; border: 1px solid {css(c.border)};
    border-radius: {RADIUS_S + 2}px;
}}
#toolTitle {{ font-weight: 600; }}
#toolResult {{ color: {css(c.secondary)}; }}
#composerCard {{
    background: {css(c.surface)}; border: 1px solid {css(c.border)};
    border-radius: {RADIUS_L}px;
}}
#composerCard[focused="true"] {{ border-color: {css(mix(c.accent, c.surface, 0.35))}; }}
#composerEdit {{ background: transparent; border: none; font-size: {t.chat}pt; }}
#sendButton {{
    background: {css(c.accent)}; border: none; border-radius: 16px;
}}
#sendButton:disabled {{ background: {css(c.border)}; }}
#sendButton[busy="true"] {{ background: {css(c.text)}; }}
#chip, #constrainButton, #toolsChip {{
    border: 1px solid {css(c.border)}; border-radius: {RADIUS_S + 4}px;
    padding: 2px {SPACE.S}px; background: {css(c.surface)}; font-size: {t.secondary}pt;
    color: {css(c.secondary)};
}}
#chip[active="true"], #toolsChip[active="true"] {{
    background: {css(c.chip)}; color: {css(c.text)}; border-color: {css(c.chip)};
}}
#chip:hover, #constrainButton:hover, #toolsChip:hover {{ border-color: {css(c.faint)}; }}
#toolsChip::menu-indicator, #constrainButton::menu-indicator {{ width: 0; image: none; }}
#actionVersions::menu-indicator {{ width: 0; image: none; }}
#chipRemove {{ border: none; padding: 0; }}
#documentChip {{
    border: 1px solid {css(c.border)}; border-radius: {RADIUS_S + 4}px;
    background: {css(c.chip)};
}}
#documentButton {{
    border: none; padding: 2px {SPACE.S}px; font-size: {t.secondary}pt; color: {css(c.text)};
}}
#documentButton:hover {{ text-decoration: underline; }}
#documentButton:focus {{ border: 2px solid {css(c.accent)}; border-radius: {RADIUS_S + 2}px; }}
#modelPicker {{
    border: 1px solid {css(c.border)}; border-radius: {RADIUS_S}px; background: {css(c.surface)};
    padding: 3px {SPACE.S + 4}px 3px {SPACE.S}px;
}}
#modelPicker:hover, #modelPicker:pressed {{ border-color: {css(c.faint)}; }}
#modelPicker::menu-indicator {{ image: none; width: 0; }}
#downloadChip {{ border: none; border-radius: {RADIUS_S}px; padding: 2px {SPACE.XS}px;
    color: {css(c.secondary)}; font-size: {t.secondary}pt; }}
#downloadChip:hover {{ background: {css(c.hover)}; color: {css(c.text)}; }}
#downloadMessage[kind="error"] {{ color: {css(c.danger)}; }}
#downloadMessage[kind="warning"] {{ color: {css(c.warning)}; }}
#constraintError {{ color: {css(c.danger)}; font-size: {t.secondary}pt; }}
#toolError {{ color: {css(c.danger)}; }}
#toolsStatus[error="true"] {{ color: {css(c.danger)}; }}
#noticeBar {{ background: {css(c.window)}; border-bottom: 1px solid {css(c.border)}; }}
#noticeBar[kind="error"] #noticeText {{ color: {css(c.danger)}; }}
#loadingStrip {{ color: {css(c.secondary)}; font-size: {t.secondary}pt; }}
#welcomeTitle {{ font-size: {t.display}pt; font-weight: 600; }}
#welcomeText {{ color: {css(c.secondary)}; font-size: {t.secondary}pt; }}
#examplePrompt {{
    border: 1px solid {css(c.border)}; border-radius: {RADIUS_S + 4}px;
    background: {css(c.surface)};
}}
#examplePrompt:hover {{ background: {css(c.hover)}; border-color: {css(c.faint)}; }}
#exampleTitle {{ font-weight: 600; font-size: {t.secondary}pt; }}
#exampleText {{ color: {css(c.secondary)}; font-size: {t.secondary}pt; }}
#dropTarget {{
    border: 1px dashed {css(c.faint)}; border-radius: {RADIUS_L}px;
    color: {css(c.secondary)}; font-size: {t.secondary}pt; padding: {SPACE.L}px;
}}
#dropTarget[armed="true"] {{
    border: 2px dashed {css(c.accent)}; background: {css(c.chip)}; color: {css(c.text)};
}}
#inspector QTabWidget::pane {{ border: none; border-top: 1px solid {css(c.border)}; }}
#inspector QTabBar::tab {{
    background: transparent; border: none; color: {css(c.secondary)};
    padding: {SPACE.S - 2}px {SPACE.M}px; margin-left: {SPACE.S}px;
    border-bottom: 2px solid transparent;
}}
#inspector QTabBar::tab:selected {{ color: {css(c.text)}; border-bottom-color: {css(c.accent)}; }}
#inspector QTabBar::tab:hover {{ color: {css(c.text)}; }}
#inspectorTitle {{ font-weight: 600; }}
#sectionTitle {{ font-weight: 600; font-size: {t.secondary}pt; }}
#modelDefault {{ color: {css(c.secondary)}; }}
QScrollBar:vertical {{ background: transparent; width: 10px; margin: 2px; }}
QScrollBar:horizontal {{ background: transparent; height: 10px; margin: 2px; }}
QScrollBar::handle {{ background: {css(c.faint)}; border-radius: 3px; }}
QScrollBar::handle:hover {{ background: {css(c.secondary)}; }}
QScrollBar::handle:vertical {{ min-height: 28px; }}
QScrollBar::handle:horizontal {{ min-width: 28px; }}
QScrollBar::add-line, QScrollBar::sub-line {{ width: 0; height: 0; }}
QScrollBar::add-page, QScrollBar::sub-page {{ background: transparent; }}
QAbstractSpinBox[followsModel="true"] {{ color: {css(c.secondary)}; }}
QToolTip {{
    color: {css(c.text)}; background: {css(c.surface)}; border: 1px solid {css(c.border)};
    padding: {SPACE.XS}px {SPACE.S}px;
}}
{focus_rules(c)}"""


def focus_rules(c: Colors) -> str:
    """A focus ring (FOCUS_RING px of the accent colour) on every control that takes focus,
    in both themes: the generic kinds, then each control the sheet styles by name (a
    name outranks a kind in a style sheet). The chat list rings the row with focus, which
    selection alone does not; the composer's card shows its field's focus. The Send
    button is filled with the accent, so its ring is the text colour."""
    ring = f"border: {FOCUS_RING}px solid {css(c.accent)};"
    named = ", ".join(
        f"{name}:focus"
        for name in (
            "#search",
            "#noteAction",
            "#messageActions QToolButton",
            "#codeHeader QToolButton",
            "#iconButton",
            "#chip",
            "#constrainButton",
            "#toolsChip",
            "#chipRemove",
            "#modelPicker",
            "#downloadChip",
            "#examplePrompt",
            "#dropTarget",
            "#sendButton",
            "#renameField",
        )
    )
    kinds = ", ".join(
        f"{kind}:focus"
        for kind in (
            "QAbstractButton",
            "QComboBox",
            "QLineEdit",
            "QAbstractSpinBox",
            "QAbstractItemView",
            "QPlainTextEdit",
            "QTextEdit",
            "QTabBar",
            "QSlider",
        )
    )
    return f"""
{kinds} {{ {ring} border-radius: {RADIUS_S}px; }}
{named} {{ {ring} }}
#sidebar QListView::item:focus {{ {ring} }}
#composerCard[focused="true"] {{ border: {FOCUS_RING}px solid {css(c.accent)}; }}
#sendButton:focus {{ border: {FOCUS_RING}px solid {css(c.text)}; }}
"""


# ---- contrast (WCAG 2.x) ----

AA_TEXT = 4.5  # body text
AA_LARGE = 3.0  # text at 18 pt, or 14 pt bold, and larger


def relative_luminance(color: QColor) -> float:
    """WCAG's relative luminance of an opaque colour."""

    def channel(value: float) -> float:
        return value / 12.92 if value <= 0.04045 else ((value + 0.055) / 1.055) ** 2.4

    r, g, b = (channel(v) for v in (color.redF(), color.greenF(), color.blueF()))
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(foreground: QColor, background: QColor) -> float:
    """WCAG's contrast ratio of two colours, from 1 to 21."""
    a, b = relative_luminance(foreground), relative_luminance(background)
    return (max(a, b) + 0.05) / (min(a, b) + 0.05)


def text_pairs(c: Colors) -> list[tuple[str, QColor, QColor, bool]]:
    """Every text colour the style sheet and the views put on a background: (where, text,
    background, large text). Kept beside the style sheet so a new pair is added here."""
    palette = QGuiApplication.palette()
    link = palette.color(QPalette.ColorRole.Link)
    placeholder = palette.color(QPalette.ColorRole.PlaceholderText)
    button_text, button = (palette.color(QPalette.ColorRole.ButtonText),
                           palette.color(QPalette.ColorRole.Button))  # fmt: skip
    return [
        ("messages and controls", c.text, c.surface, False),
        ("sidebar and inspector", c.text, c.window, False),
        ("your messages", c.text, c.user_bubble, False),
        ("selected chat, active chip", c.text, c.chip, False),
        ("code and tool cards", c.text, c.code_background, False),
        ("hovered rows", c.text, c.hover, False),
        ("notes, figures, hints, chips", c.secondary, c.surface, False),
        ("section labels, tabs", c.secondary, c.window, False),
        ("reply tags", c.secondary, c.chip, False),
        ("tool results, code language", c.secondary, c.code_background, False),
        ("version switcher on hover", c.secondary, c.hover, False),
        ("errors", c.danger, c.surface, False),
        ("error notices", c.danger, c.window, False),
        ("tool errors", c.danger, c.code_background, False),
        ("warnings", c.warning, c.surface, False),
        ("warning notices", c.warning, c.window, False),
        ("valid replies", c.success, c.surface, False),
        ("selected menu items", c.accent_text, c.accent, False),
        ("links", link, c.surface, False),
        ("placeholders in text boxes", placeholder, c.surface, False),
        ("placeholders on panels", placeholder, c.window, False),
        ("buttons and their icons (Close ×)", button_text, button, False),
        ("the welcome's title", c.text, c.surface, True),
    ]
