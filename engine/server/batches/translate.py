"""One batch line through the online endpoints' own translation and response shapes: a
chat completion line is checked and translated by `engine.server.translate.chat_request`
and answered by `chat_completion`, a Responses line by `responses_request` and
`response_json`, so a batch line keeps every guarantee of the endpoint it names (schemas,
grammars, tools, limits), refusing the same bodies with the same errors. What a batch
cannot do (streaming, `previous_response_id`) is refused per line."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from engine.server.compat import screen
from engine.server.core import Core
from engine.server.errors import APIError, from_validation_error
from engine.server.openai_responses.replies import response_id, response_json, response_settings
from engine.server.openai_responses.schemas import ResponsesBody
from engine.server.openai_responses.translate import responses_request
from engine.server.responses import (
    chat_completion,
    error_message,
    failure,
    new_id,
    status_for,
)
from engine.server.schemas import ChatCompletionBody
from engine.server.translate import Prepared, chat_request
from engine.types import ChatRequest, ChatResult


@dataclass
class Line:
    """A translated line: its requests (one per choice) and how to answer their results."""

    requests: list[ChatRequest]
    answer: Callable[[list[ChatResult]], dict[str, Any]]


def translate_line(core: Core, endpoint: str, body: dict[str, Any]) -> Line:
    """The line's requests; APIError as the online endpoint would answer it."""
    try:
        # The compatibility table first, as online: a field a client sends that changes
        # nothing is accepted on a batch line too, an unimplemented one refused by name.
        if endpoint == "/v1/chat/completions":
            return _chat(core, ChatCompletionBody.model_validate(screen("chat", body)))
        return _responses(core, ResponsesBody.model_validate(screen("responses", body)))
    except ValidationError as exc:
        raise from_validation_error(exc) from None


def _requests(prepared: Prepared) -> list[ChatRequest]:
    n = prepared.n
    return prepared.request.alternatives(n) if n > 1 else [prepared.request]


def _chat(core: Core, body: ChatCompletionBody) -> Line:
    if body.stream:
        raise APIError(400, "stream: a batch line cannot stream", param="stream")
    route = core.route(body.model)
    model = route.model
    prepared = route.carry(chat_request(body, route.config, route.check))
    top = prepared.request.logprobs or 0
    return Line(
        _requests(prepared),
        lambda results: chat_completion(new_id("chatcmpl"), model, results, prepared.warnings, top),
    )


def _responses(core: Core, body: ResponsesBody) -> Line:
    if body.stream:
        raise APIError(400, "stream: a batch line cannot stream", param="stream")
    if body.previous_response_id is not None:
        raise APIError(
            400,
            "previous_response_id: a batch line stands alone; send the whole input",
            param="previous_response_id",
        )
    route = core.route(body.model)
    model = route.model
    prepared = route.carry(responses_request(body, None, route.config, route.check).prepared)
    settings = response_settings(body, model, prepared.warnings)
    return Line(
        _requests(prepared),
        lambda results: response_json(response_id(), int(time.time()), settings, results[0]),
    )


def answer(line: Line, results: list[ChatResult]) -> tuple[int, dict[str, Any]]:
    """The status and body the online endpoint would have answered with these results."""
    failed = failure(results)
    if failed is not None:
        error = APIError(
            status_for(failed), error_message(failed), code=failed.error_code or "generation_failed"
        )
        return error.status, error.body()
    return 200, line.answer(results)
