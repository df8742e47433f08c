"""Page windows: a document longer than the model's context is read a window of pages at a
time, each window one row under the schema, named by its pages.

Pages are grouped in order while their tokens fit the window's budget; a page that alone is
over the budget is its own window, its text cut to fit (and said so). A page kept as a
picture (a scan, for a vision model) is a window of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from engine.extract.pages import Page

TokenCount = Callable[[str], int]


@dataclass(frozen=True)
class Window:
    """Consecutive pages read as one row."""

    pages: tuple[Page, ...]
    cut: bool = False  # a page's text was shortened to fit

    @property
    def first(self) -> int:
        return self.pages[0].number

    @property
    def last(self) -> int:
        return self.pages[-1].number


def page_windows(pages: Sequence[Page], budget: int, count: TokenCount) -> list[Window]:
    """Pages grouped into windows of at most `budget` tokens each (see the docstring)."""
    windows: list[Window] = []
    group: list[Page] = []
    used = 0
    for page in pages:
        if page.image is not None:
            if group:
                windows.append(Window(tuple(group)))
                group, used = [], 0
            windows.append(Window((page,)))
            continue
        tokens = count(page.text) + 8  # the page marker
        if group and used + tokens > budget:
            windows.append(Window(tuple(group)))
            group, used = [], 0
        if tokens > budget:
            windows.append(Window((_cut(page, budget, count),), cut=True))
            continue
        group.append(page)
        used += tokens
    if group:
        windows.append(Window(tuple(group)))
    return windows


def _cut(page: Page, budget: int, count: TokenCount) -> Page:
    """`page` with its text shortened to at most `budget` tokens."""
    text = page.text
    while text and count(text) + 8 > budget:
        text = text[: int(len(text) * 0.8)]
    return Page(page.number, text)
