"""How a model thinks before it answers: its reasoning format (found from its chat template
and tokenizer by `engine.prompt.reasoning`) and the thinking budgets that `reasoning_effort`
names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# "think_tags": a block between two single tokens (`<think>…</think>`: Qwen3, DeepSeek-R1
# distills, Magistral). "channels": gpt-oss's analysis channel before its final one.
ReasoningKind = Literal["think_tags", "channels"]

# Thinking tokens each effort allows (OpenAI's and Anthropic's `effort` words).
EFFORT_BUDGETS: dict[str, int] = {"minimal": 64, "low": 256, "medium": 1024, "high": 4096}
# Anthropic's words above "high" think without a budget of Corral's own.
UNBOUNDED_EFFORTS = ("max", "xhigh")


@dataclass(frozen=True)
class ReasoningFormat:
    """Where a model writes its thinking.

    `start`/`end` are the tags' texts and `start_id`/`end_id` their token ids (None where a
    tag is more than one token: such a format is recognised and shown, not steered).
    `switchable`: the template reads `enable_thinking`, so thinking can be turned off.
    `opens_in_prompt`: the generation prompt itself opens the block (DeepSeek-R1's way),
    so the reply starts inside it.
    """

    kind: ReasoningKind
    start: str
    end: str
    start_id: int | None = None
    end_id: int | None = None
    switchable: bool = False
    opens_in_prompt: bool = False

    @property
    def steerable(self) -> bool:
        """Whether the engine can separate, budget and constrain this format's thinking."""
        return self.kind == "think_tags" and self.start_id is not None and self.end_id is not None

    def to_dict(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "start": self.start,
            "end": self.end,
            "switchable": self.switchable,
            "opens_in_prompt": self.opens_in_prompt,
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
