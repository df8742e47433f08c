"""What a constrained token costs beside its forward pass, part by part, on a model's
vocabulary (`python -m benchmarks.token_parts`).

Each part runs alone, many times, the parts taking turns (so a change in the machine's load
falls on all of them alike); figures are medians in ms:

- `mask_ms`: the matcher's work for one token on the mask thread (consume the token, the
  tokens the grammar forces, fill the packed mask, count what it allows), walking a reply
  whose only field is a free string (`benchmarks.constraints.UNFORCED_SCHEMA`) with
  tokens the mask allows; `mask_cpu_ms` is the same in the thread's CPU time, which other
  processes do not inflate;
- `apply_ms`: the mask put on one row's logits in the sampling graph, as the decode loop
  does it (`engine.constraints.masking.apply_masks`: the packed words copied to the device
  and applied there), with the greedy argmax; `argmax_ms` is the argmax alone, so the
  mask's own share is their difference; `apply_4_ms` and `argmax_4_ms` at 4 rows;
- `penalty_ms`: the repetition penalty's logits processor (mlx-lm's, 64 tokens of context);
- `sample_ms`: sampling at a temperature with top-p (`engine.runtime.sampling.RowSampler`);
- `topk_ms`: the token inspector's figures for one row (its log-sum-exp and top 20, as
  `engine.runtime.logprobs` finds them); `lse_ms` the log-sum-exp alone.

Logits are random (what each part does does not depend on their values); the vocabulary
and the tokenizer (for the mask) are the model's.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import mlx.core as mx
import numpy as np

from benchmarks.constraints import UNFORCED_SCHEMA
from engine.constraints.masking import PackedMasks, apply_masks, metal_available
from engine.constraints.row import RowConstraint
from engine.constraints.sources import json_schema_constraint
from engine.runtime.logprobs import top_ids
from engine.runtime.sampling import RowSampler, build_processors, end_token_ids
from engine.types import SamplingSettings

TOP = 20  # the inspector's alternatives (OpenAI's largest top_logprobs)


def mask_walk(tokenizer: Any, tokens: int, seed: int = 0) -> tuple[list[float], list[float]]:
    """(wall ms, thread CPU ms) of each matcher job along `tokens` tokens of a free string,
    each token the highest of random scores the mask allows (run on this thread)."""
    ends = end_token_ids(tokenizer)
    spec = json_schema_constraint(UNFORCED_SCHEMA, "free-string schema")
    row = RowConstraint(tokenizer, spec, ends, on_pool=False, max_tokens=tokens + 1000)
    step = row.collect()
    rng = np.random.default_rng(seed)
    wall: list[float] = []
    cpu: list[float] = []
    blocked = sorted(ends)
    for _ in range(tokens):
        assert step.mask is not None
        bits = np.unpackbits(step.mask.view(np.uint8), bitorder="little")
        scores = np.where(bits, rng.random(bits.size), -1.0)
        scores[blocked] = -1.0
        started, started_cpu = time.perf_counter(), time.thread_time()
        row.advance(int(np.argmax(scores)))
        step = row.collect()
        wall.append((time.perf_counter() - started) * 1e3)
        cpu.append((time.thread_time() - started_cpu) * 1e3)
        if step.stopped or step.mask is None:
            break
    return wall, cpu


def _timed(parts: dict[str, Callable[[], mx.array]], rounds: int) -> dict[str, float]:
    """Median ms of each part, evaluated alone, the parts taking turns (order alternating)."""
    times: dict[str, list[float]] = {name: [] for name in parts}
    names = list(parts)
    for name in names:  # warm-up
        mx.eval(parts[name]())
    for r in range(rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            started = time.perf_counter()
            mx.eval(parts[name]())
            times[name].append((time.perf_counter() - started) * 1e3)
    return {name: round(statistics.median(t), 4) for name, t in times.items()}


def device_parts(vocab: int, words: np.ndarray, rounds: int = 200) -> dict[str, float]:
    """The sampling graph's parts on logits of `vocab` tokens, masked by `words` (packed)."""
    rng = np.random.default_rng(1)
    one = mx.array(rng.standard_normal((1, vocab)).astype(np.float32))
    four = mx.array(rng.standard_normal((4, vocab)).astype(np.float32))
    mx.eval(one, four)
    metal = metal_available()
    packed = PackedMasks()
    greedy = RowSampler(SamplingSettings(temperature=0.0))
    warm = RowSampler(SamplingSettings(temperature=0.8, top_p=0.95, seed=1))
    penalty = build_processors(SamplingSettings(temperature=0.0, repetition_penalty=1.1))[0]
    context = mx.array(rng.integers(0, vocab, 64), dtype=mx.uint32)

    def apply(logits: mx.array) -> mx.array:
        masks: list[np.ndarray | None] = [words] * logits.shape[0]
        masked = apply_masks(logits, masks, use_metal=metal, packed=packed)
        return greedy(masked, 0)

    def topk() -> mx.array:  # as BatchLogprobs.sample: the log-sum-exp, then the top ids
        peak = mx.max(one, axis=-1, keepdims=True)
        lse = peak + mx.log(mx.sum(mx.exp(one - peak), axis=-1, keepdims=True))
        return mx.take_along_axis(one, top_ids(one, TOP), axis=-1) - lse

    def lse() -> mx.array:
        peak = mx.max(one, axis=-1, keepdims=True)
        return peak + mx.log(mx.sum(mx.exp(one - peak), axis=-1, keepdims=True))

    return _timed(
        {
            "argmax_ms": lambda: greedy(one, 0),
            "apply_ms": lambda: apply(one),
            "argmax_4_ms": lambda: greedy(four, 0),
            "apply_4_ms": lambda: apply(four),
            "penalty_ms": lambda: penalty(context, one),
            "sample_ms": lambda: warm(one, 7),
            "topk_ms": topk,
            "lse_ms": lse,
        },
        rounds,
    )


def token_parts(tokenizer: Any, vocab: int, tokens: int = 200) -> dict[str, Any]:
    """Every part's figures for a model with `tokenizer` and `vocab` logits."""
    wall, cpu = mask_walk(tokenizer, tokens)
    figures: dict[str, Any] = {
        "vocab": vocab,
        "mask_tokens": len(wall),
        "mask_ms": round(statistics.median(wall), 4),
        "mask_p99_ms": round(float(np.percentile(wall, 99)), 4),
        "mask_cpu_ms": round(statistics.median(cpu), 4),
        "mask_cpu_p99_ms": round(float(np.percentile(cpu, 99)), 4),
    }
    ends = end_token_ids(tokenizer)
    spec = json_schema_constraint(UNFORCED_SCHEMA, "free-string schema")
    row = RowConstraint(tokenizer, spec, ends, on_pool=False)
    mask = row.collect().mask
    assert mask is not None
    figures.update(device_parts(vocab, mask.copy()))
    return figures


def _load_tokenizer(label: str, folder: Path) -> tuple[Any, int]:
    from mlx_lm.utils import load_tokenizer

    from benchmarks.bench_models import build_stress_model, resolve_bench_model

    if label.startswith("stress"):
        path = build_stress_model(folder, "262k" if label == "stress262k" else "49k")
    else:
        from engine.library.load import resolve_model

        path = Path(resolve_model(resolve_bench_model(label)))
    config = json.loads((path / "config.json").read_text())
    vocab = int(config.get("vocab_size") or config["text_config"]["vocab_size"])
    return load_tokenizer(path), vocab  # type: ignore[no-untyped-call]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.token_parts", description=__doc__)
    parser.add_argument(
        "--models",
        default="stress,stress262k",
        help="comma-separated: stress (49k), stress262k, default, gemma3-270m, or a model spec",
    )
    parser.add_argument("--tokens", type=int, default=200, help="matcher jobs timed per model")
    args = parser.parse_args(argv)
    results = []
    for label in args.models.split(","):
        with tempfile.TemporaryDirectory(prefix="corral-parts-") as folder:
            tokenizer, vocab = _load_tokenizer(label, Path(folder))
            figures = {"model": label, **token_parts(tokenizer, vocab, args.tokens)}
        print(json.dumps(figures), flush=True)
        results.append(figures)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
