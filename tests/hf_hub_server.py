"""A loopback stand-in for the Hugging Face Hub, serving repos made in a test: the model-info
API (`/api/models/...`) and file downloads (`/{repo}/resolve/{rev}/{file}`, with HTTP Range),
optionally slowed down so a test can cancel mid-file. It records every request."""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


class HubServer:
    """`HubServer({"org/name": folder})`; `url` is the endpoint for huggingface_hub."""

    def __init__(self, repos: dict[str, Path], *, chunk: int = 1 << 16) -> None:
        self.repos = repos
        self.chunk = chunk
        self.delay = 0.0  # seconds between chunks
        self.requests: list[dict] = []
        self.served: dict[str, int] = {}  # file -> bytes sent
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_HEAD(self) -> None:
                hub._handle(self, body=False)

            def do_GET(self) -> None:
                hub._handle(self, body=True)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> HubServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def sha(self, repo_id: str) -> str:
        return hashlib.sha1(repo_id.encode()).hexdigest()

    def _files(self, repo_id: str) -> dict[str, Path]:
        root = self.repos[repo_id]
        return {str(p.relative_to(root)): p for p in sorted(root.rglob("*")) if p.is_file()}

    def _not_found(self, h: BaseHTTPRequestHandler, code: str) -> None:
        body = json.dumps({"error": "Repository not found"}).encode()
        h.send_response(404)
        h.send_header("X-Error-Code", code)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    def _handle(self, h: BaseHTTPRequestHandler, body: bool) -> None:
        path = h.path.split("?", 1)[0]
        record = {"method": h.command, "path": path, "range": h.headers.get("Range"), "sent": 0}
        self.requests.append(record)
        if m := re.match(r"^/api/models/([^/]+/[^/]+)(?:/revision/[^/]+)?$", path):
            repo_id = m.group(1)
            if repo_id not in self.repos:
                return self._not_found(h, "RepoNotFound")
            siblings = [
                {"rfilename": name, "size": p.stat().st_size, "blobId": self.sha(name)}
                for name, p in self._files(repo_id).items()
            ]
            data = json.dumps(
                {"id": repo_id, "modelId": repo_id, "sha": self.sha(repo_id), "siblings": siblings}
            ).encode()
            h.send_response(200)
            h.send_header("Content-Type", "application/json")
            h.send_header("Content-Length", str(len(data)))
            h.end_headers()
            h.wfile.write(data)
            return None
        m = re.match(r"^/([^/]+/[^/]+)/resolve/([^/]+)/(.+)$", path)
        if not m or m.group(1) not in self.repos:
            return self._not_found(h, "RepoNotFound")
        repo_id, _rev, name = m.groups()
        file = self._files(repo_id).get(name)
        if file is None:
            return self._not_found(h, "EntryNotFound")
        data = file.read_bytes()
        start = 0
        if (rng := h.headers.get("Range")) and (r := re.match(r"bytes=(\d+)-", rng)):
            start = int(r.group(1))
            h.send_response(206)
            h.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        else:
            h.send_response(200)
        h.send_header("Content-Length", str(len(data) - start))
        h.send_header("ETag", f'"{hashlib.sha256(data).hexdigest()}"')
        h.send_header("X-Repo-Commit", self.sha(repo_id))
        h.send_header("Accept-Ranges", "bytes")
        h.end_headers()
        if not body:
            return None
        try:
            for i in range(start, len(data), self.chunk):
                piece = data[i : i + self.chunk]
                h.wfile.write(piece)
                self.served[name] = self.served.get(name, 0) + len(piece)
                record["sent"] += len(piece)
                if self.delay:
                    time.sleep(self.delay)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client stopped (a cancelled download)
        return None
