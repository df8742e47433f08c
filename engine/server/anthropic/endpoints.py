"""Anthropic's Messages endpoints: `POST /v1/messages` and `POST /v1/messages/count_tokens`,
served by the shared core (engine/server/core.py). Errors on these paths take Anthropic's
shape (engine/server/errors.py); the `anthropic-version` and `anthropic-beta` headers are
accepted and change nothing."""

from __future__ import annotations

import functools
import uuid

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from engine.server.activity import RequestRecord
from engine.server.anthropic.replies import MessageStream, message
from engine.server.anthropic.schemas import CountTokensBody, MessagesBody
from engine.server.anthropic.translate import compiles, messages_request
from engine.server.core import Core, count_prompt


def message_id() -> str:
    return f"msg_{uuid.uuid4().hex[:24]}"


class MessagesAPI:
    """The Messages endpoints over `core`."""

    def __init__(self, core: Core) -> None:
        self.core = core

    def routes(self) -> list[BaseRoute]:
        return [
            Route("/v1/messages", self.create, methods=["POST"]),
            Route("/v1/messages/count_tokens", self.count_tokens, methods=["POST"]),
        ]

    async def create(self, request: Request) -> Response:
        return await self.core.logged(request, self._create)

    async def count_tokens(self, request: Request) -> Response:
        return await self.core.logged(request, self._count)

    async def _create(self, request: Request, arrived: float) -> Response:
        core = self.core
        body = await core.read(request, MessagesBody, "messages")
        model = core.check_model(body.model)
        prepared = await core.prepare(
            functools.partial(messages_request, body, core.config, core.check), compiles(body)
        )
        reply_id = message_id()
        sequences = list(body.stop_sequences or [])
        return await core.serve(
            request,
            arrived,
            prepared,
            stream=body.stream,
            writer=MessageStream(reply_id, model, prepared.warnings, sequences),
            whole=lambda results: message(
                reply_id, model, results[0], prepared.warnings, sequences
            ),
        )

    async def _count(self, request: Request, arrived: float) -> Response:
        core = self.core
        body = await core.read(request, CountTokensBody, "messages")
        core.check_model(body.model)
        prepared = await core.prepare(
            functools.partial(messages_request, body, core.config, core.check), compiles(body)
        )
        count = await count_prompt(core, prepared.request)
        core.activity.record(RequestRecord(arrived, request.url.path, 200, prompt_tokens=count))
        return JSONResponse({"input_tokens": core.reported(count)})
