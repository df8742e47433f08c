"""Think freely, answer validly: a constraint's grammar behind one free thinking block.

`with_thinking` wraps a compiled grammar (a JSON schema, a Lark or GBNF grammar, a regex,
the tools' grammar) as `start: <think> text </think> "\\n\\n" @answer`, where the text is
anything but the end tag (a single token no text lexeme can produce; an end of several
tokens, Apriel's `[BEGIN FINAL RESPONSE]`, is those exact tokens, and the text never holds
its words) and `@answer` is the
user's grammar as a sub-grammar, unchanged: its forced tokens, the closing policy and
drafts work inside it as before. A reply whose prompt already opened the block starts at
the text. The wrapped grammar is built once per grammar and tag pair, so its compiled
matcher is shared like the grammar's own.

The thinking budget is not in the grammar: `engine.constraints.row` forces the end tag
when the reply has thought enough (its request's budget, or the tokens the answer still
needs before `max_tokens`), so one compiled grammar serves every budget.
"""

from __future__ import annotations

import json
import re
import threading
import weakref
from dataclasses import dataclass

from engine.constraints.compiled import CompiledGrammar

# Qwen3 and R1 write a blank line between the block and the answer; it is forced.
ANSWER_SEPARATOR = "\n\n"


def _without(text: str) -> str:
    """A Lark regex for any text that does not contain `text`."""
    escaped = re.escape(text).replace("\\\n", "\\n").replace("/", "\\/")
    return f"~/(?s:.*){escaped}(?s:.*)/"


def _tokens(ids: tuple[int, ...]) -> str:
    """A run of token ids as Lark (each one exactly that token)."""
    return " ".join(f"<[{i}]>" for i in ids)


@dataclass(frozen=True)
class ThinkingRow:
    """One constrained reply's thinking: the tags' token ids, whether the prompt opened
    the block, and at most how many thinking tokens (None: no budget of its own)."""

    start_id: int | None
    end_id: int | None
    opened: bool = False
    max_tokens: int | None = None
    # the whole opening and closing (default: the two tags), the answer's optional prefix
    # (gpt-oss's final channel) and the text between block and answer
    open_ids: tuple[int, ...] = ()
    close_ids: tuple[int, ...] = ()
    prefix_ids: tuple[int, ...] = ()
    separator: str = ANSWER_SEPARATOR
    # the closing's text where it is several tokens (`close_ids`; `end_id` is then None)
    end_text: str = ""

    @property
    def opening(self) -> tuple[int, ...]:
        if self.open_ids:
            return self.open_ids
        return () if self.start_id is None else (self.start_id,)

    @property
    def closing(self) -> tuple[int, ...]:
        if self.close_ids:
            return self.close_ids
        return () if self.end_id is None else (self.end_id,)

    @property
    def end(self) -> tuple[int, ...]:
        """The tokens whose writing ends the block: the end tag, or the whole closing
        where it is several tokens."""
        return self.closing if self.end_id is None else (self.end_id,)


_lock = threading.Lock()
_wrapped: weakref.WeakKeyDictionary[CompiledGrammar, dict[tuple[object, ...], CompiledGrammar]]
_wrapped = weakref.WeakKeyDictionary()


def with_thinking(answer: CompiledGrammar, thinking: ThinkingRow) -> CompiledGrammar:
    """`answer`'s grammar behind one thinking block (see the module doc), built once per
    grammar and tags."""
    key = (
        thinking.opening,
        thinking.closing,
        thinking.prefix_ids,
        thinking.separator,
        thinking.opened,
        thinking.end_text,
    )
    with _lock:
        found = _wrapped.setdefault(answer, {}).get(key)
        if found is None:
            found = CompiledGrammar(thinking_grammar(answer, thinking), answer.notes)
            _wrapped[answer][key] = found
        return found


def thinking_grammar(answer: CompiledGrammar, thinking: ThinkingRow) -> str:
    """llguidance's grammar (JSON) for `answer` behind a thinking block."""
    grammars = answer.grammars()
    name = grammars[0].get("name") or "answer"
    grammars[0] = {**grammars[0], "name": name}
    opener = "" if thinking.opened else _tokens(thinking.opening)
    closer = _tokens(thinking.closing)
    separator = f" {json.dumps(thinking.separator)}" if thinking.separator else ""
    prefix = f" ({_tokens(thinking.prefix_ids)})?" if thinking.prefix_ids else ""
    text = "/(?s:.*)/"
    if thinking.end_text:  # text, then the closing's exact tokens: the text never holds it
        text = f"THINK_TEXT\nTHINK_TEXT: /(?s:.*)/ & {_without(thinking.end_text)}"
    lark = (
        "%llguidance {}\n"
        f"start: {opener} think_text {closer}{separator}{prefix} @{name}\n"
        f"think_text: {text}\n"
    )
    return json.dumps({"grammars": [{"name": "thinking", "lark_grammar": lark}, *grammars]})
