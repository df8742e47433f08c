"""Text is shown as written: a corpus of tricky snippets through the CommonMark renderer
(asterisks in arithmetic, underscores in identifiers, HTML-looking text that must be
escaped, never rendered, links and images that must not reach the disk or a script), the
widgets that show it (code blocks with their own scroll bar and copy button, tables, hard
line breaks), and users' messages shown exactly as typed."""

from __future__ import annotations

import re

import pytest
from PySide6.QtGui import QGuiApplication, QTextCharFormat

from app.views.chat.markdown_render import Block, render_blocks, render_html, split_chunks

# (snippet, what must appear in the HTML, what must not)
CORPUS = [
    ("What is 17*23?", "17*23", "<em>"),
    ("2*3*4 = 24 and 6*7*8", "2*3*4 = 24 and 6*7*8", "<em>"),
    ("x*y*z and a*b", "x*y*z and a*b", "<em>"),
    ("5 * 3 * 2 = 30", "5 * 3 * 2 = 30", "<em>"),
    ("Use my_var_name or snake_case_name", "my_var_name or snake_case_name", "<em>"),
    ("Define __init__ and __repr__", "__init__ and __repr__", "<strong>"),
    ('if __name__ == "__main__":', "__name__ == &quot;__main__&quot;", "<strong>"),
    ("_private and __dunder", "_private and __dunder", "<em>"),
    ("<b>not bold</b>", "&lt;b&gt;not bold&lt;/b&gt;", "<b>"),
    ("<script>alert(1)</script>", "&lt;script&gt;", "<script"),
    ('<img src="x" onerror="alert(1)">', "&lt;img", "<img"),
    ("a < b and c > d", "a &lt; b and c &gt; d", "<b"),
    ("AT&T &amp; co", "AT&amp;T &amp; co", "&amp;amp;"),
    ("<!-- hidden? -->", "&lt;!-- hidden? --&gt;", "<!--"),
    ("[click](javascript:alert(1))", "[click](javascript:alert(1))", 'href="javascript'),
    ("[local](file:///etc/passwd)", "[local](file:///etc/passwd)", 'href="file'),
    ("![cat](https://example.com/cat.png)", 'href="https://example.com/cat.png"', "<img"),
    ("`a*b*c` and `<b>`", "<code>a*b*c</code> and <code>&lt;b&gt;</code>", "<em>"),
    ("line one\nline two", "line one<br />\nline two", ""),
]


@pytest.mark.parametrize(("snippet", "shown", "absent"), CORPUS)
def test_tricky_snippets_render_as_written(snippet, shown, absent):
    html = render_html(snippet)
    assert shown in html
    if absent:
        assert absent not in html


def test_real_emphasis_still_works():
    html = render_html("**bold**, *italic*, _also italic_ and ~~gone~~")
    assert "<strong>bold</strong>" in html and "<em>italic</em>" in html
    assert "<em>also italic</em>" in html and "<s>gone</s>" in html


def test_top_level_code_blocks_are_separate_blocks():
    text = (
        "Here:\n```python\nprint('a')\n```\nthen\n\n    indented = 1\n\n"
        "| a | b |\n|---|---|\n| 1 | 2 |"
    )
    blocks = render_blocks(text)
    assert blocks[0] == Block("html", "<p>Here:</p>")
    assert blocks[1] == Block("code", "print('a')", "python")
    assert blocks[2].kind == "html" and "then" in blocks[2].text
    assert blocks[3] == Block("code", "indented = 1", "")
    assert (
        blocks[4].kind == "html" and "<table>" in blocks[4].text and "<th>a</th>" in blocks[4].text
    )


def test_a_streaming_fence_is_a_code_block_before_it_closes():
    blocks = render_blocks("Code:\n```js\nconst a = 1;\nconst b")
    assert blocks[-1] == Block("code", "const a = 1;\nconst b", "js", complete=False)
    closed = render_blocks("Code:\n```js\nconst a = 1;\n```")
    assert closed[-1] == Block("code", "const a = 1;", "js", complete=True)


def test_chunks_split_at_blank_lines_outside_fences():
    text = "para one\n\n```\ncode\n\nmore code\n```\n\n- item\n\n  continued"
    assert split_chunks(text) == [
        "para one",
        "```\ncode\n\nmore code\n```",
        "- item\n\n  continued",
    ]


# ---- the widgets ----


def _body(qtbot, text, width=500):
    from app.views.chat.markdown_view import MarkdownBody

    body = MarkdownBody()
    qtbot.addWidget(body)
    body.resize(width, 400)
    body.set_markdown(text)
    body.show()
    qtbot.waitExposed(body)
    return body


def test_prose_view_shows_html_looking_text_literally(qtbot):
    body = _body(qtbot, "Say <b>hi</b> & <i>bye</i>\nsecond line *17*23*")
    view = body.views[0]
    text = view.toPlainText()
    assert "Say <b>hi</b> & <i>bye</i>" in text and "17*23" in text
    assert "\u2028" in text or "\n" in text  # the single line break is kept
    cursor = view.document().find("hi")
    assert not cursor.charFormat().fontWeight() > QTextCharFormat().fontWeight()


def _monospaced(font) -> bool:
    """Whether `font`, as the machine resolves it, sets every character in the same width:
    what the reader sees. (Qt's `QFontInfo.fixedPitch()` says False for some monospaced
    faces, Noto Sans Mono among them, so it depends on the fonts installed.)"""
    from PySide6.QtGui import QFontMetricsF

    metrics = QFontMetricsF(font)
    return metrics.horizontalAdvance("iiii") == metrics.horizontalAdvance("MMMM")


def test_a_code_span_is_set_in_the_fixed_font(qtbot):
    from PySide6.QtGui import QFontDatabase

    body = _body(qtbot, "Use the built-in `add` function.")
    view = body.views[0]
    cursor = view.document().find("add")
    fixed = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont).family()
    assert fixed in cursor.charFormat().fontFamilies()
    assert _monospaced(cursor.charFormat().font())  # not the prose face
    assert not _monospaced(view.document().find("function").charFormat().font())


def test_code_block_scrolls_sideways_copies_and_is_highlighted(qtbot):
    long_line = "x = " + " + ".join(str(i) for i in range(200))
    body = _body(qtbot, f"Try:\n\n```python\ndef f():\n    {long_line}\n```\n", width=400)
    (block,) = body.code_views()
    assert block.label.text() == "python"
    assert block.width() <= body.width()  # never wider than the message...
    assert block.text.horizontalScrollBar().maximum() > 0  # ...the code scrolls inside it
    assert block.text.toPlainText() == f"def f():\n    {long_line}"
    html = block.text.toHtml()
    assert re.search(r"color:#[0-9a-fA-F]{6}", html)  # keywords are coloured
    block.copy_button.click()
    assert QGuiApplication.clipboard().text() == f"def f():\n    {long_line}"
    assert block.copy_button.icon_name() == "check" and block.copy_button.toolTip() == "Copied"


def test_streaming_reuses_the_views_of_unchanged_blocks(qtbot):
    body = _body(qtbot, "First paragraph.\n\n```py\nx = 1\n```\n\nLast")
    first, code = body.views[0], body.views[1]
    body.set_markdown("First paragraph.\n\n```py\nx = 1\n```\n\nLast words grow")
    assert body.views[0] is first and body.views[1] is code
    assert "Last words grow" in body.views[2].toPlainText()


def test_a_user_message_is_shown_exactly_as_typed(qtbot):
    from app.views.chat.markdown_view import PlainTextView

    typed = "**not bold**  <b>tag</b>\n  indented line\n\n# not a heading\n17*23"
    view = PlainTextView(typed)
    qtbot.addWidget(view)
    view.resize(300, 100)
    view.show()
    assert view.toPlainText() == typed
    long_word = "x" * 400
    wide = PlainTextView(long_word)
    qtbot.addWidget(wide)
    wide.resize(200, 50)
    wide.show()
    qtbot.waitExposed(wide)
    assert wide.document().size().width() <= 200 + 1  # a long word wraps, never overflows
    assert wide.height() > wide.fontMetrics().height() * 3


def test_a_streaming_code_block_is_coloured_once_it_closes(qtbot):
    from app.views.chat.markdown_view import MarkdownBody

    body = MarkdownBody()
    qtbot.addWidget(body)
    body.streaming = True
    body.set_markdown("Code:\n```python\ndef f():\n    return 1")
    (block,) = body.code_views()
    assert not block.highlighted and block.text.toPlainText() == "def f():\n    return 1"
    body.set_markdown("Code:\n```python\ndef f():\n    return 1\n```")
    assert block.highlighted and re.search(r"color:#[0-9a-fA-F]{6}", block.text.toHtml())
    body.set_markdown("More:\n```python\nx = 1")  # cut off by the length limit
    body.finish()  # the reply ended: its last block is coloured too
    assert all(view.highlighted for view in body.code_views())


@pytest.mark.parametrize("dark", [False, True])
def test_highlighted_code_has_no_extra_line(qtbot, dark):
    from PySide6.QtGui import QTextDocument

    from app.views.chat.markdown_view import highlight_html

    code = "def f(a, b):\n    return a + b\nprint(f(1, 2))  # 3"
    document = QTextDocument()
    document.setHtml(highlight_html(code, "python", dark))
    assert document.toPlainText() == code
