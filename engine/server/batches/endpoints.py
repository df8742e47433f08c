"""OpenAI's Files and Batch API over the worker: `POST /v1/files` (purpose `batch`),
`GET /v1/files`, `GET` and `DELETE /v1/files/{id}`, `GET /v1/files/{id}/content`,
`POST /v1/batches`, `GET /v1/batches` and `/v1/batches/{id}`, `POST /v1/batches/{id}/cancel`."""

from __future__ import annotations

import time
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from engine.server.batches.lines import ENDPOINTS, MAX_FILE_BYTES, parse_lines
from engine.server.batches.store import BatchStore, new_id
from engine.server.batches.worker import BatchWorker
from engine.server.core import Core
from engine.server.errors import APIError

COMPLETION_WINDOW = "24h"
MAX_METADATA = 16
MAX_REQUEST_BYTES = 1 << 20  # a batch request is small: its lines come in a file


class BatchAPI:
    """The Files and Batch endpoints, their store (opened on first use) and worker."""

    def __init__(self, core: Core, store: BatchStore | None = None) -> None:
        self.core = core
        self.store = store or BatchStore()
        self.worker = BatchWorker(core, self.store)
        if self.store.exists and self.store.open_batches():  # work left by an earlier server
            self.worker.start()

    def routes(self) -> list[BaseRoute]:
        return [
            Route("/v1/files", self.upload, methods=["POST"]),
            Route("/v1/files", self.list_files, methods=["GET"]),
            Route("/v1/files/{file_id}", self.file, methods=["GET"]),
            Route("/v1/files/{file_id}", self.delete_file, methods=["DELETE"]),
            Route("/v1/files/{file_id}/content", self.content, methods=["GET"]),
            Route("/v1/batches", self.create, methods=["POST"]),
            Route("/v1/batches", self.list, methods=["GET"]),
            Route("/v1/batches/{batch_id}", self.retrieve, methods=["GET"]),
            Route("/v1/batches/{batch_id}/cancel", self.cancel, methods=["POST"]),
        ]

    def close(self) -> None:
        """Stop running batches (they go on under the next server) and close the store."""
        self.worker.close()
        self.store.close()

    # ---- files ----

    async def upload(self, request: Request) -> Response:
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > MAX_FILE_BYTES + 65536:
            raise _too_large()
        async with request.form(max_files=1, max_fields=8) as form:
            purpose = form.get("purpose")
            upload = form.get("file")
            if purpose != "batch":
                raise APIError(400, "purpose: only 'batch' files are taken here", param="purpose")
            if upload is None or isinstance(upload, str):
                raise APIError(400, "file: a file is required", param="file")
            data = await upload.read(MAX_FILE_BYTES + 1)
            filename = upload.filename or "input.jsonl"
        if len(data) > MAX_FILE_BYTES:
            raise _too_large()
        found = await run_in_threadpool(self.store.add_file, data, filename, "batch")
        return JSONResponse(found)

    async def list_files(self, request: Request) -> Response:
        found = await run_in_threadpool(self.store.files)
        return JSONResponse({"object": "list", "data": found, "has_more": False})

    async def delete_file(self, request: Request) -> Response:
        file_id = request.path_params["file_id"]
        busy = await run_in_threadpool(self.store.open_batches)
        if any(b["input_file_id"] == file_id for b in busy):
            raise APIError(
                409, f"file {file_id!r} is the input of a batch still running", code="file_in_use"
            )
        if not await run_in_threadpool(self.store.delete_file, file_id):
            raise APIError(404, f"no file {file_id!r}", param="file_id", code="file_not_found")
        return JSONResponse({"id": file_id, "object": "file", "deleted": True})

    async def file(self, request: Request) -> Response:
        return JSONResponse(await self._file(request.path_params["file_id"]))

    async def content(self, request: Request) -> Response:
        file_id = request.path_params["file_id"]
        await self._file(file_id)
        data = await run_in_threadpool(self.store.file_content, file_id, MAX_FILE_BYTES * 4)
        return Response(data, media_type="application/jsonl")

    async def _file(self, file_id: str) -> dict[str, Any]:
        found = await run_in_threadpool(self.store.file, file_id)
        if found is None:
            raise APIError(404, f"no file {file_id!r}", param="file_id", code="file_not_found")
        return found

    # ---- batches ----

    async def create(self, request: Request) -> Response:
        body = await self.core.read_json(request, MAX_REQUEST_BYTES)
        endpoint = body.get("endpoint")
        if endpoint not in ENDPOINTS:
            raise APIError(400, f"endpoint: one of {', '.join(ENDPOINTS)}", param="endpoint")
        if body.get("completion_window", COMPLETION_WINDOW) != COMPLETION_WINDOW:
            raise APIError(400, "completion_window: only '24h'", param="completion_window")
        metadata = body.get("metadata") or {}
        if not isinstance(metadata, dict) or len(metadata) > MAX_METADATA:
            raise APIError(400, f"metadata: at most {MAX_METADATA} pairs", param="metadata")
        file_id = body.get("input_file_id")
        if not isinstance(file_id, str):
            raise APIError(400, "input_file_id: required", param="input_file_id")
        found = await self._file(file_id)
        if found["purpose"] != "batch":
            raise APIError(400, "input_file_id: not a batch input file", param="input_file_id")
        data = await run_in_threadpool(self.store.file_content, file_id, MAX_FILE_BYTES)
        lines, errors = parse_lines(data, endpoint)
        now = int(time.time())
        batch = _batch(new_id("batch_"), endpoint, file_id, metadata, now, len(lines))
        if errors:
            batch.update(status="failed", failed_at=now, errors={"object": "list", "data": errors})
            lines = []
        await run_in_threadpool(self.store.add_batch, batch, lines)
        if not errors:
            self.worker.start()
        return JSONResponse(batch)

    async def list(self, request: Request) -> Response:
        try:
            limit = max(1, min(100, int(request.query_params.get("limit", "20"))))
        except ValueError:
            raise APIError(400, "limit: a number from 1 to 100", param="limit") from None
        after = request.query_params.get("after")
        found = await run_in_threadpool(self.store.batches, limit + 1, after)
        page = found[:limit]
        return JSONResponse(
            {
                "object": "list",
                "data": page,
                "first_id": page[0]["id"] if page else None,
                "last_id": page[-1]["id"] if page else None,
                "has_more": len(found) > limit,
            }
        )

    async def retrieve(self, request: Request) -> Response:
        return JSONResponse(await self._batch(request.path_params["batch_id"]))

    async def cancel(self, request: Request) -> Response:
        bid = request.path_params["batch_id"]
        batch = await self._batch(bid)
        if batch["status"] in ("validating", "in_progress"):
            await run_in_threadpool(
                self.worker.update, bid, status="cancelling", cancelling_at=int(time.time())
            )
            self.worker.cancel(bid)
        return JSONResponse(await self._batch(bid))

    async def _batch(self, bid: str) -> dict[str, Any]:
        found = await run_in_threadpool(self.store.batch, bid)
        if found is None:
            raise APIError(404, f"no batch {bid!r}", param="batch_id", code="batch_not_found")
        return found


def _too_large() -> APIError:
    return APIError(
        413, f"the file is larger than the limit of {MAX_FILE_BYTES:,} bytes", code="file_too_large"
    )


def _batch(
    bid: str, endpoint: str, file_id: str, metadata: dict[str, Any], now: int, total: int
) -> dict[str, Any]:
    return {
        "id": bid,
        "object": "batch",
        "endpoint": endpoint,
        "errors": None,
        "input_file_id": file_id,
        "completion_window": COMPLETION_WINDOW,
        "status": "validating",
        "output_file_id": None,
        "error_file_id": None,
        "created_at": now,
        "in_progress_at": None,
        "expires_at": now + 86400,
        "finalizing_at": None,
        "completed_at": None,
        "failed_at": None,
        "expired_at": None,
        "cancelling_at": None,
        "cancelled_at": None,
        "request_counts": {"total": total, "completed": 0, "failed": 0},
        "metadata": metadata or None,
    }
