"""Which part of a long conversation the model reads (its context window).

When a prompt is longer than the model's context, the app offers to leave out the oldest
turns: the messages stay in the chat and in the store, only the request starts later. The
estimate counts each message's share of the prompt by its length in characters; if the
shorter prompt still does not fit, the offer comes again and leaves out more.
"""

from __future__ import annotations

from collections.abc import Sequence

from app.store import Message
from app.store.documents import message_documents


def _size(message: Message) -> int:
    documents = sum(len(d.text) for d in message_documents(message.meta))
    return len(message.content) + documents + 16  # and the template's few tokens round it


def start_after_dropping(
    path: Sequence[Message],
    start: int,
    prompt_tokens: int,
    context_length: int,
    reply_tokens: int,
) -> int | None:
    """The index in `path` the model should read from so that a prompt of
    `prompt_tokens` (read from `start`) fits in `context_length` with room for a reply:
    always the start of a user turn, at least one turn later than `start`. None when only
    the last turn is left."""
    turns = [i for i in range(start + 1, len(path)) if path[i].role == "user"]
    if not turns:
        return None
    room = context_length - min(reply_tokens, context_length // 4)
    excess = max(1, prompt_tokens - room)
    kept = sum(_size(m) for m in path[start:])
    tokens_per_char = prompt_tokens / max(1, kept)
    for index in turns:
        dropped = sum(_size(m) for m in path[start:index])
        if dropped * tokens_per_char >= excess:
            return index
    return turns[-1]
