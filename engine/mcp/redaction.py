"""Secrets out of everything Corral shows or logs about an MCP server.

`redact` is the one function every description, error, stderr tail and output excerpt of a
server passes through before it reaches the screen, a log, the CLI or a stored message. It
masks the server's known secrets (env and header values, URL credentials) and anything that
looks like one: URLs are cut to scheme://host:port, and `sk-…`, `ghp_…`, `Bearer …`,
`--token=…`, `api_key=…` and long random-looking strings lose their value.

`mask_args` masks a command line's arguments the same way (an argument after `--token`,
`--api-key`, … is a secret whatever it looks like); `short_url` is what a URL shows.
`RedactingFilter` applies `redact` to log records (httpx logs every request's full URL).
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Iterable
from urllib.parse import urlsplit

MASK = "…"

# Provider prefixes of API keys and tokens: the prefix stays, the rest goes.
_PREFIXED = re.compile(
    r"\b(sk-(?:proj-|ant-|live-|test-)?|sk_(?:live_|test_)?|pk_(?:live_|test_)|rk_(?:live_|test_)"
    r"|ghp_|gho_|ghu_|ghs_|ghr_|github_pat_|glpat-|xox[abposr]-|hf_|AKIA|ASIA|AIza|npm_"
    r"|pypi-|eyJ)[A-Za-z0-9_\-.+/=]{6,}"
)
# Names whose value is a secret: `--token=x`, `--api-key x`, `api_key=x`, `"password": "x"`.
_SECRET_NAME = (
    r"[A-Za-z0-9_-]*(?:token|api[_-]?key|apikey|secret|passw(?:or)?d|pwd|auth|credential"
    r"|access[_-]?key|private[_-]?key|session|cookie|signature|sig)[A-Za-z0-9_-]*"
)
_NAMED_VALUE = re.compile(
    rf"(?i)(?P<name>{_SECRET_NAME})(?P<sep>[\"']?\s*[=:]\s*[\"']?|\s+)"
    r"(?P<value>(?!\.\.\.|…|[Bb]earer\b|[Bb]asic\b)[^\s\"',;&)]{3,})"
)
_SECRET_FLAG = re.compile(rf"(?i)-{{1,2}}{_SECRET_NAME}\Z")
_AUTH_SCHEME = re.compile(r"\b([Bb]earer|[Bb]asic|Token|Bot)\s+(?!…)[A-Za-z0-9_\-.+/=~]{4,}")
_URL = re.compile(r"(?i)\b[a-z][a-z0-9+.-]{1,15}://[^\s'\"<>()\[\]{}`]+")
_RUN = re.compile(r"[A-Za-z0-9_\-+/=~]{20,}")
_URL_TAIL = ".,:;!?"


def _entropy(text: str) -> float:
    counts: dict[str, int] = {}
    for char in text:
        counts[char] = counts.get(char, 0) + 1
    return -sum(n / len(text) * math.log2(n / len(text)) for n in counts.values())


def looks_like_token(text: str) -> bool:
    """Whether `text` (one word) looks like a key or token: a known provider prefix, or 20+
    letters and digits that switch between lower case, upper case and digits the way random
    strings do (words joined by dashes, paths and version numbers do not)."""
    if _PREFIXED.fullmatch(text):
        return True
    alnum = re.sub(r"[^A-Za-z0-9]", "", text)
    if len(alnum) < 20:
        return False
    runs = len(re.findall(r"[a-z]+|[A-Z]+|[0-9]+", alnum))
    return runs >= 6 and _entropy(text) >= 3.3


def short_url(url: str) -> str:
    """What a URL shows: scheme://host:port, and "/…" where it had a path, query or
    fragment (tokens live there), never the user name or password."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
    except ValueError:  # a malformed port or host: show nothing of it
        return MASK
    if not host:
        return f"{parts.scheme}://{MASK}"
    hidden = parts.path not in ("", "/") or parts.query or parts.fragment
    return f"{parts.scheme}://{host}{port}" + ("/" + MASK if hidden else "")


def _mask_word(word: str) -> str:
    match = _PREFIXED.fullmatch(word)
    if match:
        return match.group(1) + MASK
    return word[:2] + MASK


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """`text` with every known secret (`secrets`: env and header values, URL credentials)
    and everything that looks like one masked. The one redaction for MCP servers."""
    for secret in sorted({s for s in secrets if len(s) >= 4}, key=len, reverse=True):
        text = text.replace(secret, _mask_word(secret))
    text = _URL.sub(_short_url_in_text, text)
    text = _AUTH_SCHEME.sub(lambda m: f"{m.group(1)} {MASK}", text)
    text = _NAMED_VALUE.sub(_mask_named, text)
    text = _PREFIXED.sub(lambda m: m.group(1) + MASK, text)
    return _RUN.sub(lambda m: _mask_run(m.group(0)), text)


def _mask_run(run: str) -> str:
    """A long word masked if it looks like a token; a path's folders are judged one by one."""
    if "/" not in run:
        return _mask_word(run) if looks_like_token(run) else run
    return "/".join(_mask_word(p) if looks_like_token(p) else p for p in run.split("/"))


def _short_url_in_text(match: re.Match[str]) -> str:
    url = match.group(0)
    tail = len(url) - len(url.rstrip(_URL_TAIL))  # the sentence's punctuation stays
    return short_url(url[: len(url) - tail]) + url[len(url) - tail :]


def _mask_named(match: re.Match[str]) -> str:
    sep = match.group("sep")
    value = match.group("value")
    if sep.isspace() and not looks_like_token(value) and not match.group("name").startswith("-"):
        return match.group(0)  # "the token expired": prose, not a name and its value
    return match.group("name") + sep + MASK


def mask_args(args: Iterable[str]) -> list[str]:
    """A command line's arguments as they may be shown: the value after a flag that names a
    secret (`--token`, `--api-key`, …) masked whole, every other argument redacted."""
    shown: list[str] = []
    secret_next = False
    for arg in args:
        if secret_next and not arg.startswith("-"):
            shown.append(MASK)
        else:
            shown.append(redact(arg))
        secret_next = bool(_SECRET_FLAG.match(arg))
    return shown


def secret_args(args: Iterable[str]) -> list[str]:
    """The arguments (or parts of them) that `mask_args` hides, as known secrets for `redact`:
    so a server that prints its own token is masked even where no pattern would find it."""
    found: list[str] = []
    secret_next = False
    for arg in args:
        if secret_next and not arg.startswith("-"):
            found.append(arg)
        else:
            found += [w for w in re.split(r"[\s=:,;&?/]+", arg) if looks_like_token(w)]
        secret_next = bool(_SECRET_FLAG.match(arg))
    return found


class RedactingFilter(logging.Filter):
    """Redacts a log record's message (installed on the loggers of the HTTP client the MCP
    SDK uses, which logs each request's full URL)."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a record that cannot format: leave it to logging's own handling
            return True
        record.msg, record.args = redact(message), None
        return True


_FILTER = RedactingFilter()


HTTP_LOGGERS = ("httpx", "httpx2", "httpcore", "httpcore2", "mcp")


def install_log_redaction(names: Iterable[str] = HTTP_LOGGERS) -> None:
    """Put the redacting filter on these loggers (idempotent). A filter acts on records
    logged to its own logger, which is where httpx logs each request's URL."""
    for name in names:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
