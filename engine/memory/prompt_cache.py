"""An LRU token trie of KV caches: a request prefills only the tokens no earlier request computed.

A radix tree over token ids (edges carry spans of tokens). A node may hold an entry: an mlx-lm
prompt cache whose KV state covers exactly the tokens from the root to that node. Lookups find the
longest common prefix with anything stored and serve it in one of two ways:

- In place (the common path): an entry on the request's own path (the previous prompt plus its
  reply, for the next turn of a chat) is handed out by reference and leaves the trie; the caller
  extends it and gives it back with `store`. Nothing is copied.
- As a branch (regenerate, edit, a second chat sharing the system prompt): the request diverges
  inside a stored entry, so a new cache holding that entry's state up to the divergence is handed
  out. Where the model reads shared-prefix caches (`engine.memory.attention`), the entry's buffers
  are frozen into blocks that both read through views and neither writes again
  (`engine.memory.shared_prefix`): nothing is copied, the branch and the entry each write past the
  branch point into a part of their own. Otherwise the new cache shares the entry's buffers until
  first written (MLX copies the shared part then). The original entry stays, so switching back to
  that branch is still a hit. A divergent tail of a few tokens (a chat template re-rendering the
  end of the last reply, say stripping trailing whitespace) is not worth a branch: it is trimmed
  off in place instead.

Caches that cannot be trimmed (a rotated sliding window, state-space layers) are only ever reused
as exact prefixes: the state of tokens[:n] is never guessed from a longer state.

Eviction is least recently used, by bytes held, against `budget_bytes`; a block shared by
several entries is counted once, while any entry reads it. Recency belongs to nodes:
every lookup touches the nodes of its path, so a prefix many chats pass through (a shared system
prompt) stays recent. When the last entry below a branching node is evicted, it is shrunk to a
compact copy of that shared prefix rather than dropped, so the shared prefix is the last to go.
An entry larger than the whole budget is not kept and evicts nothing.

Protocol, on the engine thread that owns the model (not thread-safe): `cache, n =
trie.fetch(model, prompt)`, prefill `prompt[n:]`, decode, then always (finished, cancelled or
stopped) `trie.store(prompt + fed_tokens, cache)`. Replies decoded side by side interleave these
calls, each with its own cache. The cache's own length decides what is kept: after a cancel
mid-prefill only the computed part is stored; a token fed past the list is trimmed. If the model
raised mid-evaluation, `store` drops a state it cannot evaluate. `reserve(n)` counts n bytes of
KV state held outside the trie (the rows decoding) against the budget.
"""

from __future__ import annotations

import copy
import weakref
from collections.abc import Callable, Sequence
from typing import Any, cast

import mlx.core as mx
from mlx.utils import tree_flatten, tree_map
from mlx_lm.models import cache as mlx_cache

from engine.memory.attention import supports_shared_prefix
from engine.memory.shared_prefix import (
    KVBlock,
    SharedPrefixKVCache,
    blocks_of,
    compact_prefixes,
    freeze,
    plain_layer,
    share,
    shareable,
)
from engine.memory.store import KVState
from engine.types import CacheStats


def _classes(*names: str) -> tuple[type[Any], ...]:
    return tuple(getattr(mlx_cache, n) for n in names if hasattr(mlx_cache, n))


# Layer caches whose keys/values can be sliced to a prefix (while trimmable); of those, the ones
# that write at `offset` into a larger buffer, so they may share a whole buffer holding more.
_SLICEABLE = _classes(
    "KVCache", "ConcatenateKVCache", "QuantizedKVCache", "RotatingKVCache", "ChunkedKVCache"
)
_WRITE_AT_OFFSET = _classes("KVCache", "QuantizedKVCache", "RotatingKVCache", "ChunkedKVCache")


def _leaves(tree: Any) -> list[tuple[str, Any]]:
    """(path, leaf) pairs of an MLX tree: tree_flatten's result when it has no destination."""
    return cast(list[tuple[str, Any]], tree_flatten(tree))


def cache_arrays(cache: KVState) -> list[mx.array]:
    """Every array a prompt cache holds."""
    return [v for c in cache for _, v in _leaves(c.state) if isinstance(v, mx.array)]


def cache_nbytes(cache: KVState) -> int:
    """Bytes of a prompt cache's state, step-allocated slack included (shared blocks count
    whole: what a copy of it would take)."""
    return sum(a.nbytes for a in cache_arrays(cache))


def own_nbytes(cache: KVState) -> int:
    """Bytes of the buffers a prompt cache writes: all of it but the blocks it shares."""
    return sum(
        c.own_nbytes
        if isinstance(c, SharedPrefixKVCache)
        else sum(v.nbytes for _, v in _leaves(c.state) if isinstance(v, mx.array))
        for c in cache
    )


def cache_length(cache: KVState) -> int | None:
    """Tokens covered by a prompt cache (the layers' common offset); None if no layer says.

    Raises ValueError if the layers disagree, which means the cache is corrupt.
    """
    offsets = {int(c.offset) for c in cache if hasattr(c, "offset")}
    if len(offsets) > 1:
        raise ValueError(f"prompt cache layers disagree on their length: {sorted(offsets)}")
    return offsets.pop() if offsets else None


def _slice_layer(c: Any, n: int, compact: bool = False) -> Any:
    """A new layer cache holding the first n tokens of `c`.

    It shares `c`'s buffers until first written to (MLX copies them then), or with `compact`
    gets exact-size buffers of its own at once, so the larger original can be freed. New array
    objects matter either way: MLX's `a[i] = v` updates the array object in place, so a shallow
    copy sharing them would write into the stored entry. A shared-prefix layer is copied into
    one buffer of mlx-lm's own first.
    """
    c = plain_layer(c)
    if isinstance(c, _SLICEABLE) and c.keys is not None:
        out = copy.copy(c)
        end = n - getattr(c, "start_position", 0)
        buffer = _leaves(c.keys)[0][1].shape[2]
        if compact:
            out.keys, out.values = tree_map(
                lambda x: mx.contiguous(x[..., :end, :]), (c.keys, c.values)
            )
        elif 2 * end >= buffer and isinstance(c, _WRITE_AT_OFFSET):
            # Most of the buffer is wanted: share all of it; MLX copies it with one flat memcpy
            # at the first write, about twice as fast as a strided copy of the prefix.
            out.keys, out.values = tree_map(mx.array, (c.keys, c.values))
        else:
            out.keys, out.values = tree_map(lambda x: x[..., :end, :], (c.keys, c.values))
        out.offset = n
        if hasattr(c, "_idx"):  # RotatingKVCache before it wraps: temporal order, idx == offset
            out._idx = n
        return out
    out = copy.deepcopy(c)
    out.trim(int(out.offset) - n)
    return out


def trim_cache(cache: KVState, n: int) -> None:
    """Drop the last n tokens in place (mlx-lm's trim, which a ConcatenateKVCache ignores when it
    appends: cut its arrays too)."""
    mlx_cache.trim_prompt_cache(cache, n)
    for c in cache:
        if not isinstance(c, mlx_cache.ConcatenateKVCache) or c.keys is None or c.values is None:
            continue
        c.keys, c.values = c.keys[..., : c.offset, :], c.values[..., : c.offset, :]


def slice_cache(cache: KVState, n: int, compact: bool = False) -> KVState:
    """A new cache holding the first n tokens of `cache` (see `_slice_layer`)."""
    return [_slice_layer(c, n, compact) for c in cache]


def _matching(tokens: list[int], pos: int, span: list[int]) -> int:
    """How many leading tokens of `span` match `tokens` from `pos` (at least 1: the first
    does), by halving compared runs (C-speed slice comparisons, not a loop per token: a
    branch deep in an 8k-token span is found in a dozen comparisons)."""
    lo, hi = 1, min(len(span), len(tokens) - pos)  # span[:lo] matches; span[:hi + 1] does not
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if tokens[pos + lo : pos + mid] == span[lo:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


class _Node:
    __slots__ = ("span", "parent", "children", "depth", "entry", "n_entries", "shared", "touched")

    def __init__(self, span: list[int], parent: _Node | None, depth: int) -> None:
        self.span = span  # token ids on the edge from the parent
        self.parent = parent
        self.children: dict[int, _Node] = {}
        self.depth = depth  # tokens from the root to the end of this node
        self.entry: _Entry | None = None
        self.n_entries = 0  # entries in this subtree, this node included
        self.shared = False  # has branched: two different continuations were stored through it
        self.touched = 0  # clock of the last lookup or store through this node


class _Entry:
    __slots__ = ("node", "cache", "nbytes", "trimmable", "blocks")

    def __init__(self, node: _Node, cache: KVState, nbytes: int, trimmable: bool) -> None:
        self.node = node
        self.cache = cache
        self.nbytes = nbytes  # of the buffers it writes; the blocks it reads are counted apart
        self.trimmable = trimmable
        self.blocks = blocks_of(cache)


class PromptCacheTrie:
    """LRU token trie of prompt caches for one model, within `budget_bytes`."""

    # Branches share the prefix's blocks where the model reads them (a subclass that mirrors
    # each copy elsewhere turns this off).
    shares_prefixes = True

    def __init__(
        self,
        budget_bytes: int,
        *,
        make_cache: Callable[[Any], KVState] | None = None,
        steal_tail_tokens: int = 4,
        on_evict: Callable[[list[int], KVState], None] | None = None,
    ) -> None:
        """`make_cache(model)` builds an empty cache on a miss (default: mlx-lm's
        `make_prompt_cache`). A divergent tail of at most `steal_tail_tokens` is trimmed off the
        stored entry in place rather than kept by copying the shared part. `on_evict(tokens,
        cache)` is given each entry the trie lets go of (evicted, or too large to keep): the
        disk tier (`engine.memory.tiered`)."""
        self._budget = max(0, int(budget_bytes))
        self._reserved = 0
        self._make_cache = make_cache or mlx_cache.make_prompt_cache
        self._steal_tail = steal_tail_tokens
        self._model_ref: Any = None
        self._shares: bool | None = None  # the model reads shared-prefix caches (asked once)
        self.on_evict = on_evict
        self.clear()

    # -- public API ----------------------------------------------------------------------------

    @property
    def budget_bytes(self) -> int:
        return self._budget

    @budget_bytes.setter
    def budget_bytes(self, value: int) -> None:
        self._budget = max(0, int(value))
        self._evict_to_budget()

    def store_copy(self, tokens: Sequence[int], cache: KVState) -> None:
        """Keep the state of `cache` (holding `tokens`), leaving `cache` to the caller: a
        prompt's state kept for the prompts that share it while it goes on decoding. Where
        branches share blocks, `cache`'s layers are frozen in place (see `shared_prefix`)
        and the entry reads the same blocks: neither copies. Otherwise the entry shares its
        buffers until either is written to (MLX copies then)."""
        n = cache_length(cache)
        if n is None:  # no layer tracks its length: nothing can be sliced
            return
        if self._sharing(cache):  # the caller's cache goes on reading the same blocks
            self._freeze(cache)
            self.store(tokens, share(cache, n, _slice_layer))
            return
        self.store(tokens, self._slice_cache(cache, n))

    def reserve(self, nbytes: int) -> None:
        """Count `nbytes` of KV state held elsewhere (the rows decoding) against the budget,
        evicting entries to make room."""
        self._reserved = max(0, int(nbytes))
        self._evict_to_budget()

    def clear(self) -> None:
        """Drop every entry and reset the statistics."""
        self._root = _Node([], None, 0)
        self._entries: set[_Entry] = set()
        self._blocks: dict[KVBlock, int] = {}  # block -> entries reading it
        self._bytes = 0
        self._clock = 0
        self._loan: tuple[KVState, _Entry, int] | None = None
        self._handed_out: _Node | None = None  # node of the last entry handed out in place
        self._counts = dict.fromkeys(
            (
                "hits",
                "misses",
                "evictions",
                "shrinks",
                "rejected",
                "reused_in_place",
                "copies",
                "shared_branches",
                "cached_tokens_total",
                "prompt_tokens_total",
            ),
            0,
        )

    def fetch(self, model: Any, tokens: Sequence[int]) -> tuple[KVState, int]:
        """Return (cache, n_cached): a cache holding the KV state of tokens[:n_cached], with
        n_cached <= len(tokens) - 1, owned by the caller. A miss gives a fresh cache and 0."""
        self._check_model(model)
        tokens = list(tokens)
        limit = len(tokens) - 1
        self._loan = None
        self._prune_handed_out()  # the previous request never gave its cache back
        self._counts["prompt_tokens_total"] += len(tokens)
        self._clock += 1
        path, matched, partial = self._walk(tokens)
        for node in path:
            node.touched = self._clock

        # Deepest entry on the request's own path: usable in place.
        ref = None
        for node in reversed(path):
            e = node.entry
            if e is not None and (node.depth <= limit or e.trimmable):
                ref = e
                break
        ref_n = min(ref.node.depth, limit) if ref else 0

        # A longer prefix lies inside an entry the request branches off from.
        n_copy = min(matched, limit)
        src = None
        if n_copy > ref_n:
            src = self._trimmable_below(partial if partial is not None else path[-1])

        if src is not None:
            src.node.touched = self._clock
            tail = src.node.depth - n_copy
            if tail <= self._steal_tail and not src.node.children:
                self._remove(src)
                self._handed_out = src.node
                self._trim_cache(src.cache, tail)
                cache = src.cache
                self._counts["reused_in_place"] += 1
            else:
                if self._sharing(src.cache):
                    self._refreeze(src)
                    cache = share(src.cache, n_copy, _slice_layer)
                    self._counts["shared_branches"] += 1
                else:
                    cache = self._slice_cache(src.cache, n_copy)
                    self._counts["copies"] += 1
                self._loan = (cache, src, n_copy)
            n = n_copy
        elif ref is not None:
            self._remove(ref)
            self._handed_out = ref.node
            cache, n = ref.cache, ref.node.depth
            if n > limit:
                self._trim_cache(cache, n - limit)
                n = limit
            self._counts["reused_in_place"] += 1
        else:
            cache, n = self._make_cache(model), 0
        self._counts["hits" if n else "misses"] += 1
        self._counts["cached_tokens_total"] += n
        return cache, n

    def store(self, tokens: Sequence[int], cache: KVState) -> None:
        """Keep `cache`, whose KV state covers `tokens` (or the first part of them that was
        computed before a cancel), by reference, then evict LRU entries to stay in budget."""
        tokens = list(tokens)
        loan, self._loan = self._loan, None
        n = cache_length(cache)
        if n is None:  # no layer tracks its length (state-space only): trust the caller
            n = len(tokens)
        elif n > len(tokens):  # e.g. one token fed past the last one reported
            if not mlx_cache.can_trim_prompt_cache(cache):
                return  # state of tokens[:len(tokens)] is unrecoverable; never store it wrong
            self._trim_cache(cache, n - len(tokens))
            n = len(tokens)
        tokens = tokens[:n]
        if n == 0:
            return
        if loan is not None and loan[0] is cache and n <= loan[2] and loan[1] in self._entries:
            return  # an untouched copy of a prefix the trie still holds
        arrays = cache_arrays(cache)
        try:
            mx.eval(arrays)  # no lazy graph (and its inputs) kept alive by the trie
        except Exception:  # the request failed mid-evaluation: its state is not to be trusted
            self._prune_handed_out()
            return
        nbytes = own_nbytes(cache)
        if nbytes + sum(b.nbytes for b in blocks_of(cache) - self._blocks.keys()) > self._budget:
            self._counts["rejected"] += 1
            self._prune_handed_out()
            if self.on_evict is not None and mlx_cache.can_trim_prompt_cache(cache):
                self.on_evict(tokens, cache)
            return
        trimmable = mlx_cache.can_trim_prompt_cache(cache)
        path, matched, partial = self._walk(tokens)
        if (
            trimmable
            and matched == n
            and self._trimmable_below(partial or path[-1], deeper_than=n) is not None
        ):
            self._prune_handed_out()
            return  # a longer stored entry already serves this prefix
        self._clock += 1
        node, path = self._insert_path(tokens)
        if node.entry is not None:
            self._remove(node.entry)
        if trimmable:  # shorter trimmable entries on this path are now redundant
            for p in path[:-1]:
                if p.entry is not None and p.entry.trimmable:
                    self._remove(p.entry)
        for p in path:
            p.touched = self._clock
        self._add(node, cache, nbytes, trimmable)
        self._prune_handed_out()
        self._evict_to_budget()

    def longest(self, tokens: Sequence[int]) -> int:
        """How many tokens of `tokens` a `fetch` would serve now (at most len - 1), without
        changing anything."""
        tokens = list(tokens)
        limit = len(tokens) - 1
        path, matched, partial = self._walk(tokens)
        best = 0
        for node in reversed(path):
            e = node.entry
            if e is not None and (node.depth <= limit or e.trimmable):
                best = min(node.depth, limit)
                break
        n_copy = min(matched, limit)
        if n_copy > best and self._trimmable_below(partial or path[-1]) is not None:
            best = n_copy
        return best

    def note_hit(self, model: Any, n_tokens: int, n_cached: int) -> None:
        """Count a prompt of `n_tokens` served `n_cached` tokens from elsewhere (the disk)."""
        self._check_model(model)
        self._loan = None
        self._prune_handed_out()
        self._counts["prompt_tokens_total"] += n_tokens
        self._counts["cached_tokens_total"] += n_cached
        self._counts["hits"] += 1

    def entries(self) -> list[tuple[list[int], KVState]]:
        """(tokens, cache) of every entry, most recently used first."""
        ordered = sorted(self._entries, key=lambda e: -e.node.touched)
        return [(self._tokens_of(e.node), e.cache) for e in ordered]

    def stats(self) -> CacheStats:
        """Entries, bytes, budget and counters since the last `clear`."""
        c = self._counts
        return CacheStats(
            entries=len(self._entries),
            bytes=self._bytes,
            budget_bytes=self._budget,
            stored_tokens=sum(e.node.depth for e in self._entries),
            **c,
            hit_rate=c["cached_tokens_total"] / max(1, c["prompt_tokens_total"]),
            reserved_bytes=self._reserved,
        )

    # -- the two operations on a cache (a subclass may mirror them elsewhere) ------------------

    def _trim_cache(self, cache: KVState, n: int) -> None:
        """Drop the last n tokens of `cache` in place."""
        trim_cache(cache, n)

    def _slice_cache(self, cache: KVState, n: int, compact: bool = False) -> KVState:
        """A new cache holding the first n tokens of `cache` (see `_slice_layer`)."""
        return slice_cache(cache, n, compact)

    # -- tree ------------------------------------------------------------------------------------

    def _tokens_of(self, node: _Node) -> list[int]:
        spans: list[list[int]] = []
        n: _Node | None = node
        while n is not None:
            spans.append(n.span)
            n = n.parent
        return [t for span in reversed(spans) for t in span]

    def _check_model(self, model: Any) -> None:
        current = self._model_ref() if self._model_ref is not None else None
        if current is model:
            return
        if self._model_ref is not None:
            self.clear()  # caches of another model are meaningless for this one
        self._shares = None
        try:
            self._model_ref = weakref.ref(model)
        except TypeError:
            self._model_ref = lambda m=model: m

    def _walk(self, tokens: list[int]) -> tuple[list[_Node], int, _Node | None]:
        """Follow `tokens` down: (fully matched nodes from the root, tokens matched, the child
        whose span the match ends inside, if any)."""
        node, pos, path = self._root, 0, [self._root]
        while pos < len(tokens):
            child = node.children.get(tokens[pos])
            if child is None:
                return path, pos, None
            span = child.span
            if tokens[pos : pos + len(span)] == span:
                pos += len(span)
                node = child
                path.append(child)
                continue
            return path, pos + _matching(tokens, pos, span), child
        return path, pos, None

    def _insert_path(self, tokens: list[int]) -> tuple[_Node, list[_Node]]:
        """The node at exactly len(tokens), creating or splitting nodes; and the path to it."""
        path, pos, partial = self._walk(tokens)
        node = path[-1]
        if partial is not None:  # split the edge where the match ends
            k = pos - node.depth
            mid = _Node(partial.span[:k], node, node.depth + k)
            partial.span = partial.span[k:]
            partial.parent = mid
            mid.children[partial.span[0]] = partial
            mid.n_entries, mid.touched = partial.n_entries, partial.touched
            node.children[mid.span[0]] = mid
            node = mid
            path.append(mid)
        if pos < len(tokens):
            if node is not self._root and any(c.n_entries for c in node.children.values()):
                node.shared = True
            leaf = _Node(tokens[pos:], node, len(tokens))
            node.children[tokens[pos]] = leaf
            node = leaf
            path.append(leaf)
        return node, path

    def _trimmable_below(self, node: _Node, deeper_than: int = -1) -> _Entry | None:
        """The shallowest trimmable entry in `node`'s subtree deeper than `deeper_than`."""
        best, stack = None, [node]
        while stack:
            n = stack.pop()
            if n.n_entries == 0 or (best is not None and n.depth >= best.node.depth):
                continue
            if n.entry is not None and n.entry.trimmable and n.depth > deeper_than:
                best = n.entry
                continue
            stack.extend(n.children.values())
        return best

    def _add(self, node: _Node, cache: KVState, nbytes: int, trimmable: bool) -> None:
        node.entry = _Entry(node, cache, nbytes, trimmable)
        self._entries.add(node.entry)
        self._bytes += nbytes
        self._count_blocks(node.entry, 1)
        n: _Node | None = node
        while n is not None:
            n.n_entries += 1
            n = n.parent

    def _remove(self, entry: _Entry) -> None:
        node = entry.node
        node.entry = None
        self._entries.discard(entry)
        self._bytes -= entry.nbytes
        self._count_blocks(entry, -1)
        n: _Node | None = node
        while n is not None:
            n.n_entries -= 1
            n = n.parent

    def _prune(self, node: _Node) -> None:
        """Drop `node` and its ancestors while they are empty leaves; splice out a remaining
        empty pass-through node so a long chat stays a short chain."""
        while node.parent is not None and node.entry is None and not node.children:
            if node.parent.children.get(node.span[0]) is node:
                del node.parent.children[node.span[0]]
            node = node.parent
        if node.parent is not None and node.entry is None and len(node.children) == 1:
            if not node.shared and node.parent.children.get(node.span[0]) is node:
                (child,) = node.children.values()
                child.span = node.span + child.span
                child.parent = node.parent
                node.parent.children[child.span[0]] = child

    # -- shared prefixes ----------------------------------------------------------------------

    def _sharing(self, cache: KVState) -> bool:
        """Whether a branch of `cache` shares its blocks (the model reads shared-prefix
        caches: checked at the first branch) rather than copying them."""
        if not self.shares_prefixes or not shareable(cache):
            return False
        if self._shares is None:
            model = self._model_ref() if self._model_ref is not None else None
            self._shares = model is not None and supports_shared_prefix(model, _slice_layer)
        return self._shares

    def _freeze(self, cache: KVState) -> None:
        """Make what `cache` wrote blocks (in place, no copy; see `shared_prefix.freeze`),
        compacting a prefix read in too many pieces."""
        freeze(cache)
        compact_prefixes(cache)

    def _refreeze(self, entry: _Entry) -> None:
        """Freeze a stored entry's cache, its bytes now counted as the blocks it reads."""
        self._count_blocks(entry, -1)
        self._bytes -= entry.nbytes
        self._freeze(entry.cache)
        entry.nbytes = own_nbytes(entry.cache)
        entry.blocks = blocks_of(entry.cache)
        self._bytes += entry.nbytes
        self._count_blocks(entry, 1)

    def _count_blocks(self, entry: _Entry, sign: int) -> None:
        """Count (+1) or discount (-1) the blocks `entry` reads: each block's bytes once,
        while any entry reads it."""
        for block in entry.blocks:
            readers = self._blocks.get(block, 0) + sign
            if readers > 0:
                if readers == 1 and sign > 0:
                    self._bytes += block.nbytes
                self._blocks[block] = readers
            else:
                self._bytes -= block.nbytes
                self._blocks.pop(block, None)

    def _prune_handed_out(self) -> None:
        if self._handed_out is not None:
            self._prune(self._handed_out)
            self._handed_out = None

    def _evict_to_budget(self) -> None:
        while self._bytes + self._reserved > self._budget and self._entries:
            victim = min(self._entries, key=lambda e: (e.node.touched, -e.node.depth))
            target = None
            if victim.trimmable:
                n = victim.node.parent
                while n is not None and n.depth > 0 and not n.shared:
                    n = n.parent
                if n is not None and n.depth > 0 and n.n_entries == 1:
                    target = n  # the victim is the last entry holding this shared prefix
            if self.on_evict is not None and victim.trimmable:
                self.on_evict(self._tokens_of(victim.node), victim.cache)
            if target is not None:
                compact = self._slice_cache(victim.cache, target.depth, compact=True)
                arrays = cache_arrays(compact)
                mx.eval(arrays)
                nbytes = sum(a.nbytes for a in arrays)
                if nbytes < cache_nbytes(victim.cache):
                    self._add(target, compact, nbytes, True)
                    self._counts["shrinks"] += 1
            self._remove(victim)
            self._prune(victim.node)
            self._counts["evictions"] += 1
