"""A rank other than 0: run its share of the model as rank 0's messages say, nothing else.

It holds the same KV states as rank 0 under the same ids (see `mirror`) and answers every
message in the order sent. It never decides anything: a message it cannot carry out is a bug
that would leave the group out of step, so it stops at once with the reason on stderr, and
`mlx.launch` (and so Corral) sees the rank exit. A heartbeat line on stdout every second tells
Corral's watchdog which message each rank has finished.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

import mlx.core as mx
from mlx_lm.models import llama
from mlx_lm.models.cache import make_prompt_cache

from engine.distributed.channel import FollowerChannel, Message, Op, decode_text
from engine.distributed.comm import replay_probe
from engine.distributed.loading import load_on_rank
from engine.distributed.protocol import HEARTBEAT, HEARTBEAT_S
from engine.distributed.shard import SHARD_MODES
from engine.errors import ModelLoadError
from engine.memory.plan import WiredLimit
from engine.memory.prompt_cache import slice_cache, trim_cache
from engine.memory.store import KVState


def heartbeat_line(rank: int, seq: int) -> str:
    """The line a follower prints every HEARTBEAT_S: its rank and the last message done."""
    return f"{HEARTBEAT} {rank} {seq}"


def _forward_fn(model: Any) -> Any:
    """What a follower evaluates for a forward pass: the model without its output head where
    the head holds no collective (llama's does not), since only rank 0 needs the logits."""
    if isinstance(model, llama.Model):
        return model.model
    return model


class Follower:
    """The message loop of a rank > 0."""

    def __init__(self, group: mx.distributed.Group) -> None:
        self.group = group
        self.rank = group.rank()
        self.channel = FollowerChannel(group)
        self.model: Any = None
        self.forward: Any = None
        self.caches: dict[int, KVState] = {}
        self.done = 0  # sequence number of the last message carried out
        self._wired: WiredLimit | None = None

    def run(self) -> None:
        """Serve messages until rank 0 says SHUTDOWN (or the group breaks, which raises)."""
        threading.Thread(target=self._heartbeat, name="corral-heartbeat", daemon=True).start()
        while True:
            message = self.channel.receive()
            if message.op is Op.SHUTDOWN:
                self._release()
                return
            self._handle(message)
            self.done = message.seq

    def _heartbeat(self) -> None:
        while True:
            print(heartbeat_line(self.rank, self.done), flush=True)
            time.sleep(HEARTBEAT_S)

    def _handle(self, m: Message) -> None:
        a = m.args
        if m.op is Op.FORWARD:
            cache = self.caches[a[0]]
            tokens = mx.array(m.payload.reshape(a[1], a[2]))
            out = self.forward(tokens, cache=cache)
            mx.eval(out, [c.state for c in cache])
        elif m.op is Op.NEW_CACHE:
            self.caches[a[0]] = make_prompt_cache(self.model)
        elif m.op is Op.SLICE_CACHE:
            self.caches[a[1]] = slice_cache(self.caches[a[0]], a[2], bool(a[3]))
        elif m.op is Op.TRIM_CACHE:
            trim_cache(self.caches[a[0]], a[1])
        elif m.op is Op.DROP_CACHES:
            for kv_id in m.payload:
                self.caches.pop(int(kv_id), None)
        elif m.op is Op.LOAD:
            self._load(decode_text(m.payload), SHARD_MODES[a[0]], a[1])
        elif m.op is Op.RELEASE:
            self._release()
        elif m.op is Op.PROBE:
            replay_probe(self.group, self.model, self.forward, a[0])
        else:  # pragma: no cover - Op is closed
            raise RuntimeError(f"unknown message {m.op}")

    def _load(self, spec: str, mode: Any, budget_mib: int) -> None:
        self._release()
        try:
            done = load_on_rank(spec, self.group, mode, [])
        except ModelLoadError as exc:  # rank 0 reports it, naming every rank that failed
            print(f"rank {self.rank}: {exc}", file=sys.stderr, flush=True)
            return
        self.model = done.loaded.model
        self.forward = _forward_fn(self.model)
        plan = done.figures[self.rank].plan(None if budget_mib < 0 else budget_mib << 20)
        self._wired = WiredLimit()
        self._wired.apply(plan)

    def _release(self) -> None:
        self.caches.clear()
        self.model = self.forward = None
        if self._wired is not None:
            self._wired.restore()
            self._wired = None
        mx.clear_cache()
