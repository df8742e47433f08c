"""Split a loaded (still lazy) mlx-lm model across the ranks of a group.

Tensor parallel where the model class has mlx-lm's `shard(group)` and its attention heads and
MLP divide evenly among the ranks: every rank holds a slice of every layer and the layers sum
their partial results with `all_sum`. Pipeline otherwise: every rank holds a run of whole
layers (mlx-lm's `PipelineMixin.pipeline`; rank 0 gets the last layers), passes the hidden
state on with `send`/`recv`, and the last stage's output is gathered to all.

mlx-lm's `llama` (the default model's class) has `shard` but no pipeline, and SmolLM2's 9 heads
and 3 KV heads do not split in two; for it a pipelined forward pass like mlx-lm's own (qwen2's)
is put in place here, using `PipelineMixin`'s split.
"""

from __future__ import annotations

from typing import Any, Literal

import mlx.core as mx
from mlx_lm.models import llama
from mlx_lm.models.base import create_attention_mask
from mlx_lm.models.pipeline import PipelineMixin

from engine.errors import ModelLoadError

ShardMode = Literal["auto", "tensor", "pipeline"]
SHARD_MODES: tuple[ShardMode, ...] = ("auto", "tensor", "pipeline")


def _tensor_parallel_problem(model: Any, ranks: int) -> str | None:
    """Why `model.shard` cannot split this model over `ranks` ranks; None if it can."""
    if not hasattr(model, "shard"):
        return f"its class ({type(model).__module__}) has no tensor-parallel `shard`"
    args = getattr(model, "args", None)
    for name in ("num_attention_heads", "num_key_value_heads", "intermediate_size"):
        value = getattr(args, name, None)
        if isinstance(value, int) and value % ranks:
            return f"its {name} ({value}) does not divide among {ranks} ranks"
    return None


def _has_pipeline(model: Any) -> bool:
    inner = getattr(model, "model", None)
    return hasattr(inner, "pipeline") or isinstance(model, llama.Model)


def shard_model(model: Any, group: mx.distributed.Group, mode: ShardMode = "auto") -> str:
    """Split `model` over `group` in place; return how ("tensor" or "pipeline").

    Args:
        model: an mlx-lm model, loaded lazily so that only this rank's share is ever read.
        group: the distributed group (every rank calls this with the same model and mode).
        mode: "auto" (tensor parallel where possible, else pipeline), "tensor" or "pipeline".

    Raises ModelLoadError when the model can be split neither way (or not the way asked).
    """
    ranks = group.size()
    if ranks == 1:
        return "none"
    tensor_problem = _tensor_parallel_problem(model, ranks)
    if mode in ("auto", "tensor") and tensor_problem is None:
        model.shard(group)
        return "tensor"
    if mode == "tensor":
        raise ModelLoadError(f"the model cannot be split tensor-parallel: {tensor_problem}")
    if not _has_pipeline(model):
        raise ModelLoadError(
            f"the model cannot be split across machines: {tensor_problem or 'tensor parallel '}"
            f"and its class ({type(model).__module__}) has no pipeline split"
        )
    layers = len(model.model.layers)
    if layers < ranks:
        raise ModelLoadError(f"the model's {layers} layers cannot be split among {ranks} ranks")
    if isinstance(model, llama.Model) and not hasattr(model.model, "pipeline"):
        _pipeline_llama(model, group)
    else:
        model.model.pipeline(group)
    return "pipeline"


class _PipelinedLlamaModel(PipelineMixin, llama.LlamaModel):
    """mlx-lm's LlamaModel with the pipelined forward pass of its PipelineMixin models."""

    def __call__(
        self, inputs: mx.array, cache: Any = None, input_embeddings: mx.array | None = None
    ) -> mx.array:
        h = input_embeddings if input_embeddings is not None else self.embed_tokens(inputs)
        layers = self.pipeline_layers
        rank, size = self.pipeline_rank, self.pipeline_size
        if cache is None:
            cache = [None] * len(layers)
        full = next((i for i, layer in enumerate(layers) if not layer.use_sliding), None)
        sliding = next((i for i, layer in enumerate(layers) if layer.use_sliding), None)
        full_mask = create_attention_mask(h, cache[full]) if full is not None else None
        sliding_mask = (
            create_attention_mask(h, cache[sliding], window_size=self.sliding_window)
            if sliding is not None
            else None
        )
        if rank < size - 1:  # receive from the stage holding the layers before ours
            h = mx.distributed.recv_like(h, rank + 1)
        for layer, c in zip(layers, cache, strict=True):
            h = layer(h, sliding_mask if layer.use_sliding else full_mask, cache=c)
        if rank != 0:  # hand on to the stage holding the layers after ours
            h = mx.distributed.send(h, (rank - 1) % size)
            if cache[-1] is not None:
                cache[-1].keys = mx.depends(cache[-1].keys, h)
        if size > 1:  # every rank gets the last stage's output, kept in the graph
            h = mx.distributed.all_gather(h)[: h.shape[0]]
        out: mx.array = self.norm(h)
        return out


class _PipelinedLlama(llama.Model):
    """mlx-lm's llama Model whose caches cover only this rank's layers."""

    @property
    def layers(self) -> list[Any]:
        found: list[Any] = self.model.pipeline_layers
        return found


def _pipeline_llama(model: llama.Model, group: mx.distributed.Group) -> None:
    inner = model.model
    inner.__class__ = _PipelinedLlamaModel
    PipelineMixin.pipeline(inner, group)  # type: ignore[no-untyped-call]
    model.__class__ = _PipelinedLlama
