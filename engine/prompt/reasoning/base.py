"""What one thinking syntax is: its markers as text, how it is found in a chat template,
and how it becomes the ReasoningFormat of one tokenizer.

Each module of this package declares one `ThinkingSyntax`; `engine.prompt.reasoning`
holds them in the order they are tried.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.prompt.templates import template_variables
from engine.prompt.tokenizer import ModelTokenizer
from engine.types import ReasoningFormat
from engine.types.reasoning import ReasoningKind


@dataclass(frozen=True)
class ThinkingSyntax:
    """One family's way of thinking before it answers.

    `start`/`end` open and close the block (`start` empty where only the generation
    prompt opens it: Apriel); `opener`/`closer` are the whole opening and closing the
    model writes (default: the markers); `prefix` is what the answer may begin with and
    is not its text; `separator` the text between the block and the answer. `needs` are
    texts a template must contain to speak this syntax; `switches` the template variables
    that turn thinking on or off (the first the template reads is used); `effort` the
    variable naming how hard to think; `always_opens`: the generation prompt opens the
    block whatever it is told.
    """

    name: str
    start: str
    end: str
    needs: tuple[str, ...]
    kind: ReasoningKind = "think_tags"
    opener: str = ""
    closer: str = ""
    prefix: str = ""
    separator: str = ""
    switches: tuple[str, ...] = ("enable_thinking",)
    effort: str | None = None
    always_opens: bool = False

    def markers(self) -> list[str]:
        """The marker texts that are single special tokens in this family's tokenizer."""
        return [m for m in (self.start, self.end) if m]

    def found_in(self, template: str) -> bool:
        return all(need in template for need in self.needs)

    def build(self, tok: ModelTokenizer, template: str) -> ReasoningFormat:
        """This syntax for `tok`: a marker that is one token is that token, one of several
        tokens is steered as its tokens (`ReasoningFormat.end_is_text`)."""
        read = template_variables(template)
        switches = tuple(v for v in self.switches if v in read)[:1]
        start_id = single_token(tok, self.start) if self.start else None
        end_id = single_token(tok, self.end)
        opener = self.opener or (self.start if start_id is None else "")
        closer = self.closer or (self.end if end_id is None else "")
        words = ("/think", "/no_think") if "/no_think" in template else ()
        return ReasoningFormat(
            self.kind,
            self.start,
            self.end,
            start_id,
            end_id,
            switchable=bool(switches or words),
            opens_in_prompt=self.always_opens,
            syntax=self.name,
            open_ids=_ids(tok, opener),
            close_ids=_ids(tok, closer),
            prefix_ids=_ids(tok, self.prefix),
            separator=self.separator,
            switches=switches,
            effort_variable=self.effort if self.effort in read else None,
            end_text=closer if end_id is None else "",
            switch_words=words,
        )


def single_token(tok: ModelTokenizer, text: str) -> int | None:
    """The id of `text` when it is one token (an added token or a word of the vocabulary)."""
    found = tok.added_token_id(text)
    if found is not None:
        return found
    ids = tok.encode(text)
    return ids[0] if len(ids) == 1 else None


def _ids(tok: ModelTokenizer, text: str) -> tuple[int, ...]:
    return tuple(tok.encode(text)) if text else ()
