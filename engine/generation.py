"""One chat reply from start to finish, run on the engine thread.

Builds the prompt, takes the longest cached prefix, prefills the rest in cancellable
chunks, decodes (free or constrained), applies stop conditions, streams text deltas and
gathers the reply's statistics. The KV cache always goes back to the prompt cache with
exactly the tokens it holds, also after a cancel or an error.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from engine.decode import Cancelled, decode_free, prefill
from engine.prompt import encode_chat, render_continuation
from engine.reply_text import ReplyText
from engine.sampling import build_processors, build_sampler, end_token_ids, seed_generation
from engine.tokenizer import ModelTokenizer
from engine.types import (
    ChatResult,
    ConstraintUse,
    GenerationStats,
    PrefillProgress,
    StopReason,
    TextDelta,
    ToolCall,
)

if TYPE_CHECKING:
    from engine.engine import PromptCacheStore, RequestHandle
    from engine.models import LoadedModel


def generate_reply(
    loaded: LoadedModel, prompt_cache: PromptCacheStore, handle: RequestHandle, started: float
) -> ChatResult:
    """Generate the reply for `handle.request` with `loaded` (model + tokenizer)."""
    request = handle.request
    model, tokenizer = loaded.model, loaded.tokenizer
    settings = request.sampling
    settings.validate()

    tool_plan = None
    constraint = request.constraint
    constraint_use: ConstraintUse | None = None if constraint is None else "alone"
    if request.continue_final_message:
        if request.tools or constraint is not None:
            raise ValueError("a reply can be continued only without tools or a constraint")
        prompt_tokens = render_continuation(tokenizer, request.messages)
    elif request.tools:
        from engine.tools import prepare_tool_request

        tool_plan = prepare_tool_request(
            tokenizer,
            request.messages,
            request.tools,
            request.tool_choice,
            parallel_tool_calls=request.parallel_tool_calls,
            user_constraint=constraint,
            schema_options=request.schema_options,
        )
        prompt_tokens = tool_plan.prompt_tokens
        constraint, constraint_use = tool_plan.constraint, tool_plan.user_constraint
    elif request.raw_prompt is not None:
        # As written (special-token text counts), with the BOS the model wants.
        prompt_tokens = list(ModelTokenizer.of(tokenizer).hf.encode(request.raw_prompt))
    else:
        prompt_tokens = encode_chat(tokenizer, request.messages)
    if not prompt_tokens:
        raise ValueError("the prompt is empty")
    splitter = tool_plan.stream() if tool_plan is not None else None

    def emit_text(delta: str) -> None:
        if splitter is None:
            handle.emit(TextDelta(delta))
        else:
            for event in splitter.feed(delta):
                handle.emit(event)

    stats = GenerationStats(prompt_tokens=len(prompt_tokens))
    seed_generation(settings)
    cache, n_cached = prompt_cache.fetch(model, prompt_tokens)
    stats.cached_tokens = n_cached
    fed: list[int] = list(prompt_tokens[:n_cached])
    reply = ReplyText(tokenizer, settings.stop)
    generated: list[int] = []
    stop_reason = StopReason.LENGTH
    first_token_at: float | None = None
    last_token_at = 0.0
    incomplete = False
    runtime = None

    def progress(done: int, total: int) -> None:
        handle.emit(PrefillProgress(n_cached + done, len(prompt_tokens)))

    try:
        sampler, processors = build_sampler(settings), build_processors(settings)
        ends = end_token_ids(tokenizer)
        if constraint is not None:
            from engine.constraints.loop import ConstrainedDecoder

            # Built before prefill: syntax errors fail at once, and the grammar compiles
            # on the mask thread while the prompt is processed.
            runtime = ConstrainedDecoder(
                tokenizer,
                constraint,
                ends,
                max_tokens=settings.max_tokens if request.close_to_fit else None,
                close_loops=request.close_loops,
            )
        prefill(
            model,
            cache,
            prompt_tokens[n_cached:-1],
            fed,
            cancel=handle.cancel_event,
            on_progress=progress,
        )
        if runtime is not None:
            tokens = runtime.decode(
                model,
                cache,
                prompt_tokens[-1:],
                fed,
                sampler=sampler,
                processors=processors,
                history=prompt_tokens,
            )
        else:
            tokens = decode_free(
                model,
                cache,
                prompt_tokens[-1:],
                fed,
                sampler=sampler,
                processors=processors,
                history=prompt_tokens,
            )
        try:
            for token in tokens:
                last_token_at = time.perf_counter()
                first_token_at = first_token_at or last_token_at
                if handle.cancelled:
                    stop_reason = StopReason.CANCELLED
                    break
                if token in ends:
                    stop_reason = StopReason.EOS
                    break
                generated.append(token)
                if delta := reply.add(token):
                    emit_text(delta)
                if reply.stopped:
                    stop_reason = StopReason.STOP_STRING
                    break
                if runtime is not None and runtime.finished:  # also on the budget's last token
                    stop_reason = StopReason.EOS
                    break
                if len(generated) >= settings.max_tokens:
                    stop_reason = StopReason.LENGTH
                    break
            else:  # the decoder ended the reply without a token (closed where it stood)
                if runtime is not None and runtime.finished:
                    stop_reason = StopReason.EOS
        finally:
            tokens.close()
    except Cancelled:
        stop_reason = StopReason.CANCELLED
    finally:
        prompt_cache.store(fed, cache)

    if delta := reply.finish():
        emit_text(delta)
    if splitter is not None:
        for event in splitter.finish():
            handle.emit(event)
    now = time.perf_counter()
    stats.generated_tokens = len(generated)
    stats.stop_reason = stop_reason.value
    stats.total_s = now - started
    if first_token_at is not None:
        stats.ttft_s = first_token_at - started
        new_tokens = len(prompt_tokens) - n_cached
        stats.prefill_tps = new_tokens / stats.ttft_s if stats.ttft_s > 0 else 0.0
        if len(generated) > 1 and last_token_at > first_token_at:
            stats.decode_tps = (len(generated) - 1) / (last_token_at - first_token_at)
    notes: list[str] = []
    tight: list[str] = []
    if runtime is not None:
        runtime.fill_stats(stats)
        incomplete = stop_reason == StopReason.LENGTH or not runtime.accepting
        if stop_reason == StopReason.CANCELLED:
            incomplete = True
        if tool_plan is None:
            from engine.constraints.validate import constraint_notes

            notes, tight = constraint_notes(runtime.constraint)
        if incomplete and stop_reason == StopReason.LENGTH and request.close_to_fit:
            notes.append(_unclosed(runtime.closing_needed, settings.max_tokens))

    text, calls = reply.text, list[ToolCall]()
    if tool_plan is not None:
        text, calls = tool_plan.parse(reply.text)
        if splitter is not None:
            calls = splitter.with_ids(calls)
    return ChatResult(
        text=text,
        stop_reason=stop_reason,
        stats=stats,
        incomplete=incomplete,
        constraint_name=constraint.name or constraint.kind if constraint is not None else None,
        tool_calls=calls,
        constraint_use=constraint_use,
        warnings=tool_plan.warnings if tool_plan is not None else notes,
        tight=tight,
        token_ids=list(fed),
        prompt_length=len(prompt_tokens),
    )


def _unclosed(needed: int | None, max_tokens: int) -> str:
    """Why a constrained reply could not be closed within `max_tokens`."""
    if needed is None:
        return f"the reply ran to max_tokens ({max_tokens}) before it could be closed"
    if needed < 0:
        return (
            f"the reply ran to max_tokens ({max_tokens}): the constraint has no valid ending "
            "within the tokens that were left"
        )
    return (
        f"the reply ran to max_tokens ({max_tokens}): the shortest valid ending found needed "
        f"{needed} tokens, more than were left"
    )
