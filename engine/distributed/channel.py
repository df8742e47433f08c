"""Rank 0's commands to the other ranks, sent as `all_sum`s in which only rank 0 contributes.

A message is one int32 vector of WIDTH values: a header (the command, a sequence number, five
arguments, the payload's length) and the first SLOT values of its payload; a longer payload
follows in a second all_sum whose length the header gave. The followers receive synchronously,
one message at a time. Rank 0 builds its messages lazily, in MLX's graph: a forward pass's
token ids may still be a sample being computed, so the decode loops keep their
`async_eval` pipelining. Every message on rank 0 depends on everything sent before it (the
previous message, or the forward pass built on it), so rank 0 runs its collectives in exactly
the order it issued them, the order in which the followers, running one message at a time,
run theirs. Each message is also handed to MLX's stream as soon as it is posted
(`async_eval`): a collective that depends on nothing (a pipeline stage's `recv`) is queued
when its forward pass is evaluated, and so after the message that announced that pass.
Messages, like the model's own collectives, leave the stream to MLX, which runs every
collective of a group on that group's communication stream (the CPU's, for ring and JACCL, on
a Mac too): one in-order queue holds them all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum

import mlx.core as mx
import numpy as np

HEADER = 8  # op, seq, five arguments, payload length
SLOT = 24  # payload values carried in the first all_sum
WIDTH = HEADER + SLOT
ARGS = 5


class Op(IntEnum):
    """What rank 0 asks the other ranks to do."""

    FORWARD = 1  # args: kv id, batch, length; payload: token ids (batch * length)
    NEW_CACHE = 2  # args: kv id
    SLICE_CACHE = 3  # args: source kv id, new kv id, tokens kept, compact (0/1)
    TRIM_CACHE = 4  # args: kv id, tokens dropped
    DROP_CACHES = 5  # payload: kv ids
    LOAD = 6  # args: shard mode, KV budget setting in MiB (-1: automatic); payload: spec
    SHUTDOWN = 7
    PROBE = 8  # args: steps (time the collectives of one decode step, for the benchmark)
    RELEASE = 9  # drop the model and every cache


@dataclass(frozen=True)
class Message:
    """A command as the followers receive it."""

    op: Op
    seq: int
    args: tuple[int, ...]
    payload: np.ndarray  # int32


def encode_text(text: str) -> list[int]:
    """A string as int32 payload values (its UTF-8 bytes)."""
    return list(text.encode("utf-8"))


def decode_text(values: np.ndarray) -> str:
    """The string `encode_text` made."""
    return bytes(int(v) & 0xFF for v in values).decode("utf-8")


class LeaderChannel:
    """Rank 0's end: `post` (lazy, in the graph) and `send` (at once)."""

    def __init__(self, group: mx.distributed.Group) -> None:
        self.group = group
        self.seq = 0
        self._last: mx.array | None = None

    def post(
        self, op: Op, args: Sequence[int] = (), payload: mx.array | Sequence[int] | None = None
    ) -> mx.array:
        """Queue a message after everything sent so far; return the payload as every rank
        received it (a lazy int32 vector: feed the model from it, so it comes after)."""
        self.seq += 1
        if len(args) > ARGS:
            raise ValueError(f"at most {ARGS} arguments, got {len(args)}")
        if payload is None:
            flat = mx.zeros((0,), mx.int32)
        elif isinstance(payload, mx.array):
            flat = payload.reshape(-1).astype(mx.int32)
        else:
            flat = mx.array(np.asarray(payload, dtype=np.int32).reshape(-1))
        n = int(flat.size)
        head = mx.array([int(op), self.seq, *args, *[0] * (ARGS - len(args)), n], mx.int32)
        parts = [head, flat[:SLOT]]
        if n < SLOT:
            parts.append(mx.zeros((SLOT - n,), mx.int32))
        first = mx.concatenate(parts)
        if self._last is not None:
            first = mx.depends(first, self._last)
        got = mx.distributed.all_sum(first, group=self.group)
        body = got[HEADER : HEADER + min(n, SLOT)]
        self._last = got
        if n > SLOT:
            rest = mx.depends(flat[SLOT:], got)
            more = mx.distributed.all_sum(rest, group=self.group)
            body = mx.concatenate([body, more])
            self._last = more
        mx.async_eval(self._last)
        return body

    def send(
        self, op: Op, args: Sequence[int] = (), payload: mx.array | Sequence[int] | None = None
    ) -> None:
        """Post a message and wait until every rank has it."""
        mx.eval(self.post(op, args, payload))

    def after(self, output: mx.array) -> None:
        """Order the next message after `output` (a forward pass the followers run too), so
        that every collective inside that pass runs on rank 0 before the next message."""
        self._last = output

    def flush(self) -> None:
        """Run everything posted so far (before the group goes idle or changes model)."""
        if self._last is not None:
            mx.eval(self._last)


class FollowerChannel:
    """A follower's end: `receive` blocks until rank 0's next message has arrived."""

    def __init__(self, group: mx.distributed.Group) -> None:
        self.group = group

    def receive(self) -> Message:
        got = mx.distributed.all_sum(mx.zeros((WIDTH,), mx.int32), group=self.group)
        values = np.array(got, dtype=np.int32)
        n = int(values[HEADER - 1])
        payload = values[HEADER : HEADER + min(n, SLOT)]
        if n > SLOT:
            more = mx.distributed.all_sum(mx.zeros((n - SLOT,), mx.int32), group=self.group)
            payload = np.concatenate([payload, np.array(more, dtype=np.int32)])
        op = Op(int(values[0]))
        return Message(op, int(values[1]), tuple(int(v) for v in values[2 : 2 + ARGS]), payload)
