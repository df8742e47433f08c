"""Images in API requests: `data:` URLs and base64 sources, and remote URLs only when allowed.

Every dialect turns its image part into an ImageInput here, and the image is checked at the
edge (`engine.prompt.images.check_image`), so a bad one is a 400 naming the part and the
reason before anything reaches the engine. A text-only model refuses images in the engine
("... does not read images"), which is a 400 too.

Remote URLs are fetched only with `--allow-image-urls`, and then only http(s), with a size
and a time limit, without following redirects, and never from this machine's own or
private addresses (every address the host name resolves to is checked).
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import socket
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass

from engine.prompt.images import MAX_IMAGE_BYTES, BadImageError, check_image
from engine.server.errors import APIError
from engine.types import ImageInput

MEDIA_TYPES = ("image/png", "image/jpeg", "image/webp", "image/gif")
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


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None  # a redirect is an error: its target was never checked


def _check_host(host: str, port: int, where: str) -> None:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise _bad(where, f"cannot resolve {host!r}: {exc}") from None
    for info in infos:
        address = ipaddress.ip_address(str(info[4][0]).split("%")[0])
        if not address.is_global or address.is_multicast:
            raise _bad(
                where,
                f"{host} resolves to {address}, a private or local address: refused",
                code="image_url_refused",
            )


def _fetch(url: str, where: str, policy: ImagePolicy) -> bytes:
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise _bad(where, "only http(s) image URLs are fetched", code="image_url_refused")
    _check_host(parts.hostname, parts.port or (443 if parts.scheme == "https" else 80), where)
    opener = urllib.request.build_opener(_NoRedirects)
    try:
        with opener.open(url, timeout=policy.timeout_s) as response:
            data = bytes(response.read(policy.max_bytes + 1))
    except urllib.error.HTTPError as exc:
        raise _bad(where, f"fetching the image failed: HTTP {exc.code}") from None
    except (urllib.error.URLError, OSError, TimeoutError) as exc:
        raise _bad(where, f"fetching the image failed: {exc}") from None
    if len(data) > policy.max_bytes:
        raise _bad(where, f"the image is larger than {policy.max_bytes:,} bytes")
    return data
