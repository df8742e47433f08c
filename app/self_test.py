"""`corral --self-test [--model SPEC]`: check that this installation of Corral works.

It loads the default model (the bundled one in a packaged app) through the Engine, runs one
short generation constrained by a JSON schema, prints a JSON report on stdout and returns 0
only if the reply conforms. It needs no display: no Qt GUI module is imported (in a bundle
PyInstaller's PySide6 hook loads QtCore at start-up; nothing else may load). This is what a
packaged `Corral.app` runs to check itself on a user's machine (packaging/launcher.py
forwards `--self-test` here).
"""

from __future__ import annotations

import json
import logging
import sys
import time
from pathlib import Path
from typing import Any

SELF_TEST_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"city": {"type": "string", "minLength": 1, "maxLength": 24}},
    "required": ["city"],
    "additionalProperties": False,
}
SELF_TEST_PROMPT = "What is the capital of France? Reply in JSON."
SELF_TEST_MAX_TOKENS = 40  # the schema bounds the reply well below this
log = logging.getLogger("app.self_test")


def conforms(value: Any) -> bool:
    """Whether `value` satisfies SELF_TEST_SCHEMA (checked by hand: no jsonschema at run time)."""
    if not isinstance(value, dict) or set(value) != {"city"}:
        return False
    city = value["city"]
    return isinstance(city, str) and 1 <= len(city) <= 24


def _fail(report: dict[str, Any], message: str, code: int = 1) -> int:
    report.update(ok=False, error=message)
    log.error("self-test failed: %s", message)
    print(json.dumps(report), flush=True)
    print(f"corral self-test: {message}", file=sys.stderr)
    return code


def run_self_test(model: str = "default") -> int:
    """Load `model`, generate schema-constrained JSON, print the report; 0 if it conforms."""
    started = time.perf_counter()
    frozen = bool(getattr(sys, "frozen", False))
    report: dict[str, Any] = {"ok": False, "frozen": frozen}

    import engine  # noqa: F401  (loads OpenBLAS before MLX: engine/blas.py)
    from engine.library.load import bundled_default_model

    bundled = bundled_default_model()
    if frozen and bundled is None and model == "default":
        return _fail(report, "no bundled model in this build (models/default is missing)")

    from engine.blas import openblas_path
    from engine.engine import Engine
    from engine.memory.plan import backend_info
    from engine.types import ChatRequest, ConstraintSpec, SamplingSettings

    report.update(
        **backend_info(),
        openblas=openblas_path,
    )
    request = ChatRequest(
        [{"role": "user", "content": SELF_TEST_PROMPT}],
        SamplingSettings(temperature=0.0, max_tokens=SELF_TEST_MAX_TOKENS),
        constraint=ConstraintSpec("json_schema", json.dumps(SELF_TEST_SCHEMA), "self-test"),
    )
    eng = Engine()
    log.info("self-test: loading %s", model)
    try:
        info = eng.load_model(model).result()
        log.info("self-test: loaded %s from %s", info.name, info.path)
        result = eng.chat(request)
    except Exception as exc:
        return _fail(report, f"{type(exc).__name__}: {exc}")
    finally:
        eng.close()
    report.update(
        model=info.name,
        model_path=info.path,
        bundled_model=bundled is not None and Path(info.path) == bundled,
        schema=SELF_TEST_SCHEMA,
        text=result.text,
        stop_reason=result.stop_reason.value,
        generated_tokens=result.stats.generated_tokens,
        forced_tokens=result.stats.forced_tokens,
        qt_modules=sorted(m for m in sys.modules if m.startswith("PySide6.Qt")),
        seconds=round(time.perf_counter() - started, 2),
    )
    if result.error:
        return _fail(report, f"generation failed: {result.error_line}")
    gui = [m for m in report["qt_modules"] if m != "PySide6.QtCore"]
    if gui:
        return _fail(report, f"the self-test imported Qt GUI modules {gui}; it must stay headless")
    if frozen and model == "default" and not report["bundled_model"]:
        return _fail(report, f"loaded {info.path}, not the bundled model {bundled}")
    try:
        report["value"] = json.loads(result.text)
    except ValueError as exc:
        return _fail(report, f"the reply is not JSON ({exc}): {result.text!r}")
    if not conforms(report["value"]):
        return _fail(report, f"the reply does not match the schema: {result.text!r}")
    report["ok"] = True
    log.info("self-test passed in %.1f s", report["seconds"])
    print(json.dumps(report), flush=True)
    return 0
