"""What guarding llguidance against deep grammars costs (part of the `constraints` section).

Two ways keep a too-deep grammar from crashing the process: checking its depth in Python
before native code sees it (what Corral does, `engine.constraints.limits`), or compiling
every new grammar first in a child process. Measured side by side on the grammar a new user
drops first and on a tool set's grammar: the depth check's time, the whole in-process check
(depth check, conversion, llguidance's compile for the model's tokenizer), and the same
grammar compiled in a fresh child process (Python start, llguidance import, compile; no
model tokenizer even, so the child's figure is a lower bound). Medians in ms.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from engine.constraints.limits import check_lark, check_schema_text
from engine.constraints.sources import constraint_from_file
from engine.constraints.tokenizer import ll_tokenizer
from engine.constraints.validate import to_grammar, validate_constraint
from engine.runtime.sampling import end_token_ids

DROPPED_GRAMMAR = Path(__file__).resolve().parents[1] / "resources" / "grammars" / "recipe.json"

_CHILD = """
import sys
from llguidance import LLMatcher
grammar = sys.stdin.read()
is_error, _ = LLMatcher.validate_grammar_with_warnings(grammar, None)
print(int(is_error))
"""


def _ms(started: float) -> float:
    return (time.perf_counter() - started) * 1e3


def measure_depth_check(tokenizer: Any, repeats: int = 3) -> dict[str, Any]:
    """The guard's figures for the model's `tokenizer` (see the module docstring)."""
    text = DROPPED_GRAMMAR.read_text(encoding="utf-8")
    lltok = ll_tokenizer(tokenizer, end_token_ids(tokenizer))
    spec = constraint_from_file(DROPPED_GRAMMAR)
    grammar = to_grammar(spec)
    tool_lark = _tool_grammar_lark(tokenizer)
    depth: list[float] = []
    lark_depth: list[float] = []
    whole: list[float] = []
    child: list[float] = []
    for _ in range(repeats):
        started = time.perf_counter()
        check_schema_text(text)
        depth.append(_ms(started))
        started = time.perf_counter()
        check_lark(tool_lark)
        lark_depth.append(_ms(started))
        started = time.perf_counter()
        report = validate_constraint(constraint_from_file(DROPPED_GRAMMAR), lltok)
        whole.append(_ms(started))
        assert report.ok, report.summary()
        started = time.perf_counter()
        run = subprocess.run(
            [sys.executable, "-c", _CHILD], input=grammar, capture_output=True, text=True
        )
        child.append(_ms(started))
        assert run.stdout.strip() == "0", run.stderr
    check = statistics.median(depth)
    in_process = statistics.median(whole)
    return {
        "depth_check_ms": round(check, 3),
        "depth_check_tool_grammar_ms": round(statistics.median(lark_depth), 3),
        "grammar_check_in_process_ms": round(in_process, 2),
        "grammar_check_child_process_ms": round(statistics.median(child), 2),
        "depth_check_share": round(check / in_process, 4) if in_process else None,
    }


def _tool_grammar_lark(tokenizer: Any) -> str:
    """The Lark grammar Corral builds for the three built-in tools, for this model."""
    from engine.tools import prepare_tool_request
    from engine.tools.builtins import builtin_tools

    plan = prepare_tool_request(
        tokenizer, [{"role": "user", "content": "hi"}], builtin_tools(), "auto"
    )
    assert plan.constraint is not None
    return plan.constraint.source
