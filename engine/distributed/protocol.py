"""The local connection between Corral's process and rank 0: what goes over it (no MLX here).

Corral's process (the app, `serve`, `chat`) is not one of the ranks: it starts them with
`mlx.launch`, and rank 0 connects back over a Unix socket in a private folder, authenticated
with a key only local ranks inherit (`multiprocessing.connection`). Messages are tuples whose
first item says what they are:

Corral -> rank 0: ("hosts", names, settings) once, then ("load", call, spec),
("submit", id, request, grammar), ("cancel", id), ("kv_budget", call, bytes),
("check", call, spec), ("probe", call, steps), ("close", call).

rank 0 -> Corral: ("ready", pids), ("progress", call, LoadProgress), ("done", call, value),
("failed", call, kind, message), ("event", id, ChatEvent), ("snapshot", EngineSnapshot),
("group", GroupInfo).

A compiled grammar does not travel: its llguidance grammar text does, and rank 0 keeps the
compiled form per text, so a conversation's constraint still compiles once.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from engine.errors import CorralError, EngineClosedError, ModelLoadError
from engine.types import ChatRequest, ConstraintSpec, ValidationReport

KEY_ENV = "CORRAL_DIST_KEY"
FAMILY = "AF_UNIX"
HEARTBEAT = "\x1ecorral-heartbeat"  # a follower's stdout line: HEARTBEAT RANK LAST_SEQ
HEARTBEAT_S = 1.0


class DistributedError(CorralError):
    """The group of machines failed (a rank exited, stopped answering, or lost its network)."""


def strip_request(request: ChatRequest) -> tuple[ChatRequest, str | None]:
    """The request without its compiled grammar (which cannot travel), and that grammar's text."""
    spec = request.constraint
    if spec is None or spec.compiled is None:
        return request, None
    plain = dataclasses.replace(spec, compiled=None)
    return dataclasses.replace(request, constraint=plain), spec.compiled.grammar


def strip_report(report: ValidationReport) -> ValidationReport:
    """A validation report that can travel (its spec without the compiled grammar)."""
    return dataclasses.replace(report, spec=dataclasses.replace(report.spec, compiled=None))


def with_grammar(spec: ConstraintSpec, compiled: Any) -> ConstraintSpec:
    """`spec` carrying `compiled` again."""
    return dataclasses.replace(spec, compiled=compiled)


_ERRORS: dict[str, type[Exception]] = {
    "model": ModelLoadError,
    "closed": EngineClosedError,
    "value": ValueError,
    "corral": CorralError,
    "distributed": DistributedError,
}


def error_kind(exc: BaseException) -> str:
    """How an exception raised on rank 0 is named over the connection."""
    for kind, cls in _ERRORS.items():
        if type(exc) is cls:
            return kind
    return "corral" if isinstance(exc, CorralError) else "other"


def rebuild_error(kind: str, message: str) -> Exception:
    """The exception for a ("failed", call, kind, message) message."""
    cls = _ERRORS.get(kind)
    return cls(message) if cls is not None else RuntimeError(message)
