"""OpenAI's Responses endpoints: `POST /v1/responses`, `GET` and `DELETE
/v1/responses/{id}`, and `POST /v1/responses/input_tokens`, served by the shared core
(engine/server/core.py). Stored responses live in a SQLite file in Corral's data folder
(engine/server/openai_responses/store.py)."""

from __future__ import annotations

import functools
import time
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from engine.server.activity import RequestRecord
from engine.server.config import data_dir
from engine.server.core import Core, count_prompt
from engine.server.errors import APIError
from engine.server.openai_responses.replies import (
    ResponseStream,
    response_id,
    response_json,
    response_settings,
)
from engine.server.openai_responses.schemas import InputTokensBody, ResponsesBody
from engine.server.openai_responses.store import ResponseStore
from engine.server.openai_responses.translate import Translated, compiles, responses_request
from engine.types import ChatMessage, ChatResult


class ResponsesAPI:
    """The Responses endpoints over `core`, with their store."""

    def __init__(self, core: Core) -> None:
        self.core = core
        config = core.config
        self.store = ResponseStore(
            config.responses_db or data_dir() / "responses.sqlite3",
            max_count=config.max_stored_responses,
            max_age_s=config.stored_response_days * 86400,
        )

    def routes(self) -> list[BaseRoute]:
        return [
            Route("/v1/responses", self.create, methods=["POST"]),
            Route("/v1/responses/input_tokens", self.input_tokens, methods=["POST"]),
            Route("/v1/responses/{response_id}", self.retrieve, methods=["GET"]),
            Route("/v1/responses/{response_id}", self.delete, methods=["DELETE"]),
        ]

    async def create(self, request: Request) -> Response:
        return await self.core.logged(request, self._create)

    async def input_tokens(self, request: Request) -> Response:
        return await self.core.logged(request, self._count)

    async def retrieve(self, request: Request) -> Response:
        found = await run_in_threadpool(self.store.get, request.path_params["response_id"])
        if found is None:
            raise self._not_found(request.path_params["response_id"])
        return JSONResponse(found[0])

    async def delete(self, request: Request) -> Response:
        rid = request.path_params["response_id"]
        if not await run_in_threadpool(self.store.delete, rid):
            raise self._not_found(rid)
        return JSONResponse({"id": rid, "object": "response", "deleted": True})

    @staticmethod
    def _not_found(rid: str, param: str | None = None) -> APIError:
        return APIError(
            404,
            f"no stored response {rid!r}: it was never stored (store: false), or it was "
            "deleted or has expired",
            param=param,
            code="response_not_found",
        )

    async def _translate(self, body: ResponsesBody) -> Translated:
        previous: list[ChatMessage] | None = None
        if body.previous_response_id is not None:
            found = await run_in_threadpool(self.store.get, body.previous_response_id)
            if found is None:
                raise self._not_found(body.previous_response_id, "previous_response_id")
            previous = found[1]
        core = self.core
        translate = functools.partial(responses_request, body, previous, core.config, core.check)
        if compiles(body):
            return await run_in_threadpool(translate)
        return translate()

    async def _create(self, request: Request, arrived: float) -> Response:
        core = self.core
        body = await core.read(request, ResponsesBody, "responses")
        model = core.check_model(body.model)
        translated = await self._translate(body)
        prepared = translated.prepared
        settings = response_settings(body, model, prepared.warnings)
        rid = response_id()

        def keep(result: ChatResult, response: dict[str, Any]) -> None:
            if body.store:
                reply: ChatMessage = {"role": "assistant", "content": result.text}
                if result.tool_calls:
                    reply["tool_calls"] = [
                        {
                            "id": c.id,
                            "type": "function",
                            "function": {"name": c.name, "arguments": c.arguments},
                        }
                        for c in result.tool_calls
                    ]
                self.store.put(response, [*translated.conversation, reply])

        def whole(results: list[ChatResult]) -> dict[str, Any]:
            response = response_json(rid, int(time.time()), settings, results[0])
            keep(results[0], response)
            return response

        return await core.serve(
            request,
            arrived,
            prepared,
            stream=body.stream,
            writer=ResponseStream(rid, settings, keep),
            whole=whole,
        )

    async def _count(self, request: Request, arrived: float) -> Response:
        core = self.core
        body = await core.read(request, InputTokensBody, "responses")
        core.check_model(body.model)
        translated = await self._translate(body)
        count = await count_prompt(core, translated.prepared.request)
        core.activity.record(RequestRecord(arrived, request.url.path, 200, prompt_tokens=count))
        return JSONResponse(
            {"object": "response.input_tokens", "input_tokens": core.reported(count)}
        )
