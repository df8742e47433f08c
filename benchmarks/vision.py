"""Figures for vision models, on the tiny LLaVA (benchmarks/tiny_vision_model.py):

- `vision_constrained_ratio`: decode tok/s of a reply about an image under a JSON schema
  over the same reply unconstrained (the same image, both cached);
- `vision_followup_ttft_over_first`: time to first token of a follow-up question about the
  same image over the first question's (which encoded it; the follow-up reuses its prefix);
- `image_encode_ms`: checking, processing and encoding one image (vision tower, projector,
  merge into the prompt's embeddings), on the engine thread.

Per vision family, on its tiny model (benchmarks/tiny_vision_families.py; the families'
chat templates are read from ../shared/datasets/chat-templates, or CORRAL_DATASETS):

- `vision_<family>_constrained_ratio` and `vision_<family>_followup_ttft_over_first`, as
  above;
- `vision_<family>_identical`: Corral's greedy reply to a picture and a question equals
  mlx-vlm's own `generate` on the same folder, token for token;
- `vision_families_identical`: the families equal to the reference over the families built
  (`vision_families_built`).

Each ratio is the median of alternating rounds' ratios with its spread (`_spread`) and
whether that can tell (`_can_tell`, else `_cannot_tell` says why; `benchmarks/rounds.py`).
The tiny models reply in a fraction of a second, so a side of a constrained round is the
same reply repeated until it has decoded for `--min-side-s` (half that for the eight
families: at full length they would add minutes to the bench), and a follow-up round
asks about new pictures (a cached one would not be a first question) until the first
questions have taken a third of that. Five rounds.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.rounds import (
    MAX_RUNS_PER_SIDE,
    Timed,
    min_side_s,
    paired_rounds,
    rounds_for,
    run_for,
    told_figures,
)
from engine.engine import Engine
from engine.types import ChatRequest, ConstraintSpec, ImageInput, SamplingSettings

SCHEMA = {
    "type": "object",
    "properties": {
        "items": {"type": "array", "items": {"type": "string", "maxLength": 16}, "maxItems": 4},
        "total": {"type": "number"},
        "currency": {"enum": ["EUR", "USD", "GBP"]},
    },
    "required": ["items", "total", "currency"],
}


def _image(seed: int) -> bytes:
    import io
    import random

    from PIL import Image

    rng = random.Random(seed)
    img = Image.new("RGB", (320, 240))
    img.putdata([(rng.randrange(256), rng.randrange(256), rng.randrange(256))] * (320 * 240))
    buf = io.BytesIO()
    img.save(buf, "PNG")
    return buf.getvalue()


def _ask(eng: Engine, messages: list[Any], tokens: int, constraint: Any = None) -> Any:
    # thinking off, as mlx-vlm renders a template that switches it (Gemma 4's)
    settings = SamplingSettings(max_tokens=tokens, temperature=0, think=False)
    result = eng.submit(ChatRequest(messages, settings, constraint=constraint)).result()
    if result.error:
        raise RuntimeError(result.error)
    return result


def run_vision_bench(
    engine: Engine | None, args: argparse.Namespace | None = None
) -> dict[str, Any]:
    from benchmarks.tiny_vision_model import build_tiny_vision_model
    from engine.library.load import ensure_default_model

    lengths = Lengths(rounds_for(args, 5), min_side_s(args))
    # eight families more: each side of theirs half as long (the spread says if too short)
    family_lengths = Lengths(lengths.rounds, lengths.min_side_s / 2)
    with tempfile.TemporaryDirectory() as folder:
        # 256 image tokens and a vision tower a few times the language model's work per
        # image, as real vision models have (a 64-token toy would time only overheads)
        build_tiny_vision_model(
            folder, ensure_default_model(), image_size=224, vision_layers=4, vision_hidden=256
        )
        eng = Engine()
        try:
            eng.load_model(folder).result()
            figures = _figures(eng, lengths)
        finally:
            eng.close()
    return figures | _family_figures(family_lengths)


@dataclass(frozen=True)
class Lengths:
    """How long a model's figures run: rounds, and each side's least seconds a round."""

    rounds: int
    min_side_s: float = 0.0


def _templates() -> Path | None:
    root = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"
    folder = Path(os.environ.get("CORRAL_DATASETS") or root) / "chat-templates"
    return folder if folder.is_dir() else None


def _family_figures(lengths: Lengths) -> dict[str, Any]:
    """Each family's figures on its tiny model; none without the chat templates."""
    from benchmarks.tiny_vision_families import FAMILIES, build_family
    from engine.library.load import ensure_default_model

    templates = _templates()
    if templates is None:
        return {"vision_families_built": 0, "vision_families_identical": 0.0}
    out: dict[str, Any] = {}
    identical = 0
    for name in sorted(FAMILIES):
        with tempfile.TemporaryDirectory() as folder:
            build_family(name, folder, ensure_default_model(), templates)
            eng = Engine()
            try:
                eng.load_model(folder).result()
                figures = _figures(eng, lengths)
                same = _identical(eng, Path(folder))
            finally:
                eng.close()
        identical += same
        for figure in ("constrained_ratio", "followup_ttft_over_first"):
            for suffix in ("", "_spread", "_can_tell", "_cannot_tell"):
                out[f"vision_{name}_{figure}{suffix}"] = figures[f"vision_{figure}{suffix}"]
        out[f"vision_{name}_identical"] = same
    out["vision_families_built"] = len(FAMILIES)
    out["vision_families_identical"] = round(identical / len(FAMILIES), 3)
    return out


def _identical(eng: Engine, folder: Path, tokens: int = 16) -> bool:
    """Whether Corral's greedy reply equals mlx-vlm's on a picture and a question."""
    from benchmarks.vision_reference import Turn, corral_messages, reference

    turns = [Turn("user", "What is in this picture?", (_image(300),))]
    want = reference(folder, turns, tokens).reply_ids
    got = _ask(eng, corral_messages(turns), tokens)
    return list(got.token_ids[got.stats.prompt_tokens :]) == want


def _figures(eng: Engine, lengths: Lengths) -> dict[str, Any]:
    spec = ConstraintSpec("json_schema", json.dumps(SCHEMA), name="receipt")
    picture = ImageInput(_image(0), "receipt.png")
    ask = [{"role": "user", "content": "Extract the receipt.", "images": [picture]}]
    _ask(eng, ask, 4)  # warm-up: the image's prefix is cached for both

    def decode(constraint: Any) -> Timed:
        stats = _ask(eng, ask, 48, constraint).stats
        return Timed.from_rate(max(0, stats.generated_tokens - 1), stats.decode_tps)

    # constrained (A) over free (B); free first in even rounds, as before
    pairs = paired_rounds(
        lambda: decode(spec),
        lambda: decode(None),
        lengths.rounds,
        lengths.min_side_s,
        a_first=False,
    )
    follow = _followup_rounds(eng, lengths)
    encode_ms: list[float] = []
    for i in range(lengths.rounds):
        encode_ms.append(eng.run(functools.partial(_encode_ms, seed=200 + i)).result())
    free_tps = statistics.median(pairs.rates("b"))
    constrained_tps = statistics.median(pairs.rates("a"))
    first_s = statistics.median(t.seconds / t.runs for t in follow)
    follow_s = statistics.median(t.work / t.runs for t in follow)
    told = pairs.figures("vision_constrained_ratio")
    follow_ratios = [t.rate for t in follow]
    follow_told = told_figures("vision_followup_ttft_over_first", follow_ratios)
    return {
        # the medians' ratio, as always; the spread is over the rounds' own ratios
        "vision_constrained_ratio": round(constrained_tps / free_tps, 3) if free_tps else 0.0,
        **{k: v for k, v in told.items() if k != "vision_constrained_ratio"},
        "vision_free_tps": round(free_tps, 1),
        "vision_constrained_tps": round(constrained_tps, 1),
        **follow_told,
        "vision_first_ttft_ms": round(first_s * 1000, 2),
        "vision_followup_ttft_ms": round(follow_s * 1000, 2),
        "image_encode_ms": round(statistics.median(encode_ms), 2),
        "vision_runs": lengths.rounds,
        "vision_side_s": round(pairs.side_s or 0.0, 2),
    }


def _followup_rounds(eng: Engine, lengths: Lengths) -> list[Timed]:
    """Each round's follow-ups' TTFT (as `work`) over its first questions' (`seconds`):
    a new picture and a question about it, then a follow-up, until the first questions
    have taken a third of `lengths.min_side_s` (they run about as long as a reply)."""
    pictures = iter(range(100, 100 + MAX_RUNS_PER_SIDE * lengths.rounds))

    def pair() -> Timed:
        seed = next(pictures)
        image = ImageInput(_image(seed), f"photo{seed}.png")
        turn = [{"role": "user", "content": "What is in this photo?", "images": [image]}]
        first = _ask(eng, turn, 8)
        follow = turn + [
            {"role": "assistant", "content": first.text},
            {"role": "user", "content": "And what colour is it?"},
        ]
        return Timed(_ask(eng, follow, 8).stats.ttft_s, first.stats.ttft_s)

    return [run_for(pair, lengths.min_side_s / 3) for _ in range(lengths.rounds)]


def _encode_ms(loaded: Any, seed: int) -> float:
    """One image checked, processed and encoded into a prompt's embeddings (engine thread)."""
    from engine.prompt.images import check_image
    from engine.runtime.vision import VisionPrompt

    started = time.perf_counter()
    image = check_image(_image(seed), "bench.png")
    parts = loaded.model.parts
    prompt = VisionPrompt.build(loaded, [1, parts.family.marker_id, 2], [image])
    prompt.embeddings(0, len(prompt.tokens))
    return (time.perf_counter() - started) * 1000
