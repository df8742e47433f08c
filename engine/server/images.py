"""Images in API requests: `data:` URLs and base64 sources, and remote URLs only when allowed.

Every dialect turns its image part into an ImageInput here, and the image is checked at the
edge (`engine.prompt.images.check_image`), so a bad one is a 400 naming the part and the
reason before anything reaches the engine. A text-only model refuses images in the engine
("... does not read images"), which is a 400 too.

Remote URLs are fetched only with `--allow-image-urls`, and then only http(s), with a size
and a time limit, without following redirects, and never from this machine's own or
private addresses (every address the host name resolves to is checked). The connection goes
to the address that was checked: the name is resolved once, so a second answer (DNS
rebinding to a private address between check and connect) is never asked for; TLS still
verifies the certificate against the host name.
"""

from __future__ import annotations

import base64
import binascii
import http.client
import ipaddress
import socket
import ssl
import urllib.parse
from dataclasses import dataclass

from engine.prompt.images import MAX_IMAGE_BYTES, BadImageError, check_image
from engine.server.errors import APIError
from engine.types import ImageInput

# HEIC/HEIF pass here so that the image check says what to do with them (convert them, or
# read them where a HEIF plugin is installed)
MEDIA_TYPES = ("image/png", "image/jpeg", "image/webp", "image/gif", "image/heic", "image/heif")
FETCH_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class ImagePolicy:
    """What the server accepts as an image source."""

    allow_urls: bool = False
    max_bytes: int = MAX_IMAGE_BYTES
    timeout_s: float = FETCH_TIMEOUT_S


def _bad(where: str, message: str, code: str = "invalid_image") -> APIError:
    return APIError(400, f"{where}: {message}", param=where, code=code)


def checked(data: bytes, where: str) -> ImageInput:
    """`data` as an ImageInput after the edge check; APIError(400) saying what is wrong."""
    try:
        check_image(data, where)
    except BadImageError as exc:
        raise APIError(400, str(exc), param=where, code="invalid_image") from None
    return ImageInput(data, where)


def from_base64(data: str, media_type: str | None, where: str) -> ImageInput:
    """An image sent as base64 text (Anthropic's `source`, a data: URL's payload)."""
    if media_type is not None and media_type not in MEDIA_TYPES:
        raise _bad(where, f"media type {media_type!r} is not one of {', '.join(MEDIA_TYPES)}")
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise _bad(where, "the image data is not valid base64") from None
    return checked(raw, where)


def from_url(url: str, where: str, policy: ImagePolicy) -> ImageInput:
    """An image given by URL: a data: URL, or (allowed by the server) an http(s) URL."""
    if url.startswith("data:"):
        head, sep, payload = url[5:].partition(",")
        if not sep or not head.endswith(";base64"):
            raise _bad(where, "a data: URL must be base64 (data:image/png;base64,...)")
        return from_base64(payload, head[: -len(";base64")] or None, where)
    if not policy.allow_urls:
        raise _bad(
            where,
            "remote image URLs are off: send the image as a data: URL, or start the server "
            "with --allow-image-urls",
            code="image_urls_disabled",
        )
    return checked(_fetch(url, where, policy), where)


def _check_host(host: str, port: int, where: str) -> str:
    """The address to connect to for `host`: every address it resolves to is checked (all
    must be public), and the first is used."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise _bad(where, f"cannot resolve {host!r}: {exc}") from None
    addresses = [str(info[4][0]).split("%")[0] for info in infos]
    for text in addresses:
        address = ipaddress.ip_address(text)
        if not address.is_global or address.is_multicast:
            raise _bad(
                where,
                f"{host} resolves to {address}, a private or local address: refused",
                code="image_url_refused",
            )
    if not addresses:
        raise _bad(where, f"cannot resolve {host!r}: no address")
    return addresses[0]


class _PinnedHTTP(http.client.HTTPConnection):
    """An HTTP connection to `address`, whatever the host name resolves to now."""

    def __init__(self, host: str, port: int, address: str, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout)
        self.address = address

    def connect(self) -> None:
        self.sock = socket.create_connection((self.address, self.port), self.timeout)


class _PinnedHTTPS(http.client.HTTPSConnection):
    """An HTTPS connection to `address`, its certificate checked against the host name."""

    def __init__(self, host: str, port: int, address: str, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout, context=ssl.create_default_context())
        self.address = address

    def connect(self) -> None:
        sock = socket.create_connection((self.address, self.port), self.timeout)
        self.sock = self._context.wrap_socket(sock, server_hostname=self.host)  # type: ignore[attr-defined]


def _fetch(url: str, where: str, policy: ImagePolicy) -> bytes:
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise _bad(where, "only http(s) image URLs are fetched", code="image_url_refused")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise _bad(where, "the image URL's port is not a number") from None
    address = _check_host(parts.hostname, port, where)
    kind = _PinnedHTTPS if parts.scheme == "https" else _PinnedHTTP
    connection = kind(parts.hostname, port, address, policy.timeout_s)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    try:
        connection.request("GET", path, headers={"User-Agent": "Corral", "Accept": "image/*"})
        response = connection.getresponse()
        if response.status != 200:  # a redirect too: its target was never checked
            raise _bad(where, f"fetching the image failed: HTTP {response.status}")
        data = bytes(response.read(policy.max_bytes + 1))
    except (http.client.HTTPException, OSError, TimeoutError) as exc:
        raise _bad(where, f"fetching the image failed: {exc}") from None
    finally:
        connection.close()
    if len(data) > policy.max_bytes:
        raise _bad(where, f"the image is larger than {policy.max_bytes:,} bytes")
    return data
