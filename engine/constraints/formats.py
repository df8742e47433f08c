"""Short valid values for each string `format` llguidance enforces, for the closing walk.

A reply that must end inside a formatted string (`"bob` in an `email`, `"2024-01-01T12:3`
in a `date-time`) cannot always be closed by a token-by-token walk: the quote is refused
until the value is whole, and the shortest tokens (letters, digits) never reach the `@` or
`:` the format wants. So the walk also tries appending each *suffix* of a few short values
per format: `bob` + `@a`, `2024-1` + `1-01` (the tail of `2000-01-01`), `12:3` + `0:00Z`.
Any partial value of the right shape is completed by the suffix that starts where it
stops. Nothing here is assumed valid: the walk keeps a completion only if the matcher
accepts it, closing quote included.

Every value is valid for its format under llguidance's regexes and under `jsonschema`'s
format checkers (drafts 7 to 2020-12): no leap second (`:60`, which llguidance allows and
RFC 3339 checkers refuse), no February 29. `tests/test_constraints_closing.py` checks both,
and that this table names exactly the formats llguidance enforces.
"""

from __future__ import annotations

# The formats llguidance 1.9 enforces (parser/src/json/formats.rs; "unknown" matches any
# text, so a plain quote closes it), each with the short values whose tails complete it.
FORMAT_VALUES: dict[str, tuple[str, ...]] = {
    "date-time": (
        "2000-01-01T00:00:00Z",
        "2000-01-01T00:00:00+00:00",  # a numeric offset begun with + or -
        "2000-01-01T00:00:00.0Z",  # fractional seconds begun with .
    ),
    "time": ("00:00:00Z", "00:00:00+00:00", "00:00:00.0Z"),
    "date": ("2000-01-01",),
    "duration": ("P0D", "PT0S", "P0W", "P0Y0M", "PT0H0M", "P0Y0M0DT0H0M0S"),
    "email": ("a@a", "a@a.a", "a@[0.0.0.0]"),
    "hostname": ("a", "a.a"),
    "ipv4": ("0.0.0.0",),
    "ipv6": ("::", "0::", "::0"),
    # Digits are one token each in many vocabularies; runs of a letter are not.
    "uuid": ("00000000-0000-0000-0000-000000000000", "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa"),
    "uri": ("a:", "a:a", "a://a", "a:%00"),
}


def value_tails() -> list[str]:
    """Every non-empty suffix of every value in FORMAT_VALUES, each once, shortest first
    (the walk appends them to a string it cannot yet close)."""
    tails = {v[i:] for values in FORMAT_VALUES.values() for v in values for i in range(len(v))}
    return sorted(tails, key=lambda t: (len(t), t))
