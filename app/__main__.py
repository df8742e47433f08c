"""Start Corral: `python -m app [--model SPEC] [--data-dir DIR] [FILES]`, check the
installation with `python -m app --self-test [--model SPEC]` (app/self_test.py, no display;
it logs to Corral's log folder), or print what a problem report needs with
`python -m app --diagnostics [--data-dir DIR]` (app/diagnostics.py).

The window is shown first and the model loads on the engine thread afterwards, so the app
is on screen (and usable: messages wait for the model) within a moment of launch.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

_LAUNCHED = time.perf_counter()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="corral", description="Corral: local LLM chat")
    parser.add_argument(
        "--model",
        default=None,
        help='"default", an MLX model folder, a .gguf file or a Hugging Face '
        "repo id (default: the last model used, else the default model)",
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="where the conversation database lives (default: the user's data folder)",
    )
    parser.add_argument(
        "--self-test",
        action="store_true",
        help="check this installation without a window: load the model (--model, default: "
        "the default model), generate schema-constrained JSON, print a JSON report; exit "
        "status 0 if it conforms",
    )
    parser.add_argument(
        "--diagnostics",
        action="store_true",
        help="print what a problem report needs (versions, OS and chip, memory, the model, "
        "folders, the last errors; redacted) and exit",
    )
    parser.add_argument("--report-startup", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("files", nargs="*", help="grammar or schema files to constrain with")
    return parser.parse_args(argv)


def _report_startup(window: Any, bridge: Any) -> None:
    """For benchmarks/gui_bench.py: print a JSON line when the window first paints and one
    when the model is ready, then quit."""
    from PySide6.QtCore import QEvent, QObject
    from PySide6.QtWidgets import QApplication

    def emit(event: str, **extra: Any) -> None:
        print(
            json.dumps({"event": event, "t_s": time.perf_counter() - _LAUNCHED, **extra}),
            flush=True,
        )

    # A load that ends before the first paint (a folder that is not there is refused at
    # once) is reported after it: the window is shown either way, then the model's outcome.
    waiting: list[tuple[str, dict[str, Any]]] = []

    class FirstPaint(QObject):
        def eventFilter(self, watched: QObject, event: QEvent) -> bool:
            if event.type() == QEvent.Type.Paint:
                window.removeEventFilter(self)
                window._startup_filter = None
                emit("shown", model_loading=bridge.loading or bridge.model_info is None)
                for name, extra in waiting:
                    outcome(name, **extra)
            return False

    window._startup_filter = FirstPaint(window)
    window.installEventFilter(window._startup_filter)

    def outcome(event: str, **extra: Any) -> None:
        if window._startup_filter is not None:
            waiting.append((event, extra))
            return
        emit(event, **extra)
        QApplication.quit()

    def ready(_info: object) -> None:
        outcome("model_ready")

    def failed(message: str) -> None:
        outcome("model_failed", error=message)

    bridge.modelLoaded.connect(ready)
    bridge.loadFailed.connect(failed)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.diagnostics:
        from app.diagnostics import command_line_report
        from app.paths import default_data_dir

        print(command_line_report(args.data_dir or default_data_dir()))
        return 0
    if args.self_test:
        from app.self_test import run_self_test
        from engine import logs

        logs.setup_logging("info")  # the same folder as the app's log
        try:
            return run_self_test(args.model or "default")
        finally:
            logs.close_logging()

    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QMessageBox

    from app.application import build_window, create_application
    from app.jobs.engine_bridge import EngineBridge
    from app.paths import default_data_dir
    from app.single_instance import SingleInstance, forward_to_running
    from app.store import Store
    from app.store.db import DatabaseBusy

    app, file_opener = create_application(sys.argv[:1])
    data_dir = args.data_dir or default_data_dir()
    files = [str(Path(f).resolve()) for f in args.files]
    instance = SingleInstance(data_dir)
    if not instance.claimed:  # this data folder is open in a running Corral: hand over
        if forward_to_running(data_dir, files):
            print("Corral is already running; its window was brought forward.", file=sys.stderr)
            return 0
        QMessageBox.warning(None, "Corral", f"Corral is already running with {data_dir}.")
        return 1
    try:
        store = Store.open(data_dir)
    except DatabaseBusy as exc:
        QMessageBox.critical(None, "Corral", f"Corral cannot open its conversations: {exc}.")
        return 1
    bridge = EngineBridge()
    # the app's parts, the window over them, the log file and the crash hooks
    window = build_window(store, bridge, diagnostics=True)
    file_opener.attach(window.files.open)
    instance.activated.connect(window.bring_forward)
    window.show()
    if store.notice:  # the old database was set aside: say where it is
        notice = store.notice
        QTimer.singleShot(0, lambda: QMessageBox.warning(window, "Corral", notice))
    spec = args.model or store.get_setting("model_spec") or "default"
    QTimer.singleShot(0, lambda: window.models.load(spec))
    QTimer.singleShot(0, window.mcp.start)  # servers start once the window is up
    if files:
        QTimer.singleShot(0, lambda: window.files.open(files))
    if args.report_startup:
        _report_startup(window, bridge)
    code = app.exec()
    window.save_state()
    window.core.close()  # MCP servers, then the engine
    store.close()
    instance.close()
    return code


if __name__ == "__main__":
    sys.exit(main())
