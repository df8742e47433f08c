"""Steering a JSON reply toward its end: which of the tokens a grammar allows to keep.

The closing tracker (`engine.constraints.finishing`) narrows a reply's mask, never widens
it: each rule below keeps a subset of what the grammar allows, and only when that subset
still holds a token that makes progress toward the end (a closing quote or bracket), so
the model always has a way out and chooses it itself. Tokens are classed once per
tokenizer by what their text does, read lexically from outside a string and from inside
one (`TokenClasses`); where the reply's text stands comes from `Nesting.position`.

- `WRAP` (the budget reserve is reached: the tokens left are not many more than the
  schema still needs): nothing new is opened where the structure may close instead: no
  comma where a `]` or `}` is allowed (no new item, no optional key), no key in an object
  that may close empty, no `{` or `[` where a value may be a scalar, no token that closes
  a string and opens more in one go (`","`, `"},{"`). Strings and numbers are written
  freely.
- `TIGHT` (the reserve nearly spent): as `WRAP`, and a value string or a number ends now
  (the closing quote, a closing bracket, else the comma to the next key).
- `MOVE_ON` (the reply repeats itself inside a value): the value it loops in ends (a
  string or a key is closed, a number ended, an array or object closed where allowed),
  and the model goes on from there.

Where a rule finds nothing to keep it does nothing (`Steer.NONE`); where moving on was
needed and the grammar allows no way out (a pattern not yet matched, a `minLength`), it
says so (`Steer.REFUSED`) and the tracker fills the value instead.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum

import numpy as np

from engine.constraints.closing import Nesting


class Mode(Enum):
    WRAP = "wrap"
    TIGHT = "tight"
    MOVE_ON = "move_on"


class Steer(Enum):
    NARROWED = "narrowed"  # the mask was narrowed
    NONE = "none"  # nothing to do here
    REFUSED = "refused"  # moving on was needed and the grammar allows no way out


_QUOTE, _BACKSLASH = 0x22, 0x5C
_OPENERS = frozenset(b"{[")
_CLOSERS = frozenset(b"}]")
_NUMBER_BYTES = frozenset(b"0123456789.eE+-")
_BLANKS = frozenset(b" \t\r\n")


def _read(text: bytes, inside: bool, escaped: bool = False) -> tuple[bool, bool, int, bool]:
    """Read `text` lexically from inside a string (`inside`; just after a backslash in it:
    `escaped`) or outside one: (whether it leaves the string it starts in, whether it
    writes a comma or an opening bracket outside strings, its first byte outside strings
    that is not blank (or -1), whether it ends just after a backslash in a string)."""
    in_string = inside
    leaves = extends = False
    first = -1
    for c in text:
        if in_string:
            if escaped:
                escaped = False
            elif c == _BACKSLASH:
                escaped = True
            elif c == _QUOTE:
                in_string = False
                leaves = leaves or inside
            continue
        if c == _QUOTE:
            in_string = True
        elif c == 0x2C or c in _OPENERS:
            extends = True
        if first < 0 and c not in _BLANKS:
            first = c
    return leaves, extends, first, in_string and escaped


class TokenClasses:
    """A tokenizer's tokens classed by what their text does, as packed masks (llguidance's
    layout: token t is bit t % 32 of word t // 32)."""

    def __init__(self, texts: list[bytes], n_words: int) -> None:
        size = n_words * 32
        flags = {
            name: np.zeros(size, bool)
            for name in (
                "leaves_in",  # from inside a string: closes it
                "quote_first",  # from inside a string: closes it with its first byte
                "leaves_escaped",  # just after a backslash in a string: closes the string
                "stays_escaped",  # just after a backslash: ends after another backslash
                "extends_in",  # from inside a string: writes a comma or a bracket after it
                "extends_out",  # from outside: writes a comma or an opening bracket
                "first_close",  # from outside: begins with `}` or `]`
                "first_open",  # from outside: begins with `{` or `[`
                "number_cont",  # from outside: a number's next bytes (digits, `.`, `e`...)
                "blank",  # blank text (or none)
            )
        }
        for t, text in enumerate(texts):
            if not text.strip():
                flags["blank"][t] = True
                continue
            leaves, extends_in, _, _ = _read(text, inside=True)
            _, extends_out, first, _ = _read(text, inside=False)
            leaves_escaped, _, _, stays_escaped = _read(text, inside=True, escaped=True)
            flags["leaves_escaped"][t] = leaves_escaped
            flags["stays_escaped"][t] = stays_escaped
            flags["leaves_in"][t] = leaves
            flags["quote_first"][t] = text[0] == _QUOTE
            flags["extends_in"][t] = extends_in
            flags["extends_out"][t] = extends_out
            flags["first_close"][t] = first in _CLOSERS
            flags["first_open"][t] = first in _OPENERS
            flags["number_cont"][t] = first in _NUMBER_BYTES
        packed = {name: _pack(bits) for name, bits in flags.items()}
        self.leaves_in = packed["leaves_in"]
        self.quote_first = packed["quote_first"]
        self.leaves_escaped = packed["leaves_escaped"]
        self.stays_escaped = packed["stays_escaped"]
        self.extends_in = packed["extends_in"]
        self.extends_out = packed["extends_out"]
        self.first_close = packed["first_close"]
        self.first_open = packed["first_open"]
        self.number_cont = packed["number_cont"]
        self.blank = packed["blank"]


def _pack(bits: np.ndarray) -> np.ndarray:
    return np.packbits(bits, bitorder="little").view(np.uint32)


def steer(
    words: np.ndarray,
    nesting: Nesting,
    mode: Mode,
    classes: TokenClasses,
    last: Callable[[], bool] = lambda: True,
) -> Steer:
    """Narrow `words` (a grammar's packed mask, uint32, changed in place) by `mode`'s rule
    at the place `nesting` stands. `last()` says whether the string the text is in may
    end its container (`"}`): if not, what follows it is needed, not new content."""
    kept = _kept(words, nesting, mode, classes, last)
    if kept is None:
        return Steer.NONE
    if not kept.any():
        return Steer.REFUSED if mode is Mode.MOVE_ON else Steer.NONE
    if np.array_equal(kept, words):
        return Steer.NONE
    words[:] = kept
    return Steer.NARROWED


def _kept(
    w: np.ndarray, nesting: Nesting, mode: Mode, c: TokenClasses, last: Callable[[], bool]
) -> np.ndarray | None:
    """The tokens `mode` keeps where `nesting` stands (an empty mask: none it could keep),
    or None where it has nothing to say."""
    position = nesting.position
    if position == "key" and mode is not Mode.MOVE_ON:
        return None
    if position == "escaped":  # the escape is finished first; then the string may end
        if mode is Mode.WRAP or (nesting.key and mode is not Mode.MOVE_ON):
            return None
        out: np.ndarray = w & c.leaves_escaped
        if not out.any():
            out = w & ~c.stays_escaped  # no escape after escape: a loop of `\"` ends
        return out if out.any() else None
    if position in ("string", "key"):
        # A clean end (the quote first) before one that writes more into the string
        # (`,"`), and where the string may be the last value, nothing new after it
        leaving: np.ndarray = w & c.leaves_in
        if mode is Mode.WRAP:  # write on, or close the string
            kept: np.ndarray = w & ~c.extends_in
            return kept if (kept & c.leaves_in).any() and last() else None
        choices = [w & c.quote_first, leaving]
        if mode is Mode.TIGHT and last():
            choices = [w & c.quote_first & ~c.extends_in, leaving & ~c.extends_in, *choices]
        return next((k for k in choices if k.any()), leaving)
    closing: np.ndarray
    if position == "number":
        closing = w & c.first_close & ~c.extends_out
        if mode is Mode.WRAP:  # the number goes on or the container closes: no new item
            going: np.ndarray = w & ~c.extends_out & ~c.blank
            return going if closing.any() else None
        if closing.any():
            return closing
        ending: np.ndarray = w & ~c.number_cont & ~c.blank
        return ending if ending.any() or mode is Mode.MOVE_ON else None
    if position in ("after_value", "opened"):
        closing = w & c.first_close & ~c.extends_out
        if closing.any():
            return closing
    if position == "opened" and nesting.mark != 0x5B:
        return None  # an object's first key (or its end) comes next
    if position in ("value_start", "opened") and mode is not Mode.MOVE_ON:
        scalar: np.ndarray = w & ~c.first_open & ~c.blank
        return scalar if scalar.any() else None
    return None
