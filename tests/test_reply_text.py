"""The reply's text as it streams (engine/runtime/reply_text.py): stop strings end it and
never show; hidden markup (a tool-result tag a model copies from its prompt) never shows,
not even in part while it is being written, and the text goes on after it."""

from __future__ import annotations

from engine.runtime.reply_text import ReplyText


def _stream(tokenizer, text: str, stop: list[str], hidden: list[str]) -> tuple[list[str], str]:
    reply = ReplyText(tokenizer, stop, hidden)
    pieces = []
    for token in tokenizer.encode(text, add_special_tokens=False):
        pieces.append(reply.add(token))
        if reply.stopped:
            break
    pieces.append(reply.finish())
    return [p for p in pieces if p], reply.text


def test_hidden_markup_never_shows_and_the_reply_goes_on(tiny_model) -> None:
    _model, tokenizer = tiny_model
    written = "<tool_response>\n391\n</tool_response>\nThe answer is 391."
    hidden = ["<tool_response>", "</tool_response>"]
    pieces, text = _stream(tokenizer, written, [], hidden)
    assert text == "\n391\n\nThe answer is 391." and "".join(pieces) == text
    shown = ""
    for piece in pieces:  # never a part of a tag on screen, even for a moment
        shown += piece
        assert "<" not in shown


def test_a_stop_string_still_ends_the_reply_beside_hidden_markup(tiny_model) -> None:
    _model, tokenizer = tiny_model
    pieces, text = _stream(tokenizer, "a </tool_response>b STOP c", ["STOP"], ["</tool_response>"])
    assert text == "a b " and "".join(pieces) == text
