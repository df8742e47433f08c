"""Entry point of the packaged Corral (Corral.app on macOS, a one-folder bundle elsewhere).

It points the engine at the model inside the bundle and hands over to the app
(`app.__main__.main`), which handles macOS file-open events and `--self-test`: the
headless check of the bundle in app/self_test.py (bundled model, one schema-constrained
generation, a JSON report on stdout, exit status 0 only if the reply conforms).

When frozen, the converted default model ships inside the bundle (`models/default`), so the
first launch needs no network and no GGUF import.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

BUNDLED_MODEL = Path("models") / "default"


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


def main(argv: list[str] | None = None) -> int:
    """Run the app (or its self-test) with the bundle's model and arguments."""
    args = list(sys.argv[1:] if argv is None else argv)
    # Old macOS versions pass a process serial number to apps started from Finder.
    args = [a for a in args if not a.startswith("-psn_")]
    use_bundled_model()
    from app.__main__ import main as app_main

    return int(app_main(args) or 0)


if __name__ == "__main__":
    if bundle_dir() is None:  # run from a checkout: make `engine` and `app` importable
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    sys.exit(main())
