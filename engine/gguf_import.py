"""Import a GGUF file into an MLX model folder.

The weights are converted tensor by tensor by `engine.library.convert` (the architectures
it knows, and how each quantization is stored, live in `engine.library`); this module adds
the tokenizer and writes the folder to a temporary sibling that is renamed into place, so
a failure never leaves a half-written model behind.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from engine.gguf_tokenizer import build_tokenizer_files
from engine.library.convert import IMPORT_FORMAT, convert_gguf

ProgressFn = Callable[[str, float], None]


def import_gguf(
    gguf_path: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    on_progress: ProgressFn | None = None,
) -> Path:
    """Convert `gguf_path` into an MLX model folder at `out_dir` and return its path.

    `out_dir` is written atomically: a temporary folder beside it is renamed into place.
    """
    source = Path(gguf_path).expanduser()
    out = Path(out_dir).expanduser()
    report = on_progress or (lambda stage, fraction: None)

    report("Reading GGUF", 0.0)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        config, meta = convert_gguf(source, tmp, report)
        build_tokenizer_files(meta, tmp, source)
        (tmp / "config.json").write_text(json.dumps(config, indent=2))
        (tmp / "corral_source.json").write_text(
            json.dumps(
                {"gguf": str(source), "size": source.stat().st_size, "format": IMPORT_FORMAT}
            )
        )
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    report("Imported", 1.0)
    return out
