"""How much of the real world Corral's constraints cover (the `coverage` bench section).

Over every schema in ../shared/datasets/jsonschemabench, for the loaded model's tokenizer:
the share that compiles to a first mask with the default options (tight defaults, lenient
about keywords llguidance cannot enforce) and with `--strict-schema`, and the time from
the schema to its first mask (p50/p99, default options). Then, on a fixed sample of
`SAMPLE` schemas that compile (spread over Github_easy, Glaiveai2K and Handwritten), one
greedy reply each at `max_tokens`: the share complete and valid under `jsonschema`, formats
checked, against the schema as the user wrote it (`constrained_complete_rate`: Corral's
promise); the share valid against it less the keywords Corral warned it does not enforce
(`constrained_valid_enforced_rate`: what the grammar held the reply to); the share valid
as written that the model wrote to its end, with no closing at all (`model_complete_rate`:
steering toward the end may have narrowed its masks, `steered_rate` says how many were);
the share the closing tracker closed to fit (`closed_to_fit_rate`: values held to fit,
`filled`); and the share the engine flagged invalid as written (`flagged_invalid_rate`:
replies that leave saying so; the goal is none).

Formats are checked with draft 2020-12's format checker whatever the schema's draft: it
knows every format llguidance enforces (`date` and `uuid`, which draft 4 does not define,
included), and reads `time` as RFC 3339 does, where the catch-all `FormatChecker()` reads
it as draft 3 did (`HH:MM:SS`, no zone) and would call valid times invalid.
"""

from __future__ import annotations

import json
import re
import statistics
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from engine.constraints import ConstraintError
from engine.constraints.compiled import compiled_of
from engine.constraints.sources import json_schema_constraint
from engine.constraints.validate import compile_constraint
from engine.types import ChatRequest, ConstraintSpec, SamplingSettings, SchemaOptions

DATASETS = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"
SAMPLE = 50
SAMPLE_SUBSETS = {"Github_easy": 20, "Glaiveai2K": 20, "Handwritten": 10}
STRICT = SchemaOptions(lenient=False)


def bench_dir() -> Path:
    """../shared/datasets/jsonschemabench (CORRAL_DATASETS overrides ../shared/datasets)."""
    import os

    root = Path(os.environ.get("CORRAL_DATASETS") or DATASETS)
    return root / "jsonschemabench"


def schema_files(bench: Path) -> list[Path]:
    return sorted(bench.glob("*/*.json"))


def load_schema(path: Path) -> tuple[Any, str]:
    """(the schema, a short prompt asking for an instance of it)."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    schema = doc["schema"]
    about = ""
    if isinstance(schema, dict):
        about = str(schema.get("description") or schema.get("title") or "")
    about = " ".join((about or str(doc.get("description") or path.stem)).split())[:200]
    return schema, f"Write one example JSON object for: {about}"


def first_mask_ms(spec: ConstraintSpec, lltok: Any) -> float | None:
    """ms from the schema to its first mask for `lltok`, or None if it does not compile."""
    started = time.perf_counter()
    try:
        compiled = compiled_of(compile_constraint(spec))
    except ConstraintError:
        return None
    assert compiled is not None
    matcher = compiled.matcher(lltok)
    if matcher.is_error():
        return None
    matcher.compute_bitmask()
    if matcher.is_error():
        return None
    return (time.perf_counter() - started) * 1e3


def compile_coverage(lltok: Any, files: list[Path]) -> tuple[dict[str, Any], list[Path]]:
    """The compile figures over `files`, and the files that compile with the defaults."""
    times: list[float] = []
    strict_ok = 0
    compiled: list[Path] = []
    for path in files:
        schema, _ = load_schema(path)
        try:
            spec = json_schema_constraint(schema, path.name)
        except ConstraintError:
            continue
        ms = first_mask_ms(spec, lltok)
        if ms is not None:
            times.append(ms)
            compiled.append(path)
        strict_ok += first_mask_ms(replace(spec, options=STRICT), lltok) is not None
    n = len(files)
    figures = {
        "coverage_schemas": n,
        "schema_compile_rate": round(len(times) / n, 4) if n else None,
        "schema_compile_rate_strict": round(strict_ok / n, 4) if n else None,
        "first_mask_p50_ms": round(float(np.percentile(times, 50)), 2) if times else None,
        "first_mask_p99_ms": round(float(np.percentile(times, 99)), 2) if times else None,
    }
    return figures, compiled


def generation_sample(compiled: list[Path], size: int = SAMPLE) -> list[Path]:
    """A fixed spread of compiling schemas from the subsets in SAMPLE_SUBSETS."""
    picked: list[Path] = []
    for subset, count in SAMPLE_SUBSETS.items():
        found = [p for p in compiled if p.parent.name == subset]
        step = max(1, len(found) // count)
        picked += found[::step][:count]
    return picked[:size]


_IGNORED = re.compile(r"not enforced \(ignored\): (.*)")
_UNKNOWN_FORMAT = re.compile(r"Unknown format: (.*?)(?: \(\d+ times\))? \(not enforced\)")
_PROPERTY_COUNTS = ("minProperties", "maxProperties")


def enforced_schema(schema: Any, warnings: list[str]) -> Any:
    """`schema` as Corral enforces it: without the keywords its warnings name as ignored
    (lenient compilation), the formats they name as unknown, `min`/`maxProperties` where
    they say those are not supported, and with `oneOf` read as `anyOf` where they say so.
    Each of these only removes a constraint, so what the schema as written accepts this
    accepts too."""
    ignored: set[str] = set()
    formats: set[str] = set()
    for warning in warnings:
        if match := _IGNORED.search(warning):
            ignored |= set(re.findall(r'"([^"]+)"', match.group(1)))
        if match := _UNKNOWN_FORMAT.search(warning):
            formats.add(match.group(1))
        if "min/maxProperties" in warning:
            ignored.update(_PROPERTY_COUNTS)
    as_any = any("oneOf" in w and "anyOf" in w for w in warnings)
    if not ignored and not formats and not as_any:
        return schema

    def strip(node: Any, in_map: bool = False) -> Any:
        if isinstance(node, list):
            return [strip(v) for v in node]
        if not isinstance(node, dict):
            return node
        if in_map:  # property names and definitions: keys are names, not keywords
            return {k: strip(v) for k, v in node.items()}
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key in ignored or (key == "format" and value in formats):
                continue
            maps = key in ("properties", "patternProperties", "$defs", "definitions")
            out["anyOf" if as_any and key == "oneOf" else key] = strip(value, maps)
        return out

    return strip(schema)


def is_valid(schema: Any, text: str) -> bool:
    """Whether `text` is JSON valid against `schema` under its own draft's rules (2020-12
    if it names none), formats checked (see the module doc)."""
    import jsonschema

    try:
        value = json.loads(text)
    except ValueError:
        return False
    validator = jsonschema.validators.validator_for(schema, jsonschema.Draft202012Validator)
    checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
    return bool(validator(schema, format_checker=checker).is_valid(value))


def request_for(path: Path, max_tokens: int, **options: Any) -> ChatRequest:
    """The greedy request for a schema file, with its prompt, at `max_tokens`."""
    schema, prompt = load_schema(path)
    return ChatRequest(
        [{"role": "user", "content": prompt}],
        SamplingSettings(temperature=0.0, max_tokens=max_tokens),
        constraint=json_schema_constraint(schema, path.name),
        **options,
    )


def check_reply(path: Path, result: Any) -> bool:
    """Whether `result` is complete and valid against the schema in `path` as Corral
    enforced it: as written, less what its warnings name as not enforced
    (`enforced_schema`), formats checked."""
    if result.error or result.incomplete:
        return False
    return is_valid(enforced_schema(load_schema(path)[0], result.warnings), result.text)


def valid_as_written(path: Path, result: Any) -> bool:
    """Whether `result` is complete and valid against the schema in `path` exactly as the
    user wrote it, formats checked: what Corral promises."""
    if result.error or result.incomplete:
        return False
    return is_valid(load_schema(path)[0], result.text)


def reply_for(engine: Any, path: Path, max_tokens: int, **options: Any) -> tuple[Any, bool]:
    """(the ChatResult for the schema in `path`, whether it is complete and valid)."""
    result = engine.chat(request_for(path, max_tokens, **options))
    return result, check_reply(path, result)


def replies_for(
    engine: Any, paths: list[Path], max_tokens: int, **options: Any
) -> list[tuple[Any, bool]]:
    """`reply_for` over `paths`, submitted together: they decode side by side, as many at
    once as the engine's rows allow (greedy rows give what they give alone)."""
    handles = [engine.submit(request_for(path, max_tokens, **options)) for path in paths]
    results = [handle.result() for handle in handles]
    return [(r, check_reply(path, r)) for path, r in zip(paths, results, strict=True)]


def run_coverage_bench(engine: Any, args: Any = None, max_tokens: int = 200) -> dict[str, Any]:
    """The coverage figures for the model loaded in `engine` (an engine.engine.Engine)."""
    from engine.constraints.tokenizer import ll_tokenizer
    from engine.runtime.sampling import end_token_ids

    bench = bench_dir()
    files = schema_files(bench)
    if not files:
        return {"coverage_error": f"no schemas in {bench}"}
    lltok = engine.run(lambda lm: ll_tokenizer(lm.tokenizer, end_token_ids(lm.tokenizer)))
    figures, compiled = compile_coverage(lltok.result(), files)
    sample = generation_sample(compiled)
    complete = enforced = closed = agree = checked = flagged = by_model = steered = 0
    check_ms: list[float] = []
    for path, (result, ok) in zip(sample, replies_for(engine, sample, max_tokens), strict=True):
        valid = valid_as_written(path, result)
        complete += valid
        enforced += ok
        closed += result.closed_to_fit
        by_model += valid and not result.closed_to_fit
        steered += bool(result.stats.steered_tokens or result.stats.loops_moved_on)
        flagged += result.valid_as_written is False  # complete or not
        if not result.error and not result.incomplete:
            # the engine's own verdict on the reply, beside this independent one
            checked += 1
            agree += result.valid_as_written is valid
            check_ms.append(result.stats.as_written_ms)
    figures["coverage_sample"] = len(sample)
    figures["coverage_max_tokens"] = max_tokens
    figures["constrained_complete_rate"] = _rate(complete, len(sample))
    figures["constrained_valid_enforced_rate"] = _rate(enforced, len(sample))
    figures["closed_to_fit_rate"] = _rate(closed, len(sample))
    # valid as the model wrote it to its end, no value held to fit (goal >= 0.9), and
    # the share of replies whose masks steering narrowed (to wrap up or move on)
    figures["model_complete_rate"] = _rate(by_model, len(sample))
    figures["steered_rate"] = _rate(steered, len(sample))
    # replies the engine itself flagged invalid as written (the goal is none)
    figures["flagged_invalid_rate"] = _rate(flagged, len(sample))
    # The check every constrained reply gets when it ends (engine.constraints.as_written):
    # how often its verdict matches this bench's, and what it costs per reply.
    figures["as_written_agreement"] = _rate(agree, checked)
    if check_ms:
        ordered = sorted(check_ms)
        figures["as_written_p50_ms"] = round(statistics.median(ordered), 3)
        figures["as_written_max_ms"] = round(ordered[-1], 3)
    return figures


def _rate(count: int, total: int) -> float | None:
    return round(count / total, 4) if total else None
