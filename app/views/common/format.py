"""Figures in plain words: byte sizes, durations, time left, and the line under a reply with its
details for the tooltip. A number and its unit are joined by a no-break space, so a
narrow window never wraps between them."""

from __future__ import annotations

import re
from typing import Any

NBSP = "\u00a0"
_WORD_RE = re.compile(r"\w+")


def format_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1024 or unit == "GB":
            return f"{n:.0f}{NBSP}{unit}" if unit == "B" else f"{n:.1f}{NBSP}{unit}"
        n /= 1024
    return f"{n:.1f}{NBSP}TB"


def format_seconds(s: float) -> str:
    """ "80 ms", "0.4 s", "12 s"."""
    if s < 0.1:
        return f"{s * 1000:.0f}{NBSP}ms"
    if s < 10:
        return f"{s:.1f}{NBSP}s"
    return f"{s:.0f}{NBSP}s"


def format_duration(s: float) -> str:
    """A time still to go, rounded as a person says it: "40 s", "3 min", "1 h 5 min"."""
    if s < 60:
        return f"{max(1, round(s))}{NBSP}s"
    minutes = round(s / 60)
    if minutes < 60:
        return f"{minutes}{NBSP}min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}{NBSP}h {minutes}{NBSP}min" if minutes else f"{hours}{NBSP}h"


def _rate(value: float) -> str:
    return f"{value:.1f}" if value < 10 else f"{value:.0f}"


def count_words(text: str) -> int:
    return len(_WORD_RE.findall(text))


def reply_summary(stats: dict[str, Any], text: str) -> str:
    """ "0.4 s to first word · 14 words/s": how long the reply took to start, and its pace.
    No pace for a reply too short to have one (never "0.0 words/s")."""
    if not stats:
        return ""
    parts = []
    ttft = float(stats.get("ttft_s") or 0.0)
    if ttft > 0:
        parts.append(f"{format_seconds(ttft)} to first word")
    tokens = int(stats.get("generated_tokens") or 0)
    streaming = float(stats.get("total_s") or 0.0) - ttft
    words = count_words(text)
    if tokens > 1 and words > 1 and streaming > 0:
        parts.append(f"{_rate(words / streaming)}{NBSP}words/s")
    drafted = int(stats.get("drafted_tokens") or 0)
    if drafted:  # speculative decoding guessed ahead
        kept = int(stats.get("accepted_tokens") or 0)
        parts.append(f"{100 * kept / drafted:.0f}%{NBSP}of guesses kept")
    return " · ".join(parts)


def _count(n: int, unit: str) -> str:
    """ "1 token", "12 tokens": the number joined to its unit."""
    return f"{n}{NBSP}{unit}{'s' if n != 1 else ''}"


def reply_details(stats: dict[str, Any]) -> str:
    """The technical figures behind the summary, one per line (the summary's tooltip)."""
    if not stats:
        return ""
    lines = []
    tokens = int(stats.get("generated_tokens") or 0)
    total = float(stats.get("total_s") or 0.0)
    line = _count(tokens, "token")
    if total > 0:
        line += f" in {format_seconds(total)}"
    if tokens > 1 and stats.get("decode_tps"):
        line += f" ({_rate(float(stats['decode_tps']))}{NBSP}tokens/s while writing)"
    lines.append(line)
    thinking = int(stats.get("thinking_tokens") or 0)
    if thinking:  # a model that thinks first: its thinking and its answer apart
        line = f"Thinking: {_count(thinking, 'token')}"
        if float(stats.get("thinking_s") or 0) > 0:
            line += f" in {format_seconds(float(stats['thinking_s']))}"
        if stats.get("thinking_forced_end"):
            line += " (ended by the budget)"
        lines.append(line)
        lines.append(f"Answer: {_count(int(stats.get('answer_tokens') or 0), 'token')}")
    prompt, cached = int(stats.get("prompt_tokens") or 0), int(stats.get("cached_tokens") or 0)
    if prompt:
        lines.append(f"Prompt: {_count(prompt, 'token')}, {cached} reused from the cache")
    drafted = int(stats.get("drafted_tokens") or 0)
    if drafted:
        kept = int(stats.get("accepted_tokens") or 0)
        lines.append(
            f"Guessed ahead: {_count(drafted, 'token')}, {kept} kept "
            f"({100 * kept / drafted:.0f}%{NBSP}acceptance)"
        )
    if stats.get("constrained"):
        forced = int(stats.get("forced_tokens") or 0)
        lines.append(f"Forced by the grammar: {_count(forced, 'token')}")
        overhead = float(stats.get("mask_overhead_ms") or 0)
        lines.append(f"Grammar checks cost {overhead:.1f}{NBSP}ms")
    return "\n".join(lines)
