"""Entry point of the packaged Corral (Corral.app on macOS, a one-folder bundle elsewhere).

`Corral --self-test [--model SPEC]` checks the bundle headless: it loads the bundled default
model (or SPEC) through the Engine, runs one short generation constrained by a JSON schema,
prints a JSON report on stdout and exits 0 only if the reply conforms. It imports no Qt GUI
module and needs no display (PyInstaller's PySide6 run-time hook loads QtCore at start-up).
Anything else starts the app (`app.__main__.main`); it handles macOS file-open events.

When frozen, the converted default model ships inside the bundle (`models/default`), so the
first launch needs no network and no GGUF import.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

BUNDLED_MODEL = Path("models") / "default"

SELF_TEST_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"city": {"type": "string", "minLength": 1, "maxLength": 24}},
    "required": ["city"],
    "additionalProperties": False,
}
SELF_TEST_PROMPT = "What is the capital of France? Reply in JSON."
SELF_TEST_MAX_TOKENS = 40  # the schema bounds the reply well below this


def bundle_dir() -> Path | None:
    """The bundle's data folder when frozen by PyInstaller, else None."""
    meipass = getattr(sys, "_MEIPASS", None)
    return Path(meipass) if getattr(sys, "frozen", False) and meipass else None


def use_bundled_model() -> Path | None:
    """Point CORRAL_BUNDLED_MODEL at the model inside the bundle (unless already set)."""
    bundle = bundle_dir()
    if bundle is None:
        return None
    model = bundle / BUNDLED_MODEL
    if (model / "config.json").exists():
        os.environ.setdefault("CORRAL_BUNDLED_MODEL", str(model))
        return model
    return None


def conforms(value: Any) -> bool:
    """Whether `value` satisfies SELF_TEST_SCHEMA (checked by hand: no jsonschema at run time)."""
    if not isinstance(value, dict) or set(value) != {"city"}:
        return False
    city = value["city"]
    return isinstance(city, str) and 1 <= len(city) <= 24


def _fail(report: dict[str, Any], message: str, code: int = 1) -> int:
    report.update(ok=False, error=message)
    print(json.dumps(report), flush=True)
    print(f"corral self-test: {message}", file=sys.stderr)
    return code


def self_test(model: str = "default") -> int:
    """Load `model` (the bundled default), generate constrained JSON, report; 0 if it conforms."""
    started = time.perf_counter()
    bundled = use_bundled_model()
    report: dict[str, Any] = {"ok": False, "frozen": bundle_dir() is not None}
    if report["frozen"] and bundled is None and model == "default":
        return _fail(report, f"no bundled model at {bundle_dir() / BUNDLED_MODEL}")

    import importlib.util

    import engine  # noqa: F401 - loads OpenBLAS before MLX (engine/blas.py)

    if importlib.util.find_spec("engine.constraints.loop") is None:
        return _fail(report, "constrained decoding (engine.constraints) is not in this build", 3)

    import mlx.core as mx

    from engine.blas import openblas_path
    from engine.engine import Engine
    from engine.types import ChatRequest, ConstraintSpec, SamplingSettings

    report.update(
        mlx=mx.__version__,
        device=str(mx.default_device()),
        metal=bool(mx.metal.is_available()),
        openblas=openblas_path,
    )
    request = ChatRequest(
        [{"role": "user", "content": SELF_TEST_PROMPT}],
        SamplingSettings(temperature=0.0, max_tokens=SELF_TEST_MAX_TOKENS),
        constraint=ConstraintSpec("json_schema", json.dumps(SELF_TEST_SCHEMA), "self-test"),
    )
    eng = Engine()
    try:
        info = eng.load_model(model).result()
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
        return _fail(report, f"generation failed: {result.error}")
    # PyInstaller's PySide6 run-time hook loads QtCore at start-up (to register qt.conf);
    # nothing that needs a display (QtGui, QtWidgets) may load here.
    gui = [m for m in report["qt_modules"] if m != "PySide6.QtCore"]
    if gui:
        return _fail(report, f"the self-test imported Qt GUI modules {gui}; it must stay headless")
    if report["frozen"] and model == "default" and not report["bundled_model"]:
        return _fail(report, f"loaded {info.path}, not the bundled model {bundled}")
    try:
        report["value"] = json.loads(result.text)
    except ValueError as exc:
        return _fail(report, f"the reply is not JSON ({exc}): {result.text!r}")
    if not conforms(report["value"]):
        return _fail(report, f"the reply does not match the schema: {result.text!r}")
    report["ok"] = True
    print(json.dumps(report), flush=True)
    return 0


def _option(args: list[str], name: str) -> str | None:
    """The value of `name VALUE` or `name=VALUE` in `args`."""
    for i, arg in enumerate(args):
        if arg == name and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


def main(argv: list[str] | None = None) -> int:
    """Run the self-test or the app with the bundle's model and arguments."""
    args = list(sys.argv[1:] if argv is None else argv)
    # Old macOS versions pass a process serial number to apps started from Finder.
    args = [a for a in args if not a.startswith("-psn_")]
    if "--self-test" in args:
        return self_test(_option(args, "--model") or "default")
    use_bundled_model()
    from app.__main__ import main as app_main

    return int(app_main(args) or 0)


if __name__ == "__main__":
    if bundle_dir() is None:  # run from a checkout: make `engine` and `app` importable
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    sys.exit(main())
