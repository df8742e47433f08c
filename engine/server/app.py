"""The ASGI app: OpenAI-compatible endpoints over one shared Engine.

Each request is checked and translated into a ChatRequest (engine/server/translate.py),
submitted to the engine's queue, and answered from its events: engine callbacks arrive on
the engine thread and are handed to the event loop. A client that goes away cancels its
generation: the engine stops within one prefill chunk or one token and keeps what it
computed in the prompt cache.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from engine.api import EngineAPI
from engine.errors import EngineBusyError, EngineClosedError
from engine.server.activity import RequestRecord, ServerActivity
from engine.server.config import ServerConfig
from engine.server.errors import (
    EXCEPTION_HANDLERS,
    APIError,
    from_validation_error,
    param_path,
)
from engine.server.guard import Guard
from engine.server.responses import (
    ChunkWriter,
    IndexedEvent,
    chat_completion,
    error_message,
    failure,
    new_id,
    status_for,
    text_completion,
)
from engine.server.schemas import ChatCompletionBody, CompletionBody
from engine.server.streaming import EventChannel, sse_stream
from engine.server.translate import (
    Check,
    ConstraintChecker,
    Prepared,
    chat_request,
    completion_request,
    needs_worker,
)
from engine.types import ChatEvent, ChatResult, Finished, StopReason, TextDelta, ToolCallDelta

Body = TypeVar("Body", bound=BaseModel)
CLIENT_GONE = 499  # nginx's "client closed request", for the log


class GenerationFailed(APIError):
    """The engine could not produce the reply (already in the log through its result)."""


class ClientGone(Exception):
    """The client disconnected before the reply was sent."""


async def _until_disconnect(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass


class Service:
    """The endpoints. One per app; shares `engine` with whoever else uses it."""

    def __init__(self, engine: EngineAPI, config: ServerConfig, activity: ServerActivity) -> None:
        self.engine = engine
        self.config = config
        self.activity = activity
        self.check = ConstraintChecker(engine)

    # ---- simple endpoints ----

    async def health(self, request: Request) -> Response:
        info = self.engine.snapshot.model
        return JSONResponse(
            {
                "status": "ok" if info is not None else "loading",
                "model": info.name if info is not None else None,
                "active_requests": self.activity.active,
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
        return JSONResponse({"object": "list", "data": [self._model_card()]})

    async def model(self, request: Request) -> Response:
        card = self._model_card()
        wanted = request.path_params["model_id"]
        if wanted != card["id"]:
            raise self._unknown_model(wanted, card["id"])
        return JSONResponse(card)

    @staticmethod
    def _unknown_model(wanted: str, loaded: str) -> APIError:
        return APIError(
            404,
            f"model {wanted!r} is not loaded; this server serves {loaded!r} (see GET /v1/models)",
            param="model",
            code="model_not_found",
        )

    # ---- completions ----

    async def chat(self, request: Request) -> Response:
        return await self._logged(request, self._chat)

    async def completions(self, request: Request) -> Response:
        return await self._logged(request, self._completions)

    async def _logged(
        self, request: Request, endpoint: Callable[[Request, float], Awaitable[Response]]
    ) -> Response:
        arrived = time.time()
        try:
            return await endpoint(request, arrived)
        except GenerationFailed:
            raise
        except APIError as exc:
            self.activity.record(
                RequestRecord(arrived, request.url.path, exc.status, error=exc.message)
            )
            raise

    async def _chat(self, request: Request, arrived: float) -> Response:
        body = await self._read(request, ChatCompletionBody)
        model = self._check_model(body.model)
        prepared = await self._prepare(chat_request, body)
        return await self._serve(request, arrived, prepared, body, model, chat=True)

    async def _completions(self, request: Request, arrived: float) -> Response:
        body = await self._read(request, CompletionBody)
        model = self._check_model(body.model)
        prepared = await self._prepare(completion_request, body)
        return await self._serve(request, arrived, prepared, body, model, chat=False)

    async def _prepare(
        self, translate: Callable[[Any, ServerConfig, Check], Prepared], body: Any
    ) -> Prepared:
        if needs_worker(body):  # compiling a schema, grammar or tools must not stall the loop
            return await run_in_threadpool(translate, body, self.config, self.check)
        return translate(body, self.config, self.check)

    async def _read(self, request: Request, model: type[Body]) -> Body:
        content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if content_type != "application/json":
            raise APIError(
                415,
                f"Content-Type must be application/json, got {content_type or 'none'}",
                code="unsupported_media_type",
            )
        limit = self.config.max_body_bytes
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise self._too_large(limit)
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise self._too_large(limit)
            chunks.append(chunk)
        raw = b"".join(chunks)
        try:
            data = json.loads(raw)
        except UnicodeDecodeError:
            raise APIError(400, "the body is not UTF-8 text", code="invalid_json") from None
        except json.JSONDecodeError as exc:
            raise APIError(
                400,
                f"the body is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}",
                code="invalid_json",
            ) from None
        except RecursionError:
            raise APIError(400, "the body is nested too deeply", code="invalid_json") from None
        except ValueError:  # Python refuses integers over 4300 digits (int_max_str_digits)
            raise APIError(
                400, "the body is not valid JSON: a number is too long", code="invalid_json"
            ) from None
        if not isinstance(data, dict):
            raise APIError(400, "the body must be a JSON object", code="invalid_json")
        if (where := _unencodable_text(data)) is not None:
            raise APIError(
                400,
                f"{where}: not valid Unicode text (a lone surrogate escape such as \\ud800)",
                param=where,
                code="invalid_value",
            )
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            raise from_validation_error(exc) from None

    @staticmethod
    def _too_large(limit: int) -> APIError:
        return APIError(
            413, f"the body is larger than the limit of {limit:,} bytes", code="body_too_large"
        )

    def _check_model(self, wanted: str | None) -> str:
        info = self.engine.snapshot.model
        if info is None:
            raise APIError(
                503, "no model is loaded yet; try again shortly", code="model_not_loaded"
            )
        if wanted is not None and wanted != info.name:
            raise self._unknown_model(wanted, info.name)
        return info.name

    async def _serve(
        self,
        request: Request,
        arrived: float,
        prepared: Prepared,
        body: Any,
        model: str,
        *,
        chat: bool,
    ) -> Response:
        if not self.activity.try_begin(self.config.max_queued_requests):
            raise APIError(
                503,
                f"the server is busy: {self.config.max_queued_requests} requests are already "
                "waiting or running; retry shortly",
                code="queue_full",
                headers={"Retry-After": "1"},
            )
        channel = EventChannel(asyncio.get_running_loop())
        started = time.perf_counter()
        first_token: list[float] = []
        endpoint = request.url.path
        n = prepared.n
        results: list[ChatResult | None] = [None] * n

        def on_event(index: int, event: ChatEvent) -> None:  # engine thread
            if not first_token and isinstance(event, TextDelta | ToolCallDelta):
                first_token.append(time.perf_counter())
            if isinstance(event, Finished):
                results[index] = event.result
                done = [r for r in results if r is not None]
                if len(done) == n:
                    ttft = (first_token[0] - started) * 1e3 if first_token else None
                    self.activity.end(_record(arrived, endpoint, body.stream, prepared, done, ttft))
            channel.push((index, event))

        requests = prepared.request.alternatives(n) if n > 1 else [prepared.request]
        try:
            handles = self.engine.submit_many(requests, on_event)
        except EngineBusyError as exc:
            refusal = APIError(503, str(exc), code="queue_full", headers={"Retry-After": "1"})
            self.activity.end(RequestRecord(arrived, endpoint, 503, error=refusal.message))
            raise refusal from None
        except EngineClosedError:  # the engine is shutting down under the server
            refusal = APIError(503, "the server is stopping", code="engine_closed")
            self.activity.end(RequestRecord(arrived, endpoint, 503, error=refusal.message))
            raise refusal from None
        except BaseException as exc:  # never leave the request counted in flight
            self.activity.end(RequestRecord(arrived, endpoint, 500, error=str(exc)))
            raise
        completion_id = new_id("chatcmpl" if chat else "cmpl")
        options = body.stream_options
        include_usage = bool(body.stream and options and options.include_usage)
        writer = ChunkWriter(
            completion_id,
            model,
            chat=chat,
            include_usage=include_usage,
            warnings=prepared.warnings,
            n=n,
            top=prepared.request.logprobs or 0,
        )
        gone = asyncio.ensure_future(_until_disconnect(request))
        try:
            events = await self._next(channel, gone)
            if body.stream and _finished(events) < n:
                gone.cancel()  # the streaming response listens for the disconnect itself
                return StreamingResponse(
                    sse_stream(writer, events, channel, handles),
                    media_type="text/event-stream",
                    headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
                )
            while _finished(events) < n:
                events += await self._next(channel, gone)
        except ClientGone:
            for handle in handles:
                handle.cancel()
            return Response(status_code=CLIENT_GONE)
        finally:
            gone.cancel()
        finished = _results(events)
        _raise_for_results(finished)
        if body.stream:  # finished before any token: a one-shot stream
            return StreamingResponse(
                sse_stream(writer, events, None, handles), media_type="text/event-stream"
            )
        build = chat_completion if chat else text_completion
        top = prepared.request.logprobs or 0
        return JSONResponse(build(completion_id, model, finished, prepared.warnings, top))

    @staticmethod
    async def _next(channel: EventChannel, gone: asyncio.Future[None]) -> list[IndexedEvent]:
        get = asyncio.ensure_future(channel.next_batch())
        waiting: set[asyncio.Future[Any]] = {get, gone}
        done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        if get not in done:
            get.cancel()
            raise ClientGone
        return get.result()


def _unencodable_text(data: Any) -> str | None:
    """Where `data` holds a string that is not valid Unicode (a lone surrogate, which JSON's
    \\u escapes can spell), as a param path; None if there is none. The tokenizer and
    the store cannot take such text, so it is refused here with its place named."""
    stack: list[tuple[Any, tuple[int | str, ...]]] = [(data, ())]
    while stack:
        value, loc = stack.pop()
        if isinstance(value, str):
            texts = [value]
        elif isinstance(value, dict):
            texts = list(value)
            stack.extend((v, (*loc, k)) for k, v in reversed(value.items()))
        elif isinstance(value, list):
            texts = []
            stack.extend((v, (*loc, i)) for i, v in reversed(list(enumerate(value))))
        else:
            continue
        for text in texts:
            if not text.isascii():
                try:
                    text.encode("utf-8")
                except UnicodeEncodeError:
                    return param_path(loc) or "body"
    return None


def _finished(events: list[IndexedEvent]) -> int:
    """How many choices have finished among `events`."""
    return sum(isinstance(event, Finished) for _, event in events)


def _results(events: list[IndexedEvent]) -> list[ChatResult]:
    """Each choice's result, in choice order."""
    found = {i: event.result for i, event in events if isinstance(event, Finished)}
    return [found[i] for i in sorted(found)]


def _raise_for_results(results: list[ChatResult]) -> None:
    """APIError for a request whose replies the engine could not all produce."""
    failed = failure(results)
    if failed is not None:
        raise GenerationFailed(
            status_for(failed), error_message(failed), code=failed.error_code or "generation_failed"
        )


def _record(
    arrived: float,
    endpoint: str,
    stream: bool,
    prepared: Prepared,
    results: list[ChatResult],
    ttft_ms: float | None,
) -> RequestRecord:
    """The log line of a request: its first choice's figures, every choice's tokens."""
    result = results[0]
    failed = failure(results)
    s = result.stats
    if failed is not None and failed.stop_reason == StopReason.CANCELLED:
        status = CLIENT_GONE
    elif failed is not None:
        status = status_for(failed)
    else:
        status = 200
    return RequestRecord(
        time=arrived,
        endpoint=endpoint,
        status=status,
        stream=stream,
        prompt_tokens=s.prompt_tokens,
        completion_tokens=sum(r.stats.generated_tokens for r in results),
        cached_tokens=s.cached_tokens,
        ttft_ms=round(ttft_ms, 1) if ttft_ms is not None else None,
        decode_tps=round(s.decode_tps, 1),
        constraint=prepared.constraint,
        stop_reason=(failed or result).stats.stop_reason,
        error=error_message(failed) if failed is not None and failed.error else None,
    )


def create_app(engine: EngineAPI, config: ServerConfig, activity: ServerActivity) -> Starlette:
    """The ASGI app serving `engine` with `config`; requests are counted in `activity`."""
    service = Service(engine, config, activity)
    routes = [
        Route("/health", service.health, methods=["GET"]),
        Route("/v1/models", service.models, methods=["GET"]),
        Route("/v1/models/{model_id:path}", service.model, methods=["GET"]),
        Route("/v1/chat/completions", service.chat, methods=["POST"]),
        Route("/v1/completions", service.completions, methods=["POST"]),
    ]
    middleware = []
    if config.cors_origins:  # outermost: preflight requests carry no key
        middleware.append(
            Middleware(
                CORSMiddleware,
                allow_origins=config.cors_origins,
                allow_methods=["GET", "POST"],
                allow_headers=["Authorization", "Content-Type"],
            )
        )
    middleware.append(Middleware(Guard, config=config, activity=activity))
    return Starlette(
        routes=routes,
        middleware=middleware,
        exception_handlers=EXCEPTION_HANDLERS,
    )
