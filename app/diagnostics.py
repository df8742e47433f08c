"""What a problem report needs, as text: `python -m app --diagnostics` prints it and
Help → Copy Diagnostics puts it on the clipboard.

Versions (Corral, Python, Qt, MLX, mlx-lm, llguidance, mlx-vlm) come from the installed
packages' metadata, never by importing them: the app does not import MLX. Then the OS and
chip, the memory, the model in use and the syntaxes it writes tool calls and thinking in,
the data and log folders and the last errors in the log. The model's lines and the errors
pass the log's redaction (`engine.logs.redact_text`), so no key or secret reaches the text;
the server's key is read from where Corral keeps it (app.secrets) to be masked, and the
home folder is written "~" everywhere."""

from __future__ import annotations

import json
import os
import platform
import re
import sqlite3
import subprocess
import sys
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path

from app import __version__
from engine import logs
from engine.types import ModelInfo

# (shown as, the distribution names to try): wheels differ by platform
PACKAGES = (
    ("Qt for Python", ("PySide6-Essentials", "PySide6")),
    ("MLX", ("mlx",)),
    ("mlx-lm", ("mlx-lm",)),
    ("llguidance", ("llguidance",)),
    ("mlx-vlm", ("mlx-vlm",)),
)
LAST_ERRORS = 5
ERROR_LINE_MAX = 400  # characters of one error line shown


def package_version(names: Iterable[str]) -> str:
    """The installed version of the first of `names` found, or "not installed"."""
    for name in names:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return "not installed"


def qt_version() -> str:
    from PySide6.QtCore import qVersion

    return qVersion()


def _command(args: list[str]) -> str:
    try:
        done = subprocess.run(args, capture_output=True, text=True, timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def chip() -> str:
    """The processor's name: Apple M2 Pro, Intel(R) Core(TM)…; the architecture else."""
    name = ""
    if sys.platform == "darwin":
        name = _command(["sysctl", "-n", "machdep.cpu.brand_string"])
    elif Path("/proc/cpuinfo").is_file():
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            if line.lower().startswith("model name"):
                name = line.split(":", 1)[1].strip()
                break
    machine = platform.machine()
    return f"{name} ({machine})" if name else machine or "unknown"


def memory_bytes() -> int | None:
    """The machine's memory, or None where it cannot be read."""
    if sys.platform == "darwin":
        text = _command(["sysctl", "-n", "hw.memsize"])
        return int(text) if text.isdigit() else None
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):
        return None


def _gb(n: int) -> str:
    return f"{n / 1024**3:.1f} GB"


def tool_syntax(folder: Path) -> str:
    """The syntax the engine reads tool calls in for the model in `folder` (engine.tools
    picks the same one when the model loads)."""
    from engine.library.discovery import folder_chat_template
    from engine.tools.dialect import template_dialect

    return template_dialect(folder_chat_template(folder))[0]


def model_lines(info: ModelInfo | None, spec: str = "") -> list[tuple[str, str]]:
    """The model in use and its dialects; without one loaded, the one Corral starts with."""
    if info is None:
        lines = [("Model", f"none loaded (starts with: {spec or 'default'})")]
        folder = Path(spec) if spec and spec != "default" else None
        if folder is not None and folder.is_dir():
            lines.append(("Tool call syntax", tool_syntax(folder)))
        return lines
    lines = [
        ("Model", info.name),
        ("Model path", info.path),
        ("Context", f"{info.context_length} tokens" if info.context_length else "unknown"),
        ("Chat template", "yes" if info.has_chat_template else "none (plain text prompt)"),
    ]
    folder = Path(info.path)
    if folder.is_dir():
        lines.append(("Tool call syntax", tool_syntax(folder)))
    reasoning = info.reasoning
    thinking = f"{reasoning.kind} ({reasoning.start}…{reasoning.end})" if reasoning else "none"
    lines.append(("Thinking syntax", thinking))
    lines.append(("Reads images", "yes" if info.vision else "no"))
    return lines


def last_errors(folder: Path, count: int = LAST_ERRORS) -> list[str]:
    """The last `count` ERROR or CRITICAL lines of the log (the newest file, then older)."""
    found: list[str] = []
    files = [folder / logs.LOG_FILE] + [
        folder / f"{logs.LOG_FILE}.{n}" for n in range(1, logs.BACKUPS + 1)
    ]
    for path in files:
        if len(found) >= count or not path.is_file():
            continue
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        errors = [line for line in lines if " ERROR " in line or " CRITICAL " in line]
        found = errors[-(count - len(found)) :] + found
    return [line[:ERROR_LINE_MAX] for line in found[-count:]]


def stored_settings(data_dir: Path, keys: Iterable[str]) -> dict[str, object]:
    """Settings read from the conversation database without changing it (read-only; a
    missing or unreadable database gives none)."""
    from app.store.store import DB_NAME

    path = data_dir / DB_NAME
    if not path.is_file():
        return {}
    found: dict[str, object] = {}
    try:
        db = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, timeout=1)
        try:
            for key in keys:
                row = db.execute("SELECT value FROM settings WHERE key = ?", (key,)).fetchone()
                if row is not None:
                    found[key] = json.loads(row[0])
        finally:
            db.close()
    except (sqlite3.Error, ValueError):
        return found
    return found


def command_line_report(data_dir: Path) -> str:
    """`python -m app --diagnostics`: no model is loaded; the one Corral starts with is
    named, and the local server's key (if set) is kept out like any secret."""
    from app.secrets import SERVER_API_KEY, SecretStore

    settings = stored_settings(data_dir, ("model_spec", "server_api_key"))
    spec = settings.get("model_spec")
    legacy = settings.get("server_api_key")  # an older Corral's, not yet moved out
    return report(
        model_spec=spec if isinstance(spec, str) else "",
        data_dir=data_dir,
        secrets=[
            SecretStore(data_dir).get(SERVER_API_KEY),
            legacy if isinstance(legacy, str) else None,
        ],
    )


def report(
    *,
    model: ModelInfo | None = None,
    model_spec: str = "",
    data_dir: Path | None = None,
    log_folder: Path | None = None,
    secrets: Iterable[str | None] = (),
) -> str:
    """The diagnostics as "Label: value" lines; `secrets` (known at run time) are masked."""
    logs.remember_secrets(secrets)
    folder = log_folder or logs.log_dir()
    memory = memory_bytes()
    lines: list[tuple[str, str]] = [
        ("Corral", __version__),
        ("Python", f"{platform.python_version()} ({sys.executable})"),
        ("Qt", qt_version()),
    ]
    lines += [(shown, package_version(names)) for shown, names in PACKAGES]
    lines += [
        ("OS", platform.platform()),
        ("Chip", chip()),
        ("Memory", _gb(memory) if memory else "unknown"),
    ]
    # what a user or a model named (a spec may be a URL), and the log, pass the redaction;
    # versions and the OS do not (a long build string would be masked as if a key)
    lines += [(label, logs.redact_text(value)) for label, value in model_lines(model, model_spec)]
    if data_dir is not None:
        lines.append(("Data folder", str(data_dir)))
    lines.append(("Log folder", str(folder)))
    errors = [logs.redact_text(line) for line in last_errors(folder)]
    text = "\n".join(f"{label}: {value}" for label, value in lines)
    text += "\nLast errors:" + ("".join(f"\n  {e}" for e in errors) if errors else " none")
    return without_home(text)


def without_home(text: str) -> str:
    """`text` with the user's home folder written "~": a report carries no user name."""
    home = str(Path.home())
    if home in ("", os.sep):
        return text
    return re.sub(re.escape(home) + r"(?=[/\\\s:'\")]|$)", "~", text, flags=re.MULTILINE)
