"""engine/extract/pages.py: a page range typed by a user (the CLI's --pages, the chat's
"Choose Pages…") is read one way, and a wrong one is refused saying what is wrong."""

from __future__ import annotations

import pytest

from engine.extract.pages import parse_pages


def test_a_page_or_a_range() -> None:
    assert parse_pages("3") == (3, 3)
    assert parse_pages(" 2-5 ") == (2, 5)


@pytest.mark.parametrize("text", ["", "a-b", "2-x", "0-3", "5-2", "-3"])
def test_a_wrong_range_is_refused_by_name(text: str) -> None:
    with pytest.raises(ValueError, match="FIRST-LAST") as refused:
        parse_pages(text)
    assert repr(text) in str(refused.value)
