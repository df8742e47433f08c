"""The model pool's figures, for the `serving` section (benchmarks/serving.py calls
`pool_figures`).

Three models behind one server, of two kinds: the bench's model and a tiny random chat
model with its tokenizer (benchmarks/tiny_model.py), each with a small fixed KV budget, and
a tiny random embedding model (BERT, benchmarks/tiny_embedding_models.py), under a memory
limit that holds the bench's model and one of the small ones but never all three:

- `model_swap_s`: the median time from sending a request for the bench's model, while
  the two small models fill the limit, to its first token: unloading the small model
  used least recently, loading the bench's model, and prefilling (the official
  `openai` client, streaming). `model_swap_runs` swaps were timed; `model_swap_s_spread`
  is their spread; `model_load_alone_s` is the bench's model loading with room to spare.
- `pool_cap_held`: 1.0 if the memory the pool held never went over its limit while it
  served requests to the three models in turn (chat completions for the chat models,
  `/v1/embeddings` for the embedding model; every snapshot it published, read every few
  milliseconds), else 0.0; `pool_held_max_share` is the most it held over the limit,
  `pool_requests` the requests served and `pool_swaps` the unloads they caused.
"""

from __future__ import annotations

import statistics
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from benchmarks.rounds import spread
from engine.pool import EMBEDDING_LOADERS, ModelPool, ModelSettings
from engine.types import PoolSnapshot

KV_BYTES = 64 << 20  # each model's prompt-cache budget: the limit decides, not the machine
HI = [{"role": "user", "content": "Say hello."}]


def pool_figures(model: str = "default", *, rounds: int = 3, tokens: int = 4) -> dict[str, Any]:
    """`model_swap_s` and `pool_cap_held` (see the module's docstring) for `model`."""
    from engine.library.load import ensure_default_model, resolve_model
    from engine.server import HTTPServer, ServerConfig

    with tempfile.TemporaryDirectory(prefix="corral-pool-bench-") as tmp:
        target = resolve_model(model)
        default_dir = ensure_default_model()
        tokenizer_dir = Path(str(target)) if Path(str(target)).is_dir() else default_dir
        tiny = _tiny(Path(tmp) / "tiny", tokenizer_dir, seed=1)
        vectors = _embedding(Path(tmp) / "bert", default_dir)
        pool = ModelPool(
            engine_options={"speculative": False}, wire_memory=False, loaders=EMBEDDING_LOADERS
        )
        settings = ModelSettings(kv_budget_bytes=KV_BYTES)
        big = pool.add_model(model, settings=settings)
        small = [
            pool.add_model(str(tiny), settings=settings),
            pool.add_model(str(vectors), kind="embedding"),
        ]
        server = HTTPServer(pool, ServerConfig(port=0))
        try:
            started = time.perf_counter()
            pool.ensure_loaded(big).result()
            load_alone = time.perf_counter() - started
            for name in small:  # what each holds, measured (all fit: no limit yet)
                pool.ensure_loaded(name).result()
            sizes = _sizes(pool)
            # the bench's model and one small one fit, never all three
            limit = sizes[big] + max(sizes[n] for n in small) + min(sizes[n] for n in small) // 2
            pool.set_memory_limit(limit)
            _wait(lambda: _held(pool) <= limit)
            url = server.start()
            client = _client(url)
            swaps = [_swap(pool, client, big, small, tokens) for _ in range(rounds)]
            figures = _cap_held(pool, client, [big, *small], rounds, tokens)
        finally:
            server.stop()
            pool.close()
    return {
        "model_swap_s": round(statistics.median(swaps), 3),
        "model_swap_s_spread": spread(swaps),
        "model_swap_runs": len(swaps),
        "model_load_alone_s": round(load_alone, 3),
        **figures,
    }


def _tiny(folder: Path, tokenizer_dir: Path, seed: int) -> Path:
    from benchmarks.tiny_model import build_tiny_model

    return build_tiny_model(folder, tokenizer_dir, seed=seed)


def _embedding(folder: Path, tokenizer_dir: Path) -> Path:
    from benchmarks.tiny_embedding_models import build_embedding_model

    return build_embedding_model("bert", folder, tokenizer_dir)


def _ask(pool: ModelPool, client: Any, name: str, tokens: int) -> str:
    """One request to `name` by its kind (a chat completion, or embeddings); the name of
    the model that answered."""
    found = pool.snapshot.find_model(name)
    if found is not None and found.kind == "embedding":
        return str(client.embeddings.create(model=name, input=["Say hello."]).model)
    reply = client.chat.completions.create(
        model=name, messages=HI, max_tokens=tokens, temperature=0
    )
    return str(reply.model)


def _client(url: str) -> Any:
    import openai

    return openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=600)


def _swap(pool: ModelPool, client: Any, big: str, small: list[str], tokens: int) -> float:
    """Seconds from asking for `big`, while the `small` models fill the limit, to `big`'s
    first token: one of them is unloaded, `big` loaded, the prompt prefilled."""
    pool.unload_model(big).result()
    for name in small:
        pool.ensure_loaded(name).result()
    started = time.perf_counter()
    stream = client.chat.completions.create(
        model=big, messages=HI, max_tokens=tokens, temperature=0, stream=True
    )
    first = None
    for chunk in stream:
        if first is None and chunk.choices and chunk.choices[0].delta.content:
            first = time.perf_counter()
    if first is None:
        raise RuntimeError(f"{big} wrote nothing after the swap")
    return first - started


@contextmanager
def watching(pool: ModelPool) -> Iterator[list[PoolSnapshot]]:
    """Every distinct pool snapshot published while the block runs (polled every few ms)."""
    seen: list[PoolSnapshot] = []
    stop = threading.Event()

    def poll() -> None:
        last = None
        while not stop.is_set():
            snap = pool.snapshot.pool
            if snap is not None and snap is not last:
                seen.append(snap)
                last = snap
            time.sleep(0.001)

    thread = threading.Thread(target=poll, daemon=True)
    thread.start()
    try:
        yield seen
    finally:
        stop.set()
        thread.join()


def _cap_held(
    pool: ModelPool, client: Any, names: list[str], rounds: int, tokens: int
) -> dict[str, Any]:
    """Requests to each model in turn, every published snapshot checked against the limit."""
    served = 0
    with watching(pool) as seen:
        for _ in range(rounds):
            for name in names:
                answered = _ask(pool, client, name, tokens)
                if answered != name:
                    raise RuntimeError(f"{answered} answered a request for {name}")
                served += 1
    limit = pool.memory_limit_bytes
    worst = max(s.held_bytes for s in seen) if seen else 0
    swaps = sum(
        1
        for before, after in zip(seen, seen[1:], strict=False)
        for a, b in zip(before.models, after.models, strict=False)
        if a.state != "unloading" and b.state == "unloading"
    )
    return {
        "pool_cap_held": 1.0 if worst <= limit else 0.0,
        "pool_held_max_share": round(worst / limit, 3) if limit else 0.0,
        "pool_requests": served,
        "pool_swaps": swaps,
    }


def _sizes(pool: ModelPool) -> dict[str, int]:
    """What each model holds, loaded."""
    snap = pool.snapshot.pool
    assert snap is not None
    return {m.id: m.memory_bytes for m in snap.models}


def _held(pool: ModelPool) -> int:
    snap = pool.snapshot.pool
    return snap.held_bytes if snap is not None else 0


def _wait(check: Any, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError("the pool did not settle under its limit")
        time.sleep(0.01)
