"""Words the window uses in more than one place (docs/design.md, "One word per thing"):
counts with a plural that agrees ("1 model", "2 models"), and errors from the operating
system said as sentences instead of "[Errno -2] Name or service not known"."""

from __future__ import annotations

import errno
import re

# errno values whose raw message reads badly, as what the user can do about them
_ERRNO_WORDS = {
    errno.ENOENT: "the file or folder does not exist",
    errno.EACCES: "Corral is not allowed to read or write it",
    errno.EPERM: "Corral is not allowed to do that",
    errno.ENOSPC: "the disk is full",
    errno.ECONNREFUSED: "nothing answered at that address",
    errno.ETIMEDOUT: "the connection timed out",
    errno.EADDRINUSE: "another program already uses that port",
}
# getaddrinfo's errors (negative, not errno values): the name could not be looked up
_LOOKUP = re.compile(
    r"\[Errno -\d+\]\s*(Name or service not known|nodename nor servname"
    r"|Temporary failure in name resolution|No address associated)"
)
_RAW_ERRNO = re.compile(r"\[Errno -?\d+\]\s*")


def count(n: int, noun: str, plural: str | None = None) -> str:
    """ "1 model", "2 models", "0 models" ("1 reply", "2 replies" with `plural`)."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def error_sentence(exc: BaseException | str) -> str:
    """An error as the window says it: an OSError by what it means (its file name kept),
    a failed name lookup as such; other text with any "[Errno N]" prefix removed."""
    if isinstance(exc, OSError) and exc.errno in _ERRNO_WORDS:
        where = f"{exc.filename}: " if exc.filename else ""
        return f"{where}{_ERRNO_WORDS[exc.errno]}"
    text = str(exc)
    if _LOOKUP.search(text):
        return "the address could not be found (check the name, or the network)"
    return _RAW_ERRNO.sub("", text).strip() or type(exc).__name__
