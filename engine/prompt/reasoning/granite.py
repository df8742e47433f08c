"""Granite 3.3: with `thinking`, `<think>…</think>` then `<response>…</response>`."""

from engine.prompt.reasoning.base import ThinkingSyntax

GRANITE = ThinkingSyntax(
    "granite",
    "<think>",
    "</think>",
    needs=("<response>", "<think>", "<|start_of_role|>"),
    prefix="<response>",
    switches=("thinking",),
)
