"""Apriel: the generation prompt ("Here are my reasoning steps:") opens the reasoning, which
ends at `[BEGIN FINAL RESPONSE]`."""

from engine.prompt.reasoning.base import ThinkingSyntax

APRIEL = ThinkingSyntax(
    "apriel",
    "",
    "[BEGIN FINAL RESPONSE]",
    needs=("[BEGIN FINAL RESPONSE]",),
    separator="\n",
    switches=(),
    always_opens=True,
)
