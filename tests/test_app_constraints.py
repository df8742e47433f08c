"""Constraints in the window: drop a grammar file and the next reply fits it, a broken file
shows its error and applies nothing, the chip removes it, the editor checks pasted text."""

from __future__ import annotations

import json

import jsonschema
from app_helpers import (
    TINY_TEMPERATURE,
    close_window,
    drop_files,
    make_window,
    screenshot,
    set_sampling,
    wait_idle,
)
from PySide6.QtCore import Qt

YES_NO = 'start: answer "."\nanswer: "yes" | "no"\n'
SCHEMA = {
    "type": "object",
    "properties": {"answer": {"enum": ["yes", "no"]}, "sure": {"type": "boolean"}},
    "required": ["answer", "sure"],
    "additionalProperties": False,
}


def _ask(qtbot, window, text: str):
    window.send(text)
    wait_idle(qtbot, window)
    return window.chat.message_widgets()[-1]


def test_dropped_lark_file_constrains_the_next_reply(qtbot, tmp_path, tiny_engine):
    window = make_window(qtbot, tmp_path, tiny_engine)
    set_sampling(window, temperature=TINY_TEMPERATURE, max_tokens=20)
    grammar = tmp_path / "yes_no.lark"
    grammar.write_text(YES_NO)
    assert drop_files(window.composer.edit.viewport(), [grammar])
    chip = window.constraint_bar.chip
    qtbot.waitUntil(chip.isVisible, timeout=10_000)
    assert chip.label.text() == "Reply as: yes_no.lark (Lark grammar)"
    assert window.controller.conversation.constraint["kind"] == "lark"
    reply = _ask(qtbot, window, "Is the sky blue?")
    assert reply.message.content in ("yes.", "no.")
    assert reply.tag.isVisible()
    assert reply.tag.text() == "Reply as: yes_no.lark (Lark grammar)"
    screenshot(window, "constraint_applied")
    close_window(window)


def test_dropped_schema_on_the_window_gives_valid_json(qtbot, tmp_path, tiny_engine):
    window = make_window(qtbot, tmp_path, tiny_engine)
    set_sampling(window, temperature=TINY_TEMPERATURE, max_tokens=40)
    path = tmp_path / "answer.json"
    path.write_text(json.dumps(SCHEMA, indent=2))
    assert drop_files(window, [path])
    qtbot.waitUntil(window.constraint_bar.chip.isVisible, timeout=10_000)
    assert "JSON schema" in window.constraint_bar.chip.label.text()
    reply = _ask(qtbot, window, "Answer in JSON")
    jsonschema.validate(json.loads(reply.message.content), SCHEMA)
    stats = reply.message.meta["stats"]
    assert stats["constrained"] and stats["forced_tokens"] > 0
    forced = stats["forced_tokens"]
    assert f"Forced by the grammar: {forced}\u00a0token" in reply.stats.toolTip()
    # Checked once when dropped (for the loaded model's tokenizer), compiled once: every
    # reply under it copies that matcher instead of parsing or compiling the file again.
    _ask(qtbot, window, "Again")
    spec = window.controller.chip_state().constraint
    assert spec is not None and spec.compiled is not None and spec.compiled.compiles == 1
    close_window(window)


def test_broken_file_shows_its_error_and_applies_nothing(qtbot, tmp_path, tiny_engine):
    window = make_window(qtbot, tmp_path, tiny_engine)
    bad = tmp_path / "broken.lark"
    bad.write_text('start: "a" | b\nb: c\n')
    assert drop_files(window.composer.edit.viewport(), [bad])
    error = window.constraint_bar.error
    qtbot.waitUntil(lambda: "nothing was applied" in error.text(), timeout=10_000)
    assert "broken.lark" in error.text() and "line 2" in error.text()
    assert 'unknown name: "c"' in error.text()
    assert not window.constraint_bar.chip.isVisible()
    assert window.controller.conversation.constraint is None
    screenshot(window, "constraint_error")
    binary = tmp_path / "data.json"
    binary.write_bytes(b"\x00\x01\x02")
    drop_files(window, [binary])
    qtbot.waitUntil(lambda: "not a text file" in error.text(), timeout=10_000)
    close_window(window)


def test_removing_the_chip_frees_the_next_reply(qtbot, tmp_path, tiny_engine):
    window = make_window(qtbot, tmp_path, tiny_engine)
    set_sampling(window, temperature=TINY_TEMPERATURE, max_tokens=10)
    regex = tmp_path / "digits.regex"
    regex.write_text("[0-9]{3}\n")
    drop_files(window.composer.edit.viewport(), [regex])
    bar = window.constraint_bar
    qtbot.waitUntil(bar.chip.isVisible, timeout=10_000)
    assert not bar.button.isVisible()  # the chip stands in for the Format button...
    menu = bar.button.menu()
    qtbot.mouseClick(bar.chip.label, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(menu.isVisible, timeout=5_000)  # ...and opens its menu when clicked
    assert "Use a schema or grammar file…" in [a.text() for a in menu.actions()]
    menu.close()
    assert _ask(qtbot, window, "Three digits").message.content.isdigit()
    bar.chip.close_button.click()
    assert not bar.chip.isVisible() and bar.button.isVisible()
    assert window.controller.conversation.constraint is None
    reply = _ask(qtbot, window, "Anything")
    assert reply.message.meta["constraint"] is None and not reply.tag.isVisible()
    close_window(window)


def test_editor_checks_pasted_text_before_applying(qtbot, tmp_path, tiny_engine):
    window = make_window(qtbot, tmp_path, tiny_engine)
    window.files.open_constraint_editor()
    editor = window.files.constraint_editor
    editor.kind.setCurrentIndex(editor.kind.findData("json_schema"))
    editor.text.setPlainText('{"type": "object",\n  "properties": {"a": }}')
    qtbot.waitUntil(lambda: editor.problems.count() > 0, timeout=10_000)
    assert "line 2" in editor.problems.item(0).text()
    assert not editor.apply_button.isEnabled()
    screenshot(editor, "constraint_editor_error")
    editor.text.setPlainText(json.dumps(SCHEMA))
    qtbot.waitUntil(editor.apply_button.isEnabled, timeout=10_000)
    editor.apply_button.click()
    assert window.constraint_bar.chip.isVisible()
    assert window.controller.conversation.constraint["source"] == json.dumps(SCHEMA)
    close_window(window)


def test_a_tight_lenient_schema_shows_on_the_chip_and_a_closed_reply_says_so(
    qtbot, tmp_path, tiny_engine
):
    """An open schema with an unknown format: the chip says the keys are limited to the
    declared ones and marks what is not enforced; the tiny model's rambling reply is closed
    to fit the limit, valid, with a note under it."""
    window = make_window(qtbot, tmp_path, tiny_engine)
    set_sampling(window, temperature=0.0, max_tokens=30)
    schema = {
        "type": "object",
        "properties": {"topic": {"type": "string", "format": "topic"}, "n": {"type": "integer"}},
        "required": ["topic", "n"],
    }
    path = tmp_path / "open.json"
    path.write_text(json.dumps(schema))
    assert drop_files(window, [path])
    chip = window.constraint_bar.chip
    qtbot.waitUntil(lambda: chip.isVisible() and "tight" in chip.label.text(), timeout=10_000)
    assert chip.label.text().startswith("⚠ Reply as: open.json")
    assert "tight: declared keys only" in chip.label.text()
    assert "Unknown format: topic" in chip.toolTip()
    reply = _ask(qtbot, window, "Answer in JSON")
    jsonschema.validate(json.loads(reply.message.content), schema)
    assert reply.message.meta["stats"]["closed_to_fit"]
    # the tag says in words that Corral finished it, and which values it wrote (stored too)
    meta = reply.message.meta
    assert meta["ending"] == "filled" and meta["filled_paths"]
    text = reply.status.text()
    assert text.startswith("Corral finished this reply"), text
    named = {f"`{p.lstrip('/')}`" for p in meta["filled_paths"]}
    assert all(name in text for name in named) and "filled in" in text
    if meta["stats"]["close_reason"] == "budget":
        assert "the model was cut off at 30 tokens" in text
    assert reply.note_action.isVisibleTo(window) and reply.note_action.text() == "Retry"
    close_window(window)


def test_a_reply_invalid_as_written_says_so_under_it(qtbot, tmp_path, tiny_engine):
    """llguidance ignores `not`: the reply fits what Corral enforced, and the note under it
    says it does not fit the schema as written, naming the keyword (and nothing says
    "valid" for a reply that is not)."""
    window = make_window(qtbot, tmp_path, tiny_engine)
    set_sampling(window, temperature=0.0, max_tokens=30)
    schema = {
        "type": "object",
        "properties": {"a": {"type": "string", "maxLength": 4, "not": {"pattern": "^"}}},
        "required": ["a"],
        "additionalProperties": False,
    }
    path = tmp_path / "never.json"
    path.write_text(json.dumps(schema))
    assert drop_files(window, [path])
    qtbot.waitUntil(window.constraint_bar.chip.isVisible, timeout=10_000)
    reply = _ask(qtbot, window, "Answer in JSON")
    assert len(json.loads(reply.message.content)["a"]) <= 4
    assert reply.message.meta["as_written"]["valid"] is False
    assert reply.status.isVisible()
    assert reply.status.text().startswith("Not valid against your schema as written (not at /a)")
    close_window(window)
