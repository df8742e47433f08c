"""Remote image URLs are fetched from the address that was checked: the host name is resolved
once, so an answer that changes between the check and the connection (DNS rebinding to a
private address) is never used; redirects and private addresses are refused."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

import engine.server.images as images
from engine.server.errors import APIError
from engine.server.images import ImagePolicy, from_url
from tests.vision_support import png

PUBLIC = "93.184.215.14"  # a global address; nothing here ever connects to it
POLICY = ImagePolicy(allow_urls=True, timeout_s=5.0)


class _Server(BaseHTTPRequestHandler):
    hosts: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self.hosts.append(self.headers.get("Host", ""))
        if self.path == "/moved.png":
            self.send_response(302)
            self.send_header("Location", "http://127.0.0.1/secret.png")
            self.end_headers()
            return
        body = png((40, 30), (9, 90, 200))
        self.send_response(200)
        self.send_header("Content-Type", "image/png")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        return None


@pytest.fixture
def local_server() -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Server)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


@pytest.fixture
def rebinding_dns(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """A resolver that answers a public address first and this machine's after: what a
    rebinding attacker's name server does. Returns the hosts asked about."""
    asked: list[str] = []
    real = socket.getaddrinfo

    def getaddrinfo(host: str, port: int, *args: Any, **kwargs: Any) -> list[Any]:
        if host == "127.0.0.1":  # the test's own loopback connection (socket's own lookup)
            return real(host, port, *args, **kwargs)
        asked.append(host)
        address = PUBLIC if len(asked) == 1 else "127.0.0.1"
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))]

    monkeypatch.setattr(images.socket, "getaddrinfo", getaddrinfo)
    return asked


def _route_to(monkeypatch: pytest.MonkeyPatch, port: int) -> list[tuple[str, int]]:
    """Connections go to the loopback test server (no network at test time); the address
    each one asked for is recorded."""
    asked: list[tuple[str, int]] = []
    real = socket.create_connection

    def create_connection(address: tuple[str, int], *args: Any, **kwargs: Any) -> socket.socket:
        asked.append(address)
        return real(("127.0.0.1", port), *args, **kwargs)

    monkeypatch.setattr(images.socket, "create_connection", create_connection)
    return asked


def test_image_is_fetched_from_the_checked_address_once_resolved(
    rebinding_dns: list[str], local_server: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    connected = _route_to(monkeypatch, local_server)
    _Server.hosts = []
    image = from_url("http://images.example:8080/photo.png", "messages[0]", POLICY)
    assert image.data.startswith(b"\x89PNG")
    assert rebinding_dns == ["images.example"]  # resolved once: the check's answer is used
    assert connected == [(PUBLIC, 8080)]  # not the second (private) answer
    assert _Server.hosts == ["images.example:8080"]  # the request still names the host


def test_redirect_is_refused(
    rebinding_dns: list[str], local_server: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    _route_to(monkeypatch, local_server)
    with pytest.raises(APIError, match="HTTP 302"):
        from_url("http://images.example/moved.png", "messages[0]", POLICY)


def test_private_answer_is_refused_before_connecting(monkeypatch: pytest.MonkeyPatch) -> None:
    def getaddrinfo(host: str, port: int, *args: Any, **kwargs: Any) -> list[Any]:
        return [
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", (PUBLIC, port)),
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.0.0.7", port)),
        ]

    def create_connection(*args: Any, **kwargs: Any) -> socket.socket:
        raise AssertionError("connected despite a private answer")

    monkeypatch.setattr(images.socket, "getaddrinfo", getaddrinfo)
    monkeypatch.setattr(images.socket, "create_connection", create_connection)
    with pytest.raises(APIError, match="10.0.0.7, a private or local address"):
        from_url("https://mixed.example/photo.png", "messages[0]", POLICY)
