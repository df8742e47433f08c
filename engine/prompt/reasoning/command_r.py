"""Command R7B: `<|START_THINKING|>` plan `<|END_THINKING|>`, then `<|START_RESPONSE|>` (or
an action)."""

from engine.prompt.reasoning.base import ThinkingSyntax

COMMAND_R = ThinkingSyntax(
    "command_r",
    "<|START_THINKING|>",
    "<|END_THINKING|>",
    needs=("<|START_THINKING|>",),
    prefix="<|START_RESPONSE|>",
)
