"""Markdown to display blocks, with no widgets: CommonMark (markdown-it-py) plus tables and
strikethrough, single line breaks kept, raw HTML escaped (shown as typed, never rendered).

A reply becomes a list of `Block`s: runs of prose as HTML for a QTextDocument, and each
top-level code block on its own, so the view can give code a horizontal scroll bar, syntax
colours and a copy button. Two departures from CommonMark, because chat text is full of
them: an asterisk inside a word or number (`17*23`, `a*b`) is a literal asterisk, not
emphasis, and a Python dunder (`__init__`) stays an identifier instead of turning bold.

Rendering is split at paragraph boundaries (`split_chunks`) and each chunk is cached, so a
streaming reply only re-parses its last, growing paragraph.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache, lru_cache
from html import escape
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:  # imported on first use: the window paints before any Markdown is shown
    from markdown_it import MarkdownIt
    from markdown_it.rules_inline import StateInline

_FENCE_RE = re.compile(r"^( {0,3})(`{3,}|~{3,})\s*([^`\s]*)")
_DUNDER_RE = re.compile(r"__[A-Za-z0-9]\w*?__(?![A-Za-z0-9])")


@dataclass(frozen=True)
class Block:
    """A piece of a rendered message: prose as HTML, or one code block's raw code."""

    kind: Literal["html", "code"]
    text: str
    language: str = ""
    # False for a fenced block whose closing fence has not arrived yet: it may still grow.
    complete: bool = True


def _literal_markers(state: StateInline, silent: bool) -> bool:
    """Emphasis markers that are really part of the text: `*` between two letters or
    digits, and a whole `__dunder__` name."""
    src, pos = state.src, state.pos
    marker = src[pos]
    end = pos
    if marker == "*":
        while end < state.posMax and src[end] == "*":
            end += 1
        before = src[pos - 1] if pos > 0 else " "
        after = src[end] if end < state.posMax else " "
        if not (before.isalnum() and after.isalnum()):
            return False
    elif marker == "_":
        if pos > 0 and src[pos - 1].isalnum():
            return False
        match = _DUNDER_RE.match(src, pos, state.posMax)
        if match is None:
            return False
        end = match.end()
    else:
        return False
    if not silent:
        token = state.push("text", "", 0)
        token.content = src[pos:end]
    state.pos = end
    return True


def _image_as_link(_renderer: Any, tokens: list[Any], idx: int, _options: Any, _env: Any) -> str:
    """Images are never fetched (a reply could point at any URL or local file): show the
    alt text as a link to the picture instead."""
    token = tokens[idx]
    src = token.attrGet("src") or ""
    alt = "".join(child.content for child in token.children or []) or src
    return f'<a href="{escape(str(src))}">{escape(alt)}</a>'


@cache
def parser() -> MarkdownIt:
    """The CommonMark parser with tables, strikethrough and the literal-marker rule."""
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"breaks": True, "html": False, "typographer": False})
    md.enable(["table", "strikethrough"])
    md.inline.ruler.before("emphasis", "literal_markers", _literal_markers)
    md.add_render_rule("image", _image_as_link)
    return md


def render_html(markdown: str) -> str:
    """The whole of `markdown` as HTML (code blocks included, as <pre>)."""
    return str(parser().render(markdown))


@lru_cache(maxsize=1024)
def render_chunk(markdown: str) -> tuple[Block, ...]:
    """One chunk (see `split_chunks`) as blocks: prose runs as HTML, top-level code apart."""
    md = parser()
    env: dict[str, Any] = {}
    tokens = md.parse(markdown, env)
    blocks: list[Block] = []
    prose: list[Any] = []

    def flush() -> None:
        if prose:
            html = md.renderer.render(prose, md.options, env).strip()
            if html:
                blocks.append(Block("html", html))
            prose.clear()

    lines = markdown.split("\n")
    for token in tokens:
        if token.level == 0 and token.type in ("fence", "code_block"):
            flush()
            if token.type == "fence":
                language = token.info.strip().split(" ")[0]
                last = lines[token.map[1] - 1].strip() if token.map else ""
                complete = (
                    token.map is not None
                    and token.map[1] - token.map[0] > 1
                    and (set(last) == {token.markup[0]} and len(last) >= len(token.markup))
                )
            else:  # indented code: rare in replies, coloured as it comes
                language, complete = "", True
            code = token.content.rstrip("\n")
            blocks.append(Block("code", code, language, complete))
        else:
            prose.append(token)
    flush()
    return tuple(blocks)


def render_blocks(markdown: str) -> list[Block]:
    """All of `markdown` as blocks, chunk by chunk (unchanged chunks come from the cache)."""
    return [block for chunk in split_chunks(markdown) for block in render_chunk(chunk)]


def split_chunks(text: str) -> list[str]:
    """Split Markdown at blank lines outside code fences, where rendering the parts apart
    looks the same as rendering them together (indented continuations stay attached)."""
    chunks: list[str] = []
    current: list[str] = []
    fence: tuple[str, int] | None = None
    blank = False
    for line in text.split("\n"):
        stripped = line.strip()
        if fence is None and blank and stripped and not line[:1].isspace() and current:
            chunks.append("\n".join(current).strip("\n"))
            current = []
        current.append(line)
        match = _FENCE_RE.match(line)
        if fence is None and match:
            fence = (match.group(2)[0], len(match.group(2)))
        elif (
            fence is not None
            and stripped
            and set(stripped) == {fence[0]}
            and len(stripped) >= fence[1]
        ):
            fence = None
        blank = fence is None and not stripped
    if current and "\n".join(current).strip():
        chunks.append("\n".join(current).strip("\n"))
    return chunks


def document_css(colors: Any, type_scale: Any) -> str:
    """The default style sheet for a prose QTextDocument (Qt's rich-text CSS subset)."""
    from app.views.common.theme import css

    c, t = colors, type_scale
    return f"""
p, ul, ol, table, blockquote, pre, h1, h2, h3, h4, h5, h6 {{ margin-top: 0px; margin-bottom: 8px; }}
li {{ margin-bottom: 2px; }}
h1 {{ font-size: {t.chat * 1.45:.1f}pt; font-weight: 600; }}
h2 {{ font-size: {t.chat * 1.28:.1f}pt; font-weight: 600; }}
h3 {{ font-size: {t.chat * 1.12:.1f}pt; font-weight: 600; }}
h4, h5, h6 {{ font-size: {t.chat:.1f}pt; font-weight: 600; }}
code {{ font-family: monospace; background-color: {css(c.code_background)}; }}
pre {{ font-family: monospace; background-color: {css(c.code_background)}; white-space: pre-wrap; }}
a {{ color: {css(c.accent)}; text-decoration: none; }}
blockquote {{ color: {css(c.secondary)}; margin-left: 12px; }}
table {{ border-collapse: collapse; }}
th {{ background-color: {css(c.code_background)}; font-weight: 600; }}
th, td {{ border: 1px solid {css(c.border)}; padding: 4px 8px; }}
hr {{ background-color: {css(c.border)}; }}
"""
