"""The model pool: several models behind one EngineAPI (`python -m engine serve --model A
--model B`, the app's chat and its local server), each loaded on first use and unloaded
when another needs its memory.

One module per concern: `pool` (ModelPool: the EngineAPI, routing requests by the model
they name), `requests` (requests waiting for a load, leases, a model's settings applied),
`state` (the models and settings under one lock, and what is published), `upkeep` (the
pool's thread: what loads and unloads, and when), `settings_file` (the watched file),
`memory` (the limit, estimates, KV shares, which models make room), `entry` (one model's
state), `backends` (what a model of each kind loads as: a chat model is an Engine of its
own), `embedding` (embedding and rerank models as backends: EMBEDDING_LOADERS), `names`
(ids and the names a request may use), `settings` (each model's settings and the TOML file
that gives them), `cli` (serve's flags into a pool).
"""

from engine.pool.backends import Backend, BackendLoader, ChatBackend, LoadOrder
from engine.pool.embedding import EMBEDDING_LOADERS, EmbeddingBackend
from engine.pool.pool import DEFAULT_LOAD_WAIT_S, ModelPool
from engine.pool.requests import MODEL_BUSY, Lease
from engine.pool.settings import ModelSettings, ModelSettingsError

__all__ = [
    "Backend",
    "BackendLoader",
    "ChatBackend",
    "DEFAULT_LOAD_WAIT_S",
    "EMBEDDING_LOADERS",
    "EmbeddingBackend",
    "Lease",
    "LoadOrder",
    "MODEL_BUSY",
    "ModelPool",
    "ModelSettings",
    "ModelSettingsError",
]
