"""Magistral: `[THINK]…[/THINK]` then the answer."""

from engine.prompt.reasoning.base import ThinkingSyntax

MISTRAL = ThinkingSyntax("mistral_think", "[THINK]", "[/THINK]", needs=("[THINK]",))
