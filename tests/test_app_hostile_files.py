"""Hostile files dropped on the window: the app shows why they are refused and lives on.

The window runs in a child process (no model loaded: the check then compiles without a
tokenizer, the same native code), so a grammar that crashes the check would end that
process, not pytest.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from app_helpers import REPO

_DROP = """
import os, sys
os.environ["QT_QPA_PLATFORM"] = "offscreen"
import engine
from PySide6.QtWidgets import QApplication
from PySide6.QtCore import QThreadPool
from app.jobs.engine_bridge import EngineBridge
from app.store import Store
from app.application import build_window

app = QApplication([])
window = build_window(Store.open(sys.argv[1]), EngineBridge())
window.show()
error = window.constraint_bar.error
for path in sys.argv[2:]:
    window.files.open([path])
    while "Checking" in error.text() or not error.text():
        QThreadPool.globalInstance().waitForDone(100)
        app.processEvents()
    print(os.path.basename(path), "->", error.text().replace("\\n", " "), flush=True)
    error.clear()
print("ALIVE", flush=True)
window.close()
"""


def test_deep_grammars_dropped_on_the_window_are_refused(tmp_path: Path) -> None:
    chain = tmp_path / "chain.lark"
    chain.write_text(
        "start: r0\n" + "".join(f"r{i}: r{i + 1}\n" for i in range(2999)) + 'r2999: "x"\n'
    )
    defs = {
        f"d{i}": {"anyOf": [{"$ref": f"#/$defs/d{i + 1}"}, {"type": "null"}]} for i in range(1500)
    }
    defs["d1500"] = {"type": "integer"}
    deep = tmp_path / "deep.json"
    deep.write_text(json.dumps({"$ref": "#/$defs/d0", "$defs": defs}))
    run = subprocess.run(
        [sys.executable, "-c", _DROP, str(tmp_path / "data"), str(chain), str(deep)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, f"rc {run.returncode}: {run.stderr[-600:]}"
    lines = run.stdout.splitlines()
    assert lines[-1] == "ALIVE"
    assert "chain.lark" in lines[0] and "refer to one another 3,001 deep" in lines[0]
    assert "deep.json" in lines[1] and "nest 3,002 deep" in lines[1]
