"""How a model thinks before it answers: its reasoning format (found from its chat template
and tokenizer by `engine.prompt.reasoning`) and the thinking budgets that `reasoning_effort`
names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# "think_tags": a block between two markers (`<think>…</think>`, `[THINK]`, `<seed:think>`,
# `<|START_THINKING|>`, ...). "channels": a thought channel before the answer's (gpt-oss's
# analysis channel, Gemma 4's thought channel).
ReasoningKind = Literal["think_tags", "channels"]

# Thinking tokens each effort allows (OpenAI's and Anthropic's `effort` words).
EFFORT_BUDGETS: dict[str, int] = {"minimal": 64, "low": 256, "medium": 1024, "high": 4096}
# Anthropic's words above "high" think without a budget of Corral's own.
UNBOUNDED_EFFORTS = ("max", "xhigh")


@dataclass(frozen=True)
class ReasoningFormat:
    """Where a model writes its thinking.

    `start`/`end` are the markers' texts and `start_id`/`end_id` the tokens that open and
    close the block when a marker is one token. A marker of several tokens (Apriel's
    `[BEGIN FINAL RESPONSE]`) is steered as its tokens: `open_ids`/`close_ids` hold them
    and `start_id`/`end_id` are None (`end_is_text`: the block ends where its text does).
    `open_ids` is the whole opening the model writes (its first token is `start_id`, e.g.
    `<|channel|>analysis<|message|>`), `close_ids` the whole closing up to the answer (its
    first token is `end_id`, e.g. `<|end|><|start|>assistant`);
    `prefix_ids` is what the answer may begin with and is not its text (gpt-oss's
    `<|channel|>final<|message|>`, Command R7B's `<|START_RESPONSE|>`). `separator` is the
    text written between the closing and the answer (Qwen3's blank line).
    `switchable`: the template can be told not to think. `opens_in_prompt`: the
    generation prompt itself opens the block (DeepSeek-R1's, Apriel's, Kimi K3's way),
    so the reply starts inside it. `syntax` names the dialect (`engine.prompt.reasoning`).
    """

    kind: ReasoningKind
    start: str
    end: str
    start_id: int | None = None
    end_id: int | None = None
    switchable: bool = False
    opens_in_prompt: bool = False
    syntax: str = ""
    open_ids: tuple[int, ...] = ()
    close_ids: tuple[int, ...] = ()
    prefix_ids: tuple[int, ...] = ()
    separator: str = "\n\n"
    # the template's variables that switch thinking on or off, and the one naming its effort
    switches: tuple[str, ...] = ()
    effort_variable: str | None = None
    # the closing's text, where it is several tokens (the block ends where it appears)
    end_text: str = ""
    # words in the system message that switch thinking on and off, where the template reads
    # them instead of a variable (Nemotron's `/think` and `/no_think`)
    switch_words: tuple[str, ...] = ()

    @property
    def end_is_text(self) -> bool:
        """The block ends at a marker of several tokens: where its text appears."""
        return self.end_id is None and bool(self.close_ids) and bool(self.end_text)

    @property
    def steerable(self) -> bool:
        """Whether the engine can separate, budget and constrain this format's thinking:
        its block ends at a marker it can write (a token, or several) and opens at one (or
        in the prompt)."""
        if not self.closing:
            return False
        return bool(self.opening) or self.opens_in_prompt

    @property
    def opening(self) -> tuple[int, ...]:
        """The tokens that open the block (just `start_id` unless `open_ids` says more)."""
        if self.open_ids:
            return self.open_ids
        return () if self.start_id is None else (self.start_id,)

    @property
    def closing(self) -> tuple[int, ...]:
        """The tokens that close the block (just `end_id` unless `close_ids` says more)."""
        if self.close_ids:
            return self.close_ids
        return () if self.end_id is None else (self.end_id,)

    def to_dict(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "syntax": self.syntax or self.kind,
            "start": self.start,
            "end": self.end,
            "switchable": self.switchable,
            "opens_in_prompt": self.opens_in_prompt,
            "steerable": self.steerable,
        }


def effort_budget(effort: str) -> int | None:
    """The thinking budget `effort` names (None: no budget of its own). Raises ValueError
    for a word that is not an effort."""
    if effort in EFFORT_BUDGETS:
        return EFFORT_BUDGETS[effort]
    if effort in UNBOUNDED_EFFORTS:
        return None
    names = ", ".join([*EFFORT_BUDGETS, *UNBOUNDED_EFFORTS])
    raise ValueError(f"reasoning effort must be one of {names}, got {effort!r}")
