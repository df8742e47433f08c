"""Short human-readable figures: byte sizes, durations and a reply's statistics line."""

from __future__ import annotations

from typing import Any


def format_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TB"


def format_seconds(s: float) -> str:
    return f"{s * 1000:.0f} ms" if s < 1 else f"{s:.2f} s"


def format_stats(stats: dict[str, Any]) -> str:
    """The line under a reply: TTFT, tokens/s, cached prompt tokens, forced tokens, mask cost."""
    if not stats:
        return ""
    parts = []
    if stats.get("ttft_s"):
        parts.append(f"TTFT {format_seconds(stats['ttft_s'])}")
    parts.append(f"{stats.get('decode_tps', 0.0):.1f} tok/s")
    parts.append(f"{stats.get('generated_tokens', 0)} tokens")
    prompt = stats.get("prompt_tokens", 0)
    parts.append(f"{stats.get('cached_tokens', 0)}/{prompt} prompt tokens cached")
    parts.append(f"{stats.get('forced_tokens', 0)} forced")
    parts.append(f"mask overhead {stats.get('mask_overhead_ms', 0.0):.1f} ms")
    return " · ".join(parts)
