"""The one word for how a reply ended (engine.types.Ending), decided once, and the words each
reader-facing surface makes of it: the note under a chat reply (also for replies saved
before endings were), the CLI's exit status, the token view's marks for Corral's tokens."""

from __future__ import annotations

import pytest

from engine.types import (
    EXIT_STATUS,
    Ending,
    StopReason,
    TokenLogprob,
    decide_ending,
    ending_note,
    filled_names,
)


@pytest.mark.parametrize(
    ("stop", "closed", "incomplete", "ending"),
    [
        (StopReason.EOS, False, False, Ending.FINISHED),
        (StopReason.STOP_STRING, False, False, Ending.FINISHED),
        (StopReason.EOS, True, False, Ending.FILLED),  # a loop closed: no longer "stop"
        (StopReason.LENGTH, True, False, Ending.FILLED),
        (StopReason.LENGTH, False, True, Ending.CUT),
        (StopReason.LENGTH, False, False, Ending.CUT),  # free text at its limit
        (StopReason.STOP_STRING, False, True, Ending.CUT),  # a stop string inside the format
        (StopReason.CANCELLED, True, True, Ending.CANCELLED),
        (StopReason.ERROR, False, False, Ending.FAILED),
    ],
)
def test_the_ending_is_decided_from_the_stop_and_the_closing(
    stop: StopReason, closed: bool, incomplete: bool, ending: Ending
) -> None:
    assert decide_ending(stop, closed_to_fit=closed, incomplete=incomplete) == ending


def test_filled_values_are_named_as_a_reader_names_them() -> None:
    paths = ["/date", "/items/0/amount", "/a~1b", "", "/tool_calls/1/arguments/city"]
    assert filled_names(paths) == ["date", "items[0].amount", "a/b", "the whole reply", "city"]
    assert filled_names(["/tool_calls/0", "/tool_calls/0/arguments"]) == [
        "a whole tool call",
        "the call's arguments",
    ]


def test_the_note_says_what_corral_did_and_which_values_it_wrote() -> None:
    assert ending_note(Ending.FILLED, budget=512, filled=["/date", "/amount"]) == (
        "Corral finished this reply to fit: the model was cut off at 512 tokens; "
        "`date` and `amount` were filled in"
    )
    assert ending_note(Ending.FILLED, close_reason="repetition", filled=["/email"]) == (
        "Corral finished this reply: the model was repeating itself; `email` was filled in"
    )
    assert ending_note(Ending.FILLED, filled=["/a", "/b", "/c"]).endswith(
        "at its token limit; `a`, `b` and `c` were filled in"
    )
    assert ending_note(Ending.CUT, budget=64) == (
        "The reply was cut off at 64 tokens before it was complete"
    )
    assert ending_note(Ending.FINISHED) == ""


def test_the_cli_exit_status_of_each_ending() -> None:
    assert EXIT_STATUS[Ending.FINISHED] == 0 and EXIT_STATUS[Ending.FAILED] == 1
    assert EXIT_STATUS[Ending.FILLED] == EXIT_STATUS[Ending.CUT] == 3
    assert set(EXIT_STATUS) == set(Ending)


def _message(meta: dict, content: str = "{}") -> object:
    from app.store import Message

    return Message(1, 1, None, "assistant", content, meta, 0.0)


def test_the_reply_tag_of_a_filled_reply_and_of_one_saved_before_endings() -> None:
    from app.views.message_parts import message_ending, reply_note

    stats = {"closed_to_fit": True, "close_reason": "budget", "budget_tokens": 512}
    meta = {"stop_reason": "eos", "ending": "filled", "stats": stats,
            "filled_paths": ["/date", "/amount"], "constraint": "invoice"}  # fmt: skip
    note = reply_note(_message(meta))  # type: ignore[arg-type]
    assert note is not None and note.kind == "warning" and note.action == "retry"
    assert note.text == (
        "Corral finished this reply to fit: the model was cut off at 512 tokens; "
        "`date` and `amount` were filled in"
    )
    # saved before endings were: a loop closed read as a normal end; decided now as then
    old = {"stop_reason": "eos", "stats": {"closed_to_fit": True, "close_reason": "repetition"}}
    assert message_ending(old) == Ending.FILLED
    note = reply_note(_message(old))  # type: ignore[arg-type]
    assert note is not None and note.text == (
        "Corral finished this reply: the model was repeating itself"
    )
    assert message_ending({"stop_reason": "eos"}) == Ending.FINISHED
    assert message_ending({"stop_reason": "length"}) == Ending.CUT


def test_the_token_view_marks_the_tokens_corral_wrote() -> None:
    from app.views.token_view import summary, token_details, token_kind

    own = TokenLogprob(1, "a", -0.1, -0.1)
    forced = TokenLogprob(2, '"', 0.0, -3.0, forced=True)
    corrals = TokenLogprob(3, "}", 0.0, None, forced=True, closing=True)
    assert [token_kind(t) for t in (own, forced, corrals)] == ["", "forced", "corral's"]
    assert summary([own, forced, corrals]).endswith(
        "0 steered by the format, 1 forced, 1 written by Corral to close the reply"
    )
    assert "Written by Corral" in token_details(corrals)
    assert TokenLogprob.from_dict(corrals.to_dict()) == corrals  # kept when stored
