"""Errors in the shape of the dialect the client speaks, never a traceback.

OpenAI's endpoints (chat and text completions, Responses) answer
`{"error": {"message", "type", "param", "code"}}`; Anthropic's (`/v1/messages...`) answer
`{"type": "error", "error": {"type", "message"}}`, with 529 where OpenAI's shape has 503
(the server is overloaded). Handlers turn APIError, request-model validation errors,
unknown routes and unexpected exceptions into that body with the right status.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse

log = logging.getLogger("corral.server")

_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    405: "invalid_request_error",
    413: "invalid_request_error",
    415: "invalid_request_error",
    429: "rate_limit_error",
    503: "server_overloaded",
}
_ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    413: "request_too_large",
    415: "invalid_request_error",
    429: "rate_limit_error",
    529: "overloaded_error",
}


def is_anthropic(path: str) -> bool:
    """Whether `path` is one of Anthropic's endpoints (its errors take Anthropic's shape)."""
    return path == "/v1/messages" or path.startswith("/v1/messages/")


MODEL_BUSY = "model_busy"  # a model of a pool could not load in time (engine.pool)
RETRY_BUSY_S = 5  # when to try again, for a model that could not load in time


class APIError(Exception):
    """An error answered to the client with `status` and an OpenAI error body."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        headers: Mapping[str, str] | None = None,
        anthropic_message: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code
        self.headers = headers
        # Where Anthropic's API words the same error its own way (clients match on it).
        self.anthropic_message = anthropic_message

    def body(self) -> dict[str, Any]:
        return error_body(self.status, self.message, self.param, self.code)

    @property
    def anthropic_status(self) -> int:
        """The status in Anthropic's API: 529 (overloaded) where OpenAI's has 503."""
        return 529 if self.status == 503 else self.status

    def anthropic_body(self) -> dict[str, Any]:
        status = self.anthropic_status
        kind = _ANTHROPIC_TYPES.get(status, "api_error")
        if self.anthropic_message is not None:
            return {"type": "error", "error": {"type": kind, "message": self.anthropic_message}}
        message = self.message
        if self.param and not message.startswith(self.param):  # the shape has no `param`
            message = f"{self.param}: {message}"
        return {"type": "error", "error": {"type": kind, "message": message}}

    def response(self, path: str = "") -> JSONResponse:
        """The error answered on `path`, in the shape of the API that path belongs to."""
        if is_anthropic(path):
            return JSONResponse(self.anthropic_body(), self.anthropic_status, headers=self.headers)
        return JSONResponse(self.body(), self.status, headers=self.headers)


def error_body(
    status: int, message: str, param: str | None = None, code: str | None = None
) -> dict[str, Any]:
    kind = _TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def param_path(loc: tuple[int | str, ...]) -> str:
    """A pydantic location as the client wrote it: ("messages", 0, "content") ->
    "messages[0].content"."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def from_validation_error(exc: ValidationError) -> APIError:
    """The first problem pydantic found, named by where it is in the body."""
    first = exc.errors(include_url=False)[0]
    # Union members add their type names to the location; they mean nothing to a client.
    loc = tuple(p for p in first["loc"] if not (isinstance(p, str) and "[" in p))
    loc = tuple(p for p in loc if p not in ("str", "list", "dict", "int", "float", "bool"))
    param = param_path(loc)
    kind = first["type"]
    if kind == "extra_forbidden":
        return APIError(
            400, f"unrecognized request argument: {param}", param=param, code="unknown_parameter"
        )
    if kind == "missing":
        return APIError(400, f"{param}: required", param=param, code="missing_required_parameter")
    given = first.get("input")
    shown = repr(given) if isinstance(given, int | float | str | bool) or given is None else ""
    message = f"{param}: {first['msg']}" + (f" (got {shown[:80]})" if shown else "")
    return APIError(400, message, param=param, code="invalid_value")


async def handle_api_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, APIError)
    return exc.response(request.url.path)


async def handle_http_exception(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 404:
        message = f"no such endpoint: {request.method} {request.url.path}"
    elif exc.status_code == 405:
        message = f"{request.method} is not allowed on {request.url.path}"
    else:
        message = str(exc.detail)
    return APIError(
        exc.status_code,
        message,
        code="not_found" if exc.status_code == 404 else None,
        headers=exc.headers,
    ).response(request.url.path)


async def handle_unexpected(request: Request, exc: Exception) -> JSONResponse:
    # The traceback goes to the server's log, never into the response.
    log.exception("unexpected error on %s %s", request.method, request.url.path)
    message = f"internal error ({type(exc).__name__}); the server log has the details"
    return APIError(500, message, code="internal_error").response(request.url.path)


EXCEPTION_HANDLERS = {
    APIError: handle_api_error,
    HTTPException: handle_http_exception,
    Exception: handle_unexpected,
}


def model_unavailable(exc: Exception) -> APIError:
    """The 503 for a model of a pool that could not be loaded: in time (its memory is held
    by models answering requests; with when to try again), or at all."""
    from engine.errors import ModelUnavailableError

    if isinstance(exc, ModelUnavailableError):
        retry = str(max(1, round(exc.retry_after_s)))
        return APIError(503, str(exc), code=MODEL_BUSY, headers={"Retry-After": retry})
    return APIError(503, str(exc), code="model_load_failed")
