"""`POST /v1/embeddings` in OpenAI's shape and `POST /v1/rerank` (and Cohere's `/v2/rerank`)
in the shape Cohere's and Jina's clients send, over the server's embedding and reranker
models (engine.embeddings).

A request names its model by `model` (none: the first of its kind the server was started
with). Inputs are checked here, each refusal a 400 naming its field (`input[2]`,
`documents[0].text`); the model's thread does the work, many inputs per forward pass.
"""

from __future__ import annotations

import asyncio
import base64
import uuid
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, Literal, TypeVar

import numpy as np
from pydantic import BaseModel, ConfigDict, Field
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from engine.embeddings import EmbeddingModel, EmbeddingSource, Kind, shorten
from engine.errors import EmbeddingInputError, EngineClosedError
from engine.server.activity import RequestRecord
from engine.server.core import Core
from engine.server.errors import APIError

MAX_INPUTS = 2048  # OpenAI's limit on inputs per request
MAX_DOCUMENTS = 1000  # Cohere's limit on documents per rerank
T = TypeVar("T")


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True)


class EmbeddingsBody(_Body):
    input: Any  # a string, strings, a token array or token arrays: checked by `_inputs`
    model: str | None = None
    encoding_format: Literal["float", "base64"] = "float"
    dimensions: int | None = Field(default=None, ge=1)
    user: str | None = None


class RerankBody(_Body):
    query: str
    documents: list[Any]  # strings, or objects with `text`: checked by `_documents`
    model: str | None = None
    top_n: int | None = Field(default=None, ge=1)
    return_documents: bool = True


def _inputs(value: Any) -> tuple[list[str | list[int]], bool]:
    """The inputs of an embeddings body, and whether it gave one (a string or one token
    array) rather than a list; APIError naming the input at fault."""

    def bad(message: str, param: str = "input") -> APIError:
        return APIError(400, f"{param}: {message}", param=param, code="invalid_value")

    def tokens(items: list[Any], param: str) -> list[int]:
        if not items:
            raise bad("empty; give at least one token", param)
        for j, t in enumerate(items):
            if not isinstance(t, int) or isinstance(t, bool):
                raise bad("a token array holds only integer token ids", f"{param}[{j}]")
        return items

    if isinstance(value, str):
        if not value:
            raise bad("empty; give some text")
        return [value], True
    if not isinstance(value, list) or not value:
        raise bad("a string, an array of strings, or token arrays (and not empty)")
    if len(value) > MAX_INPUTS:
        raise bad(f"{len(value)} inputs; at most {MAX_INPUTS} per request")
    if all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return [tokens(value, "input")], True
    out: list[str | list[int]] = []
    for i, item in enumerate(value):
        param = f"input[{i}]"
        if isinstance(item, str):
            if not item:
                raise bad("empty; give some text", param)
            out.append(item)
        elif isinstance(item, list):
            out.append(tokens(item, param))
        else:
            raise bad("each input is a string or an array of token ids", param)
    return out, False


def _documents(value: list[Any]) -> list[tuple[str, dict[str, Any]]]:
    """Each document's text and what a result echoes of it; APIError naming the one at
    fault."""
    if not value:
        raise APIError(400, "documents: empty; give at least one", param="documents")
    if len(value) > MAX_DOCUMENTS:
        raise APIError(
            400,
            f"documents: {len(value)} documents; at most {MAX_DOCUMENTS} per request",
            param="documents",
        )
    out = []
    for i, doc in enumerate(value):
        if isinstance(doc, str):
            out.append((doc, {"text": doc}))
        elif isinstance(doc, dict) and isinstance(doc.get("text"), str):
            out.append((doc["text"], doc))
        else:
            param = f"documents[{i}]" + (".text" if isinstance(doc, dict) else "")
            raise APIError(
                400,
                f"{param}: each document is a string or an object with a `text` string",
                param=param,
                code="invalid_value",
            )
    return out


def encode_vector(vector: np.ndarray, encoding: str) -> list[float] | str:
    """A vector as OpenAI sends it: floats, or base64 of little-endian float32 (what the
    `openai` client asks for by default and decodes)."""
    if encoding == "base64":
        return base64.b64encode(vector.astype("<f4").tobytes()).decode("ascii")
    return [float(x) for x in vector.tolist()]


class EmbeddingsAPI:
    """The embeddings and rerank endpoints over `core` and `models`."""

    def __init__(self, core: Core, models: EmbeddingSource | None) -> None:
        self.core = core
        self.models = models

    def routes(self) -> list[BaseRoute]:
        return [
            Route("/v1/embeddings", self.embeddings, methods=["POST"]),
            Route("/v1/rerank", self.rerank, methods=["POST"]),
            Route("/v2/rerank", self.rerank, methods=["POST"]),  # Cohere's v2 client
        ]

    def cards(self) -> list[dict[str, Any]]:
        """The embedding and reranker models as `/v1/models` lists them."""
        if self.models is None:
            return []
        return [
            {
                "id": m.info.name,
                "object": "model",
                "created": 0,
                "owned_by": "corral",
                "kind": m.info.kind,
                "dimensions": m.info.dimensions or None,
                "max_tokens": m.info.max_tokens,
            }
            for kind in ("embedding", "rerank")
            for m in self.models.of_kind(kind)
        ]

    def pick(self, wanted: str | None, kind: Kind) -> EmbeddingModel:
        """The model of `kind` a request naming `wanted` is served by; APIError saying
        which models there are otherwise."""
        endpoint = "/v1/embeddings" if kind == "embedding" else "/v1/rerank"
        flag = "--embedding-model" if kind == "embedding" else "--rerank-model"
        offered = self.models.of_kind(kind) if self.models is not None else []
        if not offered:
            raise APIError(
                404,
                f"this server has no {kind} model; start it with {flag} SPEC to serve {endpoint}",
                param="model",
                code="model_not_found",
            )
        if wanted is None:
            return offered[0]
        found = self.models.get(wanted) if self.models is not None else None
        if found is not None and found.kind == kind:
            return found
        names = ", ".join(repr(m.info.name) for m in offered)
        if found is not None:
            other = "a reranker" if kind == "embedding" else "an embedding model"
            raise APIError(
                400,
                f"model {wanted!r} is {other}; {endpoint} is served by {names}",
                param="model",
                code="wrong_model_kind",
            )
        chat = self.core.engine.snapshot.model
        if chat is not None and chat.name == wanted:
            raise APIError(
                400,
                f"model {wanted!r} is a chat model; {endpoint} is served by {names}",
                param="model",
                code="wrong_model_kind",
            )
        if self.core.config.serve_any_model_name:
            return offered[0]
        raise APIError(
            404,
            f"model {wanted!r} is not loaded; {endpoint} is served by {names}",
            param="model",
            code="model_not_found",
        )

    async def embeddings(self, request: Request) -> Response:
        return await self.core.logged(request, self._embeddings)

    async def rerank(self, request: Request) -> Response:
        return await self.core.logged(request, self._rerank)

    async def _run(self, work: Future[T], place: Callable[[int | None], str]) -> T:
        """The model's answer; a 400 naming the input it refused (`place(its index)`)."""
        try:
            return await asyncio.wrap_future(work)
        except EmbeddingInputError as exc:
            where = place(exc.index)
            raise APIError(400, f"{where}: {exc}", param=where, code="invalid_value") from None
        except EngineClosedError as exc:
            raise APIError(503, str(exc), code="model_not_loaded") from None

    async def _embeddings(self, request: Request, arrived: float) -> Response:
        body = await self.core.read(request, EmbeddingsBody)
        model = self.pick(body.model, "embedding")
        inputs, single = _inputs(body.input)
        info = model.info
        if body.dimensions is not None and body.dimensions != info.dimensions:
            if body.dimensions > info.dimensions:
                raise APIError(
                    400,
                    f"dimensions: {body.dimensions} is more than the {info.dimensions} "
                    f"of {info.name}'s vectors",
                    param="dimensions",
                    code="invalid_value",
                )
            if not info.matryoshka:
                raise APIError(
                    400,
                    f"dimensions: {info.name} ({info.family}) was not trained for shortened "
                    f"vectors (Matryoshka); its vectors have {info.dimensions} dimensions: "
                    "omit `dimensions` or ask for all of them",
                    param="dimensions",
                    code="invalid_value",
                )
        embedded = await self._run(
            model.embed(inputs), lambda i: "input" if single or i is None else f"input[{i}]"
        )
        vectors = embedded.vectors
        if body.dimensions is not None and body.dimensions < info.dimensions:
            vectors = shorten(vectors, body.dimensions, info.normalized)
        tokens = sum(embedded.tokens)
        self.core.activity.record(
            RequestRecord(arrived, request.url.path, 200, prompt_tokens=tokens)
        )
        return JSONResponse(
            {
                "object": "list",
                "data": [
                    {
                        "object": "embedding",
                        "index": i,
                        "embedding": encode_vector(vector, body.encoding_format),
                    }
                    for i, vector in enumerate(vectors)
                ],
                "model": info.name,
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }
        )

    async def _rerank(self, request: Request, arrived: float) -> Response:
        body = await self.core.read(request, RerankBody)
        model = self.pick(body.model, "rerank")
        if not body.query:
            raise APIError(400, "query: empty; give the text to rank against", param="query")
        documents = _documents(body.documents)
        ranked = await self._run(
            model.rerank(body.query, [t for t, _ in documents]),
            lambda i: "query" if i is None else f"documents[{i}]",
        )
        order = sorted(range(len(documents)), key=lambda i: (-ranked.scores[i], i))
        results = []
        for i in order[: body.top_n]:
            result: dict[str, Any] = {"index": i, "relevance_score": ranked.scores[i]}
            if body.return_documents:
                result["document"] = documents[i][1]
            results.append(result)
        self.core.activity.record(
            RequestRecord(arrived, request.url.path, 200, prompt_tokens=ranked.tokens)
        )
        return JSONResponse(
            {
                "id": f"rerank-{uuid.uuid4().hex[:24]}",
                "object": "rerank",
                "model": model.info.name,
                "results": results,
                "usage": {"prompt_tokens": ranked.tokens, "total_tokens": ranked.tokens},
            }
        )
