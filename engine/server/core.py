"""What every dialect shares below its translation layer: reading a body, the model check,
admission (the in-flight count and the queue limit), the engine call, the event channel,
and a client that goes away cancelling its reply.

A dialect (OpenAI's completions, Anthropic's Messages, OpenAI's Responses) reads its body
with `Core.read`, translates it into a `Prepared` request, and hands it to `Core.serve`
with a `StreamWriter` for its stream and a function that builds its whole-reply JSON.
Engine callbacks arrive on the engine thread and are handed to the event loop. A client
that goes away cancels its generation: the engine stops within one prefill chunk or one
token and keeps what it computed in the prompt cache.
"""

from __future__ import annotations

import asyncio
import functools
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from engine.api import EngineAPI
from engine.errors import CorralError, EngineBusyError, EngineClosedError
from engine.runtime.context import CONTEXT_LENGTH_EXCEEDED
from engine.runtime.handle import RequestHandle
from engine.server.activity import RequestRecord, ServerActivity
from engine.server.compat import Dialect, note_headers, screen
from engine.server.config import ServerConfig
from engine.server.context_scaling import reported, scale_factor, scaled_result
from engine.server.errors import APIError, from_validation_error, param_path
from engine.server.keepalive import JSON_SPACE, Ticker
from engine.server.responses import IndexedEvent, error_message, failure, status_for
from engine.server.streaming import EventChannel, StreamWriter, relay
from engine.server.translate import ConstraintChecker, Prepared
from engine.types import (
    ChatEvent,
    ChatRequest,
    ChatResult,
    Finished,
    StopReason,
    TextDelta,
    ToolCallDelta,
)

Body = TypeVar("Body", bound=BaseModel)
CLIENT_GONE = 499  # nginx's "client closed request", for the log
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


class GenerationFailed(APIError):
    """The engine could not produce the reply (already in the log through its result)."""


class ClientGone(Exception):
    """The client disconnected before the reply was sent."""


async def _until_disconnect(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass


class Core:
    """The engine, the settings and the request log, and the steps every endpoint shares."""

    def __init__(self, engine: EngineAPI, config: ServerConfig, activity: ServerActivity) -> None:
        self.engine = engine
        self.config = config
        self.activity = activity
        self.check = ConstraintChecker(engine)

    async def logged(
        self, request: Request, endpoint: Callable[[Request, float], Awaitable[Response]]
    ) -> Response:
        """`endpoint(request, arrival time)`, with a refusal before the engine call logged."""
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

    async def prepare(self, translate: Callable[[], Prepared], compiles: bool) -> Prepared:
        """`translate()`, off the event loop when it `compiles` a schema, grammar or tools
        (that must not stall the other requests)."""
        return await run_in_threadpool(translate) if compiles else translate()

    async def read(
        self, request: Request, model: type[Body], dialect: Dialect | None = None
    ) -> Body:
        """The JSON body as `model`, after `dialect`'s row of the compatibility table
        (engine/server/compat.py); APIError naming what is wrong (type, size, field)."""
        data = await self.read_json(request)
        if dialect is not None:
            data = screen(dialect, data)
            note_headers(request.headers)
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            raise from_validation_error(exc) from None

    async def read_json(self, request: Request, limit: int | None = None) -> dict[str, Any]:
        """The body as a JSON object, read up to `limit` bytes (the server's body limit by
        default) and no further; APIError naming what is wrong (type, size, JSON)."""
        content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if content_type != "application/json":
            raise APIError(
                415,
                f"Content-Type must be application/json, got {content_type or 'none'}",
                code="unsupported_media_type",
            )
        limit = self.config.max_body_bytes if limit is None else limit
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise _too_large(limit)
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise _too_large(limit)
            chunks.append(chunk)
        return _parse_json(b"".join(chunks))

    def check_model(self, wanted: str | None) -> str:
        """The loaded model's name, which answers a request naming `wanted`: 404 for another
        name unless the server serves any name; 503 while no model is loaded."""
        info = self.engine.snapshot.model
        if info is None:
            raise APIError(
                503, "no model is loaded yet; try again shortly", code="model_not_loaded"
            )
        if wanted is not None and wanted != info.name and not self.config.serve_any_model_name:
            raise unknown_model(wanted, info.name)
        return info.name

    async def serve(
        self,
        request: Request,
        arrived: float,
        prepared: Prepared,
        *,
        stream: bool,
        writer: StreamWriter,
        whole: Callable[[list[ChatResult]], dict[str, Any]],
    ) -> Response:
        """Run `prepared` on the engine and answer: streamed through `writer`, or as the
        JSON `whole(results)` builds once every reply has finished."""
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

        factor = self.report_factor()

        def on_event(index: int, event: ChatEvent) -> None:  # engine thread
            if not first_token and isinstance(event, TextDelta | ToolCallDelta):
                first_token.append(time.perf_counter())
            if isinstance(event, Finished):
                results[index] = event.result
                done = [r for r in results if r is not None]
                if len(done) == n:
                    ttft = (first_token[0] - started) * 1e3 if first_token else None
                    self.activity.end(_record(arrived, endpoint, stream, prepared, done, ttft))
                if failure([event.result]) is None:  # the client's counts (the log's are real)
                    event = Finished(scaled_result(event.result, factor))
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
        gone = asyncio.ensure_future(_until_disconnect(request))
        keep_alive = self.config.keep_alive_s or None
        try:
            # The first events say whether the engine took the request (an error is still
            # an HTTP status); past a keep-alive's wait the reply starts without them.
            events = await _next(channel, gone, keep_alive)
            if stream and _finished(events) < n:
                gone.cancel()  # the streaming response listens for the disconnect itself
                return StreamingResponse(
                    relay(writer, events, channel, handles, keep_alive),
                    media_type="text/event-stream",
                    headers=SSE_HEADERS,
                )
            while _finished(events) < n:
                more = await _next(channel, gone, keep_alive)
                if not more:  # silent for a keep-alive's wait: hold the connection open
                    gone.cancel()
                    return self._held(request, events, channel, handles, whole, n)
                events += more
        except ClientGone:
            for handle in handles:
                handle.cancel()
            return Response(status_code=CLIENT_GONE)
        finally:
            gone.cancel()
        finished = _results(events)
        raise_for_results(finished, self._context_length())
        if stream:  # finished before any token: a one-shot stream
            return StreamingResponse(
                relay(writer, events, None, handles), media_type="text/event-stream"
            )
        return JSONResponse(whole(finished))

    def reported(self, tokens: int) -> int:
        """A token count as clients are told it (`--report-context`)."""
        return reported(tokens, self.report_factor())

    def report_factor(self) -> float:
        """How much larger the token counts clients are told are than the real ones
        (`--report-context`, engine.server.context_scaling)."""
        return scale_factor(self.config.report_context, self._context_length())

    def _context_length(self) -> int | None:
        info = self.engine.snapshot.model
        return info.context_length if info is not None else None

    def _held(
        self,
        request: Request,
        events: list[IndexedEvent],
        channel: EventChannel,
        handles: list[RequestHandle],
        whole: Callable[[list[ChatResult]], dict[str, Any]],
        n: int,
    ) -> Response:
        """A whole-JSON reply still being computed, its connection held open by a space
        every keep-alive (engine.server.keepalive); a failure after this point is its
        error body under the 200 already sent."""
        ticker = Ticker(self.config.keep_alive_s)
        path = request.url.path

        def body() -> bytes:
            finished = _results(events)
            try:
                raise_for_results(finished, self._context_length())
                return bytes(JSONResponse(whole(finished)).body)
            except APIError as exc:
                return bytes(exc.response(path).body)

        async def held() -> AsyncIterator[bytes]:
            try:
                yield JSON_SPACE
                while _finished(events) < n:
                    batch = await ticker.next(channel.next_batch)
                    if batch is None:
                        yield JSON_SPACE
                    else:
                        events.extend(batch)
                yield body()
            finally:
                ticker.close()
                for handle in handles:
                    if not handle.done():
                        handle.cancel()  # the client went away

        return StreamingResponse(held(), media_type="application/json", headers=SSE_HEADERS)


def prompt_length(request: ChatRequest, loaded: Any) -> int:
    """How many prompt tokens the engine reads for `request` (run on the engine thread,
    `loaded` its model), computed as generation computes them: with the tools' prompt,
    or continuing a last assistant message. APIError(400) for a conversation the chat
    template cannot render."""
    if loaded is None:
        raise APIError(503, "no model is loaded yet; try again shortly", code="model_not_loaded")
    from engine.runtime.reply import request_prompt

    try:
        tokens, _ = request_prompt(loaded.tokenizer, request, loaded.info.reasoning)
    except ValueError as exc:  # ToolDefinitionError is one too
        raise APIError(400, str(exc), code="invalid_request") from None
    return len(tokens)


async def count_prompt(core: Core, request: ChatRequest) -> int:
    """`prompt_length` of `request` on the engine's thread (real tokens: `Core.reported`
    gives what clients are told); 501 where the model lives in another process (a
    distributed group)."""
    run = core.engine.run(functools.partial(prompt_length, request))
    try:
        return await asyncio.wrap_future(run)
    except APIError:
        raise
    except CorralError as exc:
        raise APIError(501, f"cannot count tokens here: {exc}", code="not_supported") from None


def unknown_model(wanted: str, loaded: str) -> APIError:
    return APIError(
        404,
        f"model {wanted!r} is not loaded; this server serves {loaded!r} (see GET /v1/models, "
        "or start it with --serve-any-model-name to answer any name with the loaded model)",
        param="model",
        code="model_not_found",
    )


def _too_large(limit: int) -> APIError:
    return APIError(
        413, f"the body is larger than the limit of {limit:,} bytes", code="body_too_large"
    )


def _parse_json(raw: bytes) -> dict[str, Any]:
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
    return data


async def _next(
    channel: EventChannel, gone: asyncio.Future[None], timeout: float | None = None
) -> list[IndexedEvent]:
    """The channel's next events; [] when `timeout` seconds pass first (an event left
    unread stays in the channel); ClientGone when the client disconnects first."""
    get = asyncio.ensure_future(channel.next_batch())
    waiting: set[asyncio.Future[Any]] = {get, gone}
    done, _ = await asyncio.wait(waiting, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    if get in done:
        return get.result()
    get.cancel()
    if gone in done:
        raise ClientGone
    return []


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


def raise_for_results(results: list[ChatResult], context_length: int | None = None) -> None:
    """APIError for a request whose replies the engine could not all produce. A prompt
    that leaves the reply no room (engine.runtime.context says what that means) is worded
    as each API words it, with both numbers: OpenAI's `context_length_exceeded` and
    Anthropic's "prompt is too long: N tokens > M maximum", M the most prompt tokens that
    leave the reply room (the reason follows in brackets where it is not simply the
    context's length)."""
    failed = failure(results)
    if failed is None:
        return
    message = error_message(failed)
    if failed.error_code == CONTEXT_LENGTH_EXCEEDED:
        tokens = failed.stats.prompt_tokens
        maximum = failed.max_prompt_tokens
        if maximum is None:  # an engine that did not say: the context's length
            maximum = max(0, (context_length or tokens) - 1)
        anthropic = f"prompt is too long: {tokens} tokens > {maximum} maximum"
        if not (context_length and tokens >= context_length and maximum == context_length - 1):
            anthropic += f" ({message})"
        raise GenerationFailed(
            400,
            message,
            param="messages",
            code=CONTEXT_LENGTH_EXCEEDED,
            anthropic_message=anthropic,
        )
    raise GenerationFailed(
        status_for(failed), message, code=failed.error_code or "generation_failed"
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
        ending=(failed or result).ending.value,
    )
