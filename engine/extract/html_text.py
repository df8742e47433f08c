"""The main text of an HTML page, without its markup and boilerplate, with the standard
library's tolerant parser (no dependency, no recursion, no network).

Scripts, styles, navigation, headers, footers, asides and forms are dropped; where the page
marks its content (`<main>`, `<article>` or `role="main"`) only that is kept. Block elements
become line breaks, so paragraphs, list items and table rows stay apart.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

# Elements whose text is never the page's content.
SKIPPED = frozenset(
    {
        "script", "style", "noscript", "template", "svg", "math", "head", "nav", "header",
        "footer", "aside", "form", "button", "select", "iframe", "object", "canvas",
    }
)  # fmt: skip
MAIN = frozenset({"main", "article"})
BLOCKS = frozenset(
    {
        "p", "div", "section", "br", "li", "ul", "ol", "tr", "table", "h1", "h2", "h3", "h4",
        "h5", "h6", "blockquote", "pre", "dd", "dt", "dl", "hr", "figcaption", "address",
    }
)  # fmt: skip
VOID = frozenset(
    {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
     "track", "wbr"}
)  # fmt: skip


class _MainText(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.skipping = 0  # depth inside skipped elements
        self.main_depth = 0  # depth inside <main>/<article>
        self.all: list[str] = []
        self.main: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in VOID:
            if tag in BLOCKS:
                self._text("\n")
            return
        is_main = tag in MAIN or dict(attrs).get("role") == "main"
        self.stack.append(("main:" if is_main else "") + tag)
        if tag in SKIPPED:
            self.skipping += 1
        if is_main:
            self.main_depth += 1
        if tag in BLOCKS:
            self._text("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in VOID:
            return
        # Close up to the matching open tag (HTML leaves many end tags out).
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i].removeprefix("main:") == tag:
                for closed in reversed(self.stack[i:]):
                    name = closed.removeprefix("main:")
                    if name in SKIPPED:
                        self.skipping -= 1
                    if closed.startswith("main:"):
                        self.main_depth -= 1
                del self.stack[i:]
                break
        if tag in BLOCKS:
            self._text("\n")

    def handle_data(self, data: str) -> None:
        self._text(data)

    def _text(self, text: str) -> None:
        if self.skipping:
            return
        self.all.append(text)
        if self.main_depth:
            self.main.append(text)


def main_text(html: str) -> str:
    """The readable text of `html` (see the module docstring)."""
    parser = _MainText()
    parser.feed(html)
    parser.close()
    chosen = parser.main if "".join(parser.main).strip() else parser.all
    lines = (re.sub(r"[ \t\r\f\v\xa0]+", " ", line).strip() for line in "".join(chosen).split("\n"))
    text = "\n".join(lines)
    return re.sub(r"\n{3,}", "\n\n", text).strip()
