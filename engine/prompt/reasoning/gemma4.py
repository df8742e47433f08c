"""Gemma 4: the thought channel `<|channel>thought\\n…<channel|>` before the answer,
switched on by `enable_thinking` (off, the generation prompt holds the empty channel)."""

from engine.prompt.reasoning.base import ThinkingSyntax

GEMMA4 = ThinkingSyntax(
    "gemma4_channel",
    "<|channel>",
    "<channel|>",
    needs=("<|channel>", "<channel|>"),
    kind="channels",
    opener="<|channel>thought\n",
)
