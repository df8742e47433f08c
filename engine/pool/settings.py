"""Each model's settings in a pool, and the small TOML file that gives them.

```toml
[models.coder]                       # the name requests use (an alias)
model = "mlx-community/Qwen3-8B-4bit"  # what to load; without it, a model already listed
pin = true                           # never unloaded
idle_unload_minutes = 30             # unloaded after this long without a request
context_length = 16384               # read at most this much of its context
kv_cache_gb = 2                      # its prompt cache's memory budget
chat_template_kwargs = { enable_thinking = false }
sampling = { temperature = 0.6, top_p = 0.95, max_tokens = 4096 }
```

Every value is checked when the file is read; a bad one is a ModelSettingsError naming the
file, the key (`models.coder.sampling.temperature`) and what was wrong. No MLX here.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from engine.errors import CorralError
from engine.types import MODEL_KINDS, ModelKind, SamplingSettings, check_sampling

MAX_SETTINGS_BYTES = 1 << 20
# The sampling defaults a settings file may give a model (what a request leaves unset).
SAMPLING_KEYS = ("temperature", "top_p", "top_k", "min_p", "repetition_penalty", "max_tokens")
_ENTRY_KEYS = (
    "model",
    "kind",
    "aliases",
    "pin",
    "idle_unload_minutes",
    "context_length",
    "kv_cache_gb",
    "chat_template_kwargs",
    "sampling",
)


def default_settings_path() -> Path:
    """Where the app and `serve` look for per-model settings when told of no file:
    `models.toml` in Corral's settings folder ($CORRAL_MODELS_SETTINGS overrides it)."""
    import os

    import platformdirs

    override = os.environ.get("CORRAL_MODELS_SETTINGS")
    if override:
        return Path(override)
    return Path(platformdirs.user_config_dir("Corral", "Corral")) / "models.toml"


class ModelSettingsError(CorralError):
    """A model's settings are wrong; the message names the file and the key."""


@dataclass(frozen=True)
class ModelSettings:
    """What a user set for one model; None (or empty) leaves Corral's own choice."""

    pin: bool | None = None
    idle_unload_s: float | None = None
    context_length: int | None = None
    kv_budget_bytes: int | None = None
    template_kwargs: dict[str, Any] = field(default_factory=dict)
    sampling: dict[str, float | int] = field(default_factory=dict)

    def over(self, base: ModelSettings) -> ModelSettings:
        """These settings where set, `base`'s elsewhere (the file over the command line)."""
        merged: dict[str, Any] = {}
        for f in fields(self):
            mine, theirs = getattr(self, f.name), getattr(base, f.name)
            if isinstance(mine, dict):
                merged[f.name] = {**theirs, **mine}
            else:
                merged[f.name] = theirs if mine is None else mine
        return ModelSettings(**merged)

    def sampling_defaults(self, base: SamplingSettings | None = None) -> SamplingSettings:
        """The sampling a request of this model starts from: `base` (Corral's defaults)
        with this model's values over it."""
        values: dict[str, Any] = {k: v for k, v in self.sampling.items() if k in SAMPLING_KEYS}
        return replace(base or SamplingSettings(), **values)


@dataclass(frozen=True)
class ModelEntrySettings:
    """One `[models.NAME]` table: the name, what to load (None: a model listed otherwise),
    its kind (None: the kind it is listed as already, else the kind its files say) and
    other names, and its settings."""

    name: str
    spec: str | None
    kind: ModelKind | None
    aliases: tuple[str, ...]
    settings: ModelSettings


def read_settings_file(path: Path) -> list[ModelEntrySettings]:
    """The models a settings file describes, in its order; ModelSettingsError naming the
    file and key for anything wrong (syntax too, with its line and column)."""
    where = str(path)
    try:
        if path.stat().st_size > MAX_SETTINGS_BYTES:
            raise ModelSettingsError(f"{where}: larger than {MAX_SETTINGS_BYTES:,} bytes")
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ModelSettingsError(f"{where}: no such file") from None
    except UnicodeDecodeError:
        raise ModelSettingsError(f"{where}: not UTF-8 text") from None
    except OSError as exc:
        raise ModelSettingsError(f"{where}: cannot be read ({exc.strerror})") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ModelSettingsError(f"{where}: not valid TOML: {exc}") from None
    unknown = sorted(set(data) - {"models"})
    if unknown:
        raise ModelSettingsError(f"{where}: unknown key {unknown[0]!r} (expected [models.NAME])")
    models = data.get("models", {})
    if not isinstance(models, dict):
        raise ModelSettingsError(f"{where}: models must be a table of [models.NAME] tables")
    found = [parse_entry(name, value, f"{where}: models.{name}") for name, value in models.items()]
    names: dict[str, str] = {}
    for entry in found:
        for name in (entry.name, *entry.aliases):
            if name in names:
                raise ModelSettingsError(
                    f"{where}: models.{entry.name}: the name {name!r} is already "
                    f"models.{names[name]}'s"
                )
            names[name] = entry.name
    return found


def parse_entry(name: str, value: Any, where: str) -> ModelEntrySettings:
    """One model's table (`where` names it in errors)."""
    if not name.strip():
        raise ModelSettingsError(f"{where}: a model's name cannot be empty")
    if not isinstance(value, dict):
        raise ModelSettingsError(f"{where}: must be a table of settings")
    unknown = sorted(set(value) - set(_ENTRY_KEYS))
    if unknown:
        raise ModelSettingsError(
            f"{where}.{unknown[0]}: unknown setting (known: {', '.join(_ENTRY_KEYS)})"
        )
    spec = value.get("model")
    if spec is not None and (not isinstance(spec, str) or not spec.strip()):
        raise ModelSettingsError(
            f"{where}.model: a model folder, .gguf file, repo id or 'default', got {spec!r}"
        )
    kind = value.get("kind")
    if kind is not None and kind not in MODEL_KINDS:
        raise ModelSettingsError(f"{where}.kind: one of {', '.join(MODEL_KINDS)}, got {kind!r}")
    aliases = value.get("aliases", [])
    if not isinstance(aliases, list) or not all(isinstance(a, str) and a for a in aliases):
        raise ModelSettingsError(f"{where}.aliases: a list of names, got {aliases!r}")
    return ModelEntrySettings(name, spec, kind, tuple(aliases), parse_settings(value, where))


def parse_settings(value: dict[str, Any], where: str) -> ModelSettings:
    """The settings of one model's table, each checked."""
    pin = value.get("pin")
    if pin is not None and not isinstance(pin, bool):
        raise ModelSettingsError(f"{where}.pin: true or false, got {pin!r}")
    minutes = _number(value, "idle_unload_minutes", where, low=0.0)
    context = value.get("context_length")
    if context is not None and (
        isinstance(context, bool) or not isinstance(context, int) or context < 16
    ):
        raise ModelSettingsError(f"{where}.context_length: a whole number from 16, got {context!r}")
    kv_gb = _number(value, "kv_cache_gb", where, low=0.0)
    kwargs = value.get("chat_template_kwargs", {})
    if not isinstance(kwargs, dict):
        raise ModelSettingsError(
            f"{where}.chat_template_kwargs: a table of template variables, got {kwargs!r}"
        )
    sampling = value.get("sampling", {})
    if not isinstance(sampling, dict):
        raise ModelSettingsError(f"{where}.sampling: a table of settings, got {sampling!r}")
    unknown = sorted(set(sampling) - set(SAMPLING_KEYS))
    if unknown:
        raise ModelSettingsError(
            f"{where}.sampling.{unknown[0]}: unknown setting (known: {', '.join(SAMPLING_KEYS)})"
        )
    try:
        check_sampling(replace(SamplingSettings(), **sampling))
    except (ValueError, TypeError) as exc:
        key = str(exc).split(" ", 1)[0]
        raise ModelSettingsError(f"{where}.sampling.{key}: {exc}") from None
    return ModelSettings(
        pin=pin,
        idle_unload_s=None if minutes is None else minutes * 60,
        context_length=context,
        kv_budget_bytes=None if kv_gb is None else int(kv_gb * (1 << 30)),
        template_kwargs=dict(kwargs),
        sampling=dict(sampling),
    )


def _number(value: dict[str, Any], key: str, where: str, *, low: float) -> float | None:
    found = value.get(key)
    if found is None:
        return None
    ok = isinstance(found, int | float) and not isinstance(found, bool)
    if not ok or not math.isfinite(found) or found < low:
        raise ModelSettingsError(f"{where}.{key}: a number from {low:g}, got {found!r}")
    return float(found)
