"""Apertus: `<|inner_prefix|>…<|inner_suffix|>`, "Deliberation" switched by `enable_thinking`."""

from engine.prompt.reasoning.base import ThinkingSyntax

APERTUS = ThinkingSyntax(
    "apertus", "<|inner_prefix|>", "<|inner_suffix|>", needs=("<|inner_prefix|>",)
)
