"""Figures in plain words under a reply: "0.4 s to first word · 14 words/s", no pace for a
reply too short to have one (never "0.0 words/s"), a number never wrapped apart from its
unit, and the technical details on hover."""

from __future__ import annotations

import re

import pytest

from app.store import Message
from app.views.common.format import NBSP, format_bytes, format_seconds, reply_details, reply_summary

# A number followed by an ordinary (breakable) space and then its unit.
SPLIT_UNIT = re.compile(r"\d (?:tokens?|ms|s|words/s|tokens/s|B|KB|MB|GB)\b")

ONE_TOKEN = {"ttft_s": 0.31, "total_s": 0.31, "generated_tokens": 1, "decode_tps": 0.0}
LONGER = {
    "ttft_s": 0.42,
    "total_s": 3.42,
    "generated_tokens": 60,
    "decode_tps": 20.0,
    "prompt_tokens": 120,
    "cached_tokens": 100,
    "constrained": True,
    "forced_tokens": 7,
    "mask_overhead_ms": 12.34,
}


def test_a_one_token_reply_has_no_pace():
    summary = reply_summary(ONE_TOKEN, "Yes")
    assert summary == f"0.3{NBSP}s to first word"
    assert "/s" not in summary and "0.0" not in summary
    assert "tokens/s" not in reply_details(ONE_TOKEN)
    assert reply_details(ONE_TOKEN).startswith(f"1{NBSP}token in")  # one token, not "1 tokens"
    # a reply of several tokens but one word has no words-per-second either
    assert "words/s" not in reply_summary({**LONGER, "generated_tokens": 3}, "Paris")


def test_summary_and_details_in_plain_words():
    summary = reply_summary(LONGER, " ".join(["word"] * 45))
    assert summary == f"0.4{NBSP}s to first word · 15{NBSP}words/s"
    details = reply_details(LONGER).splitlines()
    assert details == [
        f"60{NBSP}tokens in 3.4{NBSP}s (20{NBSP}tokens/s while writing)",
        f"Prompt: 120{NBSP}tokens, 100 reused from the cache",
        f"Forced by the grammar: 7{NBSP}tokens",
        f"Grammar checks cost 12.3{NBSP}ms",
    ]
    assert reply_summary({}, "text") == "" and reply_details({}) == ""


def test_speculative_figures_show_under_the_reply():
    stats = {**LONGER, "speculative": True, "drafted_tokens": 40, "accepted_tokens": 25}
    summary = reply_summary(stats, " ".join(["word"] * 45))
    assert summary.endswith(f" · 62%{NBSP}of guesses kept")
    assert f"Guessed ahead: 40{NBSP}tokens, 25 kept (62%{NBSP}acceptance)" in reply_details(stats)


@pytest.mark.parametrize(("seconds", "shown"), [(0.08, "80 ms"), (0.4, "0.4 s"), (12.4, "12 s")])
def test_durations(seconds, shown):
    assert format_seconds(seconds) == shown.replace(" ", NBSP)


def test_no_number_is_split_from_its_unit():
    texts = [
        reply_summary(LONGER, "many words here"),
        reply_details(LONGER),
        reply_details(ONE_TOKEN),
        format_bytes(24_700_000),
        format_bytes(512),
        format_seconds(0.05),
    ]
    for text in texts:
        assert not SPLIT_UNIT.search(text), text


def test_the_line_under_a_reply_stays_on_one_line(qtbot):
    from app.views.chat.message_widget import MessageWidget

    message = Message(1, 1, None, "assistant", "Yes", {"stats": ONE_TOKEN}, 0.0)
    widget = MessageWidget(message, last_reply=True)
    qtbot.addWidget(widget)
    widget.resize(300, 200)
    widget.show()
    assert widget.stats.text() == f"0.3{NBSP}s to first word"
    assert not widget.stats.wordWrap()  # a narrow window never wraps the figures
    assert "1\u00a0token" in widget.stats.toolTip()


def test_the_loading_strip_says_what_is_happening(qtbot):
    """Above the composer while a model loads: what is happening (importing only on first
    use), how far along, and that typing is fine meanwhile; never "…." when there is no
    percentage yet."""
    from app.views.main.notice_bar import LoadingStrip

    strip = LoadingStrip()
    qtbot.addWidget(strip)
    later = " You can type already: your message is sent when it is ready."
    strip.start("SmolLM2-135M-Instruct")
    assert strip.label.text() == "Loading SmolLM2-135M-Instruct…" + later
    strip.progress("Reading GGUF", 0.4)  # the stages engine/library/gguf_import.py reports
    text = "Importing SmolLM2-135M-Instruct — only on its first use… 40%."
    assert strip.label.text() == text + later
    strip.progress("Dequantizing for the CPU backend", 0.95)
    assert strip.label.text().startswith("Preparing SmolLM2-135M-Instruct for this computer… 95%.")
    assert "…." not in strip.label.text()


def test_the_strip_knows_every_stage_the_import_reports():
    """The strip tells an import from a load by the stage names engine/library/gguf_import.py
    reports: a renamed stage would quietly turn "Importing…" back into "Loading…"."""
    import ast
    from pathlib import Path

    from app.views.main.notice_bar import _IMPORT_STAGES

    source = Path(__file__).resolve().parents[1] / "engine" / "library" / "gguf_import.py"
    stages = {
        node.args[0].value
        for node in ast.walk(ast.parse(source.read_text()))
        if isinstance(node, ast.Call)
        and getattr(node.func, "id", "") == "report"
        and node.args
        and isinstance(node.args[0], ast.Constant)
    }
    assert stages and stages <= set(_IMPORT_STAGES), stages - set(_IMPORT_STAGES)
