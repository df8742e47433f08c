"""Seed-OSS: `<seed:think>…</seed:think>`."""

from engine.prompt.reasoning.base import ThinkingSyntax

SEED = ThinkingSyntax("seed", "<seed:think>", "</seed:think>", needs=("<seed:think>",))
