"""The ASGI app: OpenAI chat and text completions, Anthropic's Messages and OpenAI's
Responses over one shared Engine.

Each dialect is a translation layer at the edge: its body is checked and translated into
a ChatRequest (engine/server/translate.py for completions, engine/server/anthropic/ and
engine/server/openai_responses/ for the others) and served by the shared core
(engine/server/core.py: admission, the engine call, streaming, cancellation), so every
dialect has the same constraints, tools, prompt cache, batching, limits and log.
"""

from __future__ import annotations

import functools
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from engine.api import EngineAPI
from engine.embeddings import EmbeddingSource
from engine.server.activity import ServerActivity
from engine.server.anthropic import MessagesAPI
from engine.server.batches import BatchAPI
from engine.server.config import ServerConfig
from engine.server.core import Core, unknown_model
from engine.server.embeddings import EmbeddingsAPI
from engine.server.errors import EXCEPTION_HANDLERS, APIError
from engine.server.guard import Guard
from engine.server.openai_responses import ResponsesAPI
from engine.server.responses import ChunkWriter, chat_completion, new_id, text_completion
from engine.server.schemas import ChatCompletionBody, CompletionBody
from engine.server.streaming import ChatChunkStream
from engine.server.translate import chat_request, completion_request, needs_worker


class Service:
    """The OpenAI completion endpoints and the model list. One per app; shares `engine`
    with whoever else uses it."""

    def __init__(self, core: Core, embeddings: EmbeddingsAPI) -> None:
        self.core = core
        self.engine = core.engine
        self.activity = core.activity
        self.embeddings = embeddings

    # ---- simple endpoints ----

    async def health(self, request: Request) -> Response:
        snapshot = self.engine.snapshot
        info = snapshot.model
        return JSONResponse(
            {
                "status": "ok" if info is not None else "loading",
                "model": info.name if info is not None else None,
                "active_requests": self.activity.active,
                "prompt_cache": snapshot.cache.to_dict(),  # memory and disk use, hit rates
            }
        )

    def _model_card(self) -> dict[str, Any]:
        info = self.engine.snapshot.model
        if info is None:
            raise APIError(503, "no model is loaded yet", code="model_not_loaded")
        return {
            "id": info.name,
            "object": "model",
            "created": 0,
            "owned_by": "corral",
            "context_length": info.context_length,
        }

    async def models(self, request: Request) -> Response:
        cards = [self._model_card(), *self.embeddings.cards()]
        return JSONResponse({"object": "list", "data": cards})

    async def model(self, request: Request) -> Response:
        wanted = request.path_params["model_id"]
        for other in self.embeddings.cards():
            if other["id"] == wanted:
                return JSONResponse(other)
        card = self._model_card()
        if wanted != card["id"]:
            raise unknown_model(wanted, card["id"])
        return JSONResponse(card)

    # ---- completions ----

    async def chat(self, request: Request) -> Response:
        return await self.core.logged(request, self._chat)

    async def completions(self, request: Request) -> Response:
        return await self.core.logged(request, self._completions)

    async def _chat(self, request: Request, arrived: float) -> Response:
        body = await self.core.read(request, ChatCompletionBody, "chat")
        return await self._serve(request, arrived, body, chat=True)

    async def _completions(self, request: Request, arrived: float) -> Response:
        body = await self.core.read(request, CompletionBody, "completions")
        return await self._serve(request, arrived, body, chat=False)

    async def _serve(self, request: Request, arrived: float, body: Any, *, chat: bool) -> Response:
        core = self.core
        model = core.check_model(body.model)
        translate = chat_request if chat else completion_request
        prepared = await core.prepare(
            functools.partial(translate, body, core.config, core.check), needs_worker(body)
        )
        completion_id = new_id("chatcmpl" if chat else "cmpl")
        options = body.stream_options
        top = prepared.request.logprobs or 0
        writer = ChunkWriter(
            completion_id,
            model,
            chat=chat,
            include_usage=bool(body.stream and options and options.include_usage),
            warnings=prepared.warnings,
            n=prepared.n,
            top=top,
        )
        build = chat_completion if chat else text_completion
        return await core.serve(
            request,
            arrived,
            prepared,
            stream=body.stream,
            writer=ChatChunkStream(writer),
            whole=lambda results: build(completion_id, model, results, prepared.warnings, top),
        )


def create_app(
    engine: EngineAPI,
    config: ServerConfig,
    activity: ServerActivity,
    embeddings: EmbeddingSource | None = None,
) -> Starlette:
    """The ASGI app serving `engine` (and `embeddings`' models) with `config`; requests are
    counted in `activity`."""
    core = Core(engine, config, activity)
    vectors = EmbeddingsAPI(core, embeddings)
    service = Service(core, vectors)
    messages = MessagesAPI(core)
    responses = ResponsesAPI(core)
    batches = BatchAPI(core)
    routes = [
        Route("/health", service.health, methods=["GET"]),
        Route("/", service.health, methods=["GET"]),  # agents' connectivity check (HEAD /)
        Route("/v1/models", service.models, methods=["GET"]),
        Route("/v1/models/{model_id:path}", service.model, methods=["GET"]),
        Route("/v1/chat/completions", service.chat, methods=["POST"]),
        Route("/v1/completions", service.completions, methods=["POST"]),
        *messages.routes(),
        *responses.routes(),
        *batches.routes(),
        *vectors.routes(),
    ]
    middleware = []
    if config.cors_origins:  # outermost: preflight requests carry no key
        middleware.append(
            Middleware(
                CORSMiddleware,
                allow_origins=config.cors_origins,
                allow_methods=["GET", "POST", "DELETE"],
                allow_headers=[
                    "Authorization",
                    "Content-Type",
                    "x-api-key",
                    "anthropic-version",
                    "anthropic-beta",
                ],
            )
        )
    middleware.append(Middleware(Guard, config=config, activity=activity))
    app = Starlette(
        routes=routes,
        middleware=middleware,
        exception_handlers=EXCEPTION_HANDLERS,
    )
    app.state.batches = batches  # HTTPServer.stop stops its worker
    return app
