"""One chat reply from its request to its result, on the engine thread.

`Reply` is everything about one reply that does not depend on which other replies decode
beside it: it builds the prompt (chat template, tools, a continuation or a raw prompt),
checks it fits the model's context (`engine.runtime.context`), starts its constraint's matcher
(which compiles while the prompt is prefilled, with the closing policy's budget), takes
the tokens the decode loop hands it (streaming text deltas and tool-call deltas, applying
stop strings, end tokens and the length limit), and turns the ending into the ChatResult
with the reply's statistics. A model that thinks first (`engine.prompt.reasoning`)
has its thinking block taken apart from the answer: streamed as ReasoningDelta, kept in
`ChatResult.reasoning`, its end forced when the thinking budget is spent.
`engine.runtime.scheduler` prefills its prompt from the prompt cache's longest prefix
and runs it as a row of the decode batch (`engine.runtime.batch`).
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from engine.constraints.closing import MARGIN as CLOSING_MARGIN
from engine.prompt.chat import encode_chat, render_continuation
from engine.prompt.reasoning import (
    ReplyStart,
    reply_start,
    switched_messages,
    thinking_kwargs,
    wants_thinking,
)
from engine.prompt.tokenizer import ModelTokenizer
from engine.runtime.batch import DecodeRow
from engine.runtime.context import KVMemory, reply_budget, room_taken, tool_definition_tokens
from engine.runtime.reply_text import ReplyText
from engine.runtime.sampling import RowSampler, build_processors, end_token_ids
from engine.runtime.speculative import Drafter, Speculator
from engine.runtime.vision import VisionPrompt, request_images
from engine.types import (
    AsWrittenCheck,
    ChatRequest,
    ChatResult,
    ConstraintSpec,
    ConstraintUse,
    GenerationStats,
    PrefillProgress,
    ReasoningDelta,
    ReasoningFormat,
    StopReason,
    TextDelta,
    TokenLogprob,
    TokenLogprobs,
    ToolCall,
    ToolCallDelta,
)

if TYPE_CHECKING:
    from engine.constraints.reasoning import ThinkingRow
    from engine.constraints.row import RowConstraint
    from engine.library.load import LoadedModel
    from engine.memory.store import KVState
    from engine.runtime.handle import RequestHandle
    from engine.runtime.logprobs import RowLogprobs, TokenText
    from engine.tools import ToolPlan


def request_prompt(
    tokenizer: Any, request: ChatRequest, reasoning: ReasoningFormat | None = None
) -> tuple[list[int], ToolPlan | None]:
    """The prompt tokens the engine reads for `request`, and its tool plan when it offers
    tools: the chat template's rendering (with the tools' prompt), a continuation of the
    last assistant message, or a raw prompt as written.

    Args:
        tokenizer: the loaded model's tokenizer.
        request: the request.
        reasoning: the model's reasoning format (ModelInfo.reasoning): the template is told
            whether to think, and a block the prompt opens is closed when not.

    Raises ValueError (ToolDefinitionError among them) for a conversation the template
    cannot render or bad tools.
    """
    if request.continue_final_message:
        if request.tools or request.constraint is not None:
            raise ValueError("a reply can be continued only without tools or a constraint")
        return render_continuation(tokenizer, request.messages), None
    think = wants_thinking(reasoning, request.sampling.think)
    kwargs = {
        **request.template_kwargs,
        **thinking_kwargs(reasoning, think, request.sampling.max_thinking_tokens),
    }
    messages = switched_messages(reasoning, list(request.messages), think)
    if request.tools:
        from engine.tools import prepare_tool_request

        plan = prepare_tool_request(
            tokenizer,
            messages,
            request.tools,
            request.tool_choice,
            parallel_tool_calls=request.parallel_tool_calls,
            user_constraint=request.constraint,
            schema_options=request.schema_options,
            template_kwargs=kwargs,
        )
        return _closed(reasoning, plan.prompt_tokens, think), plan
    if request.raw_prompt is not None:
        # As written (special-token text counts), with the BOS the model wants.
        return list(ModelTokenizer.of(tokenizer).hf.encode(request.raw_prompt)), None
    return _closed(reasoning, encode_chat(tokenizer, messages, **kwargs), think), None


def _closed(reasoning: ReasoningFormat | None, prompt: list[int], think: bool) -> list[int]:
    """`prompt` with the thinking block it opened closed, for a reply that does not think
    (DeepSeek-R1's templates open it whatever they are told)."""
    if think or reasoning is None or not reasoning.steerable:
        return prompt
    if reply_start(reasoning, prompt) != "inside":
        return prompt
    end = reasoning.closing if reasoning.end_is_text else (reasoning.end_id,)
    return [*prompt, *(t for t in end if t is not None)]


def thinking_start(
    reasoning: ReasoningFormat | None, request: ChatRequest, prompt: list[int]
) -> ReplyStart:
    """Where a reply to `prompt` starts with respect to thinking: "off" unless it thinks."""
    if request.raw_prompt is not None or request.continue_final_message:
        return "off"
    if reasoning is None or not wants_thinking(reasoning, request.sampling.think):
        return "off"
    return reply_start(reasoning, prompt)


class Reply:
    """One request's reply: its prompt, constraint, text, figures and events.

    Raises ValueError (or another CorralError) from the constructor for a request that
    cannot be served: bad settings, a conversation the template cannot render, bad tools.
    """

    def __init__(
        self,
        loaded: LoadedModel,
        handle: RequestHandle,
        started: float,
        memory: KVMemory | None = None,
    ) -> None:
        request = handle.request
        tokenizer = loaded.tokenizer
        self.handle = handle
        self.started = started
        self.settings = settings = request.sampling
        settings.validate()

        self.tool_plan: ToolPlan | None = None
        constraint = request.constraint
        self.constraint_use: ConstraintUse | None = None if constraint is None else "alone"
        self.user_constraint = constraint  # as the user wrote it, for the as-written check
        images = request_images(loaded, request)  # checked (or refused) before the template
        reasoning = loaded.info.reasoning
        prompt_tokens, self.tool_plan = request_prompt(tokenizer, request, reasoning)
        # A prompt with images: their positions keyed by digest, their embeddings on demand.
        self.vision = VisionPrompt.build(loaded, prompt_tokens, images) if images else None
        if self.vision is not None:
            prompt_tokens = self.vision.tokens
        if self.tool_plan is not None:
            constraint = self.tool_plan.constraint
            self.constraint_use = self.tool_plan.user_constraint
        if not prompt_tokens:
            raise ValueError("the prompt is empty")
        # Before any prefill: a prompt the model cannot read is refused with the numbers.
        self.budget = reply_budget(
            len(prompt_tokens),
            loaded.info.context_length,
            settings.max_tokens,
            lambda: tool_definition_tokens(tokenizer, request, len(prompt_tokens)),
            memory,
            # the closing policy keeps its margin from the model (engine.runtime.context)
            CLOSING_MARGIN + 1 if constraint is not None and request.close_to_fit else 1,
        )
        self.prompt_tokens: list[int] = prompt_tokens
        self._context_length = loaded.info.context_length
        self.constraint: ConstraintSpec | None = constraint
        self._splitter = self.tool_plan.stream() if self.tool_plan is not None else None

        self.stats = GenerationStats(prompt_tokens=len(prompt_tokens))
        self.ends = end_token_ids(tokenizer)
        for marker in self.tool_plan.end_markers() if self.tool_plan is not None else []:
            if (marker_id := ModelTokenizer.of(tokenizer).token_id(marker)) is not None:
                self.ends.add(marker_id)
        if reasoning is not None and reasoning.steerable and reasoning.end_id is not None:
            # gpt-oss closes its analysis with <|end|>, which other templates end turns with
            self.ends.discard(reasoning.end_id)
        # the format's tool-result markup, which a model copies from its prompt, never shows
        hidden = self.tool_plan.hidden if self.tool_plan is not None else []
        self._text = ReplyText(tokenizer, settings.stop, hidden)
        # thinking: where the reply starts, the block's text, its tokens, its budget
        self._phase: ReplyStart | str = thinking_start(reasoning, request, prompt_tokens)
        self._reasoning_format = reasoning
        self._thought = self._phase != "off"
        # the block's text; an end of several tokens is found in it, and never shown
        stop = [reasoning.end_text] if reasoning is not None and reasoning.end_is_text else []
        self._reasoning = ReplyText(tokenizer, stop) if self._thought else None
        self._thinking_tokens = 0
        # the rest of a marker being written (gpt-oss's `analysis<|message|>`), and
        # whether the reply forces it
        self._pending: list[int] = []
        self._forcing = False
        self._ending: list[int] = []  # the rest of an end of several tokens being forced
        self._thinking_started: float | None = None
        self._thinking_s = 0.0
        self._answer_begun = False  # its leading blank lines are dropped
        self._answer_tokens = 0
        budget = settings.max_thinking_tokens
        self._thinking_cap = None if budget is None else max(0, min(budget, self.budget - 1))
        if self._phase == "off":
            self._phase = "answer"
        self.generated: list[int] = []
        # where the closing policy's tokens began: reply tokens before them, and the
        # answer's text length (characters) then; None while the model writes
        self._closing_at: int | None = None
        self._closing_char = 0
        self._logprobs_sent = 0  # recorded tokens streamed so far
        self.n_cached = 0
        self._first_token_at: float | None = None
        self._last_token_at = 0.0
        self.row_constraint: RowConstraint | None = None
        self.speculator: Speculator | None = None
        if constraint is not None:
            from engine.constraints.row import RowConstraint

            # Built before prefill: syntax errors fail at once, and the grammar compiles
            # on the mask pool while the prompt is processed.
            self.row_constraint = RowConstraint(
                tokenizer,
                constraint,
                self.ends,
                max_tokens=self.budget if request.close_to_fit else None,
                close_loops=request.close_loops,
                cancelled=lambda: self.handle.cancelled,
                thinking=self._thinking_row(settings.max_thinking_tokens),
            )
        self._close_to_fit = request.close_to_fit
        self.row_logprobs: RowLogprobs | None = None
        self._token_text: TokenText | None = None
        if request.logprobs is not None:
            from engine.runtime.logprobs import RowLogprobs, TokenText

            self.row_logprobs = RowLogprobs(request.logprobs, len(prompt_tokens))
            self._token_text = TokenText(tokenizer)

    def _thinking_row(self, budget: int | None) -> ThinkingRow | None:
        """The constraint's view of this reply's thinking (None: it does not think)."""
        fmt = self._reasoning_format
        if not self._thought or fmt is None or not fmt.closing:
            return None
        from engine.constraints.reasoning import ThinkingRow

        return ThinkingRow(
            fmt.start_id,
            fmt.end_id,
            self._phase in ("thinking", "inside"),  # the prompt opened the block
            budget,
            open_ids=fmt.opening,
            close_ids=fmt.closing,
            prefix_ids=fmt.prefix_ids,
            separator=fmt.separator,
            end_text=fmt.end_text if fmt.end_is_text else "",
        )

    def forced_token(self) -> int | None:
        """The token the reply must take next whatever the model says, for a reply that
        thinks without a constraint (under one, its matcher forces these): the opening
        first, and the closing once the thinking budget is spent."""
        if self.row_constraint is not None:
            return None
        if self._pending and self._forcing:
            return self._pending[0]
        if self._phase == "answer":
            return None
        cap, fmt = self._thinking_cap, self._reasoning_format
        if self._phase == "before" and fmt is not None and fmt.opening:
            self._forcing = True
            return fmt.opening[0]
        if cap is None or fmt is None or self._thinking_tokens < cap:
            return None
        if fmt.end_is_text:  # its tokens, one by one (each is taken as the block's text)
            self._ending = self._ending or list(fmt.closing)
            return self._ending[0]
        self._forcing = True
        return fmt.end_id

    def _take_thinking(self, token: int) -> bool:
        """Follow the thinking block through `token`; True if the token belongs to it (a
        marker or the block's text)."""
        fmt = self._reasoning_format
        assert fmt is not None and self._reasoning is not None
        if self._pending:  # the rest of a marker: swallowed while it matches
            if token == self._pending[0]:
                self._pending.pop(0)
                return True
            self._pending, self._forcing = [], False
            if self._phase == "answer":
                return False
        now = time.perf_counter()
        if self._phase == "before":
            if not fmt.opening or token != fmt.opening[0]:
                self._phase = "answer"
                return False
            self._phase, self._thinking_started = "thinking", now
            self._pending = list(fmt.opening[1:])
            return True
        self._thinking_started = self._thinking_started or now
        if self._ending and token == self._ending[0]:
            self._ending.pop(0)  # a forced end of several tokens, taken as the others are
        if token == fmt.end_id:
            self._end_thinking(now, [*fmt.closing[1:], *fmt.prefix_ids])
            return True
        self._thinking_tokens += 1
        if delta := self._reasoning.add(token):
            self.handle.emit(ReasoningDelta(delta))
        if fmt.end_is_text and self._reasoning.stopped:  # its end's text is complete
            self._ending = []
            self._end_thinking(now, list(fmt.prefix_ids))
        return True

    def _end_thinking(self, now: float, pending: list[int]) -> None:
        """The block ended at `now`; `pending`: what may follow before the answer."""
        assert self._reasoning is not None and self._thinking_started is not None
        self._phase = "answer"
        self._pending = pending
        self._thinking_s = now - self._thinking_started
        if delta := self._reasoning.finish():
            self.handle.emit(ReasoningDelta(delta))

    @property
    def cancelled(self) -> bool:
        return self.handle.cancelled

    def progress(self, done: int) -> None:
        """`done` prompt tokens of this reply are in its KV state."""
        self.handle.emit(PrefillProgress(done, len(self.prompt_tokens)))

    def row(self, cache: KVState, fed: list[int], drafter: Drafter | None = None) -> DecodeRow:
        """This reply as a row of the decode batch; `cache` holds `fed`, the prompt but its
        last token, which the row feeds first. With a `drafter` it decodes speculatively
        (unless a repetition penalty reads its tokens one by one)."""
        assert fed == self.prompt_tokens[:-1]
        processors = build_processors(self.settings)
        if drafter is not None and not processors and self.row_logprobs is None:
            self.speculator = Speculator(drafter, lambda: self.budget - len(self.generated))
        return DecodeRow(
            self,
            cache,
            fed,
            self.prompt_tokens[-1:],
            sampler=RowSampler(self.settings),
            processors=processors,
            constraint=self.row_constraint,
            row_logprobs=self.row_logprobs,
            speculator=self.speculator,
            rope_delta=self.vision.rope_delta if self.vision is not None else 0,
        )

    def take(self, token: int) -> StopReason | None:
        """A token of the reply, sampled or forced: stream its text; a reason ends the reply."""
        self._last_token_at = time.perf_counter()
        self._first_token_at = self._first_token_at or self._last_token_at
        rc = self.row_constraint
        if self._closing_at is None and rc is not None and rc.closed_to_fit:
            self._closing_began(rc)
        if token in self.ends:
            return StopReason.EOS
        self.generated.append(token)
        if self.row_logprobs is not None:
            assert self._token_text is not None
            self.row_logprobs.given(token)
            if ready := self.row_logprobs.ready(self._token_text):
                self._emit_logprobs(ready)
        if (self._phase != "answer" or self._pending) and self._take_thinking(token):
            return StopReason.LENGTH if len(self.generated) >= self.budget else None
        self._answer_tokens += 1
        if delta := self._text.add(token):
            self._emit_text(delta)
        if self._text.stopped:
            return StopReason.STOP_STRING
        if len(self.generated) >= self.budget:
            return StopReason.LENGTH
        return None

    def _emit_logprobs(self, tokens: list[TokenLogprob]) -> None:
        """Stream the next recorded tokens, those the closing policy wrote marked so."""
        start, self._logprobs_sent = self._logprobs_sent, self._logprobs_sent + len(tokens)
        if self._closing_at is not None and start + len(tokens) > self._closing_at:
            tokens = _mark_closing(tokens, self._closing_at - start)
        self.handle.emit(TokenLogprobs(tuple(tokens)))

    def _closing_began(self, rc: RowConstraint) -> None:
        """The closing policy's first token is here: note where it begins. Raises
        ContextLengthError (nothing of it is shown) when the context left the model no
        room to write a token of its own (see engine.runtime.context)."""
        self._closing_at = len(self.generated)
        self._closing_char = len(self._text.text)
        if len(self.generated) > rc.forced_tokens:
            return  # the model wrote some of it
        refusal = room_taken(
            len(self.prompt_tokens),
            self._context_length,
            len(self.generated) + rc.closing_reserve,  # what the format forced, then kept
            self.budget,
            self.settings.max_tokens,
        )
        if refusal is not None:
            raise refusal

    def _emit_text(self, delta: str) -> None:
        if self._thought and not self._answer_begun:  # the blank line after the block
            delta = delta.lstrip()
            if not delta:
                return
            self._answer_begun = True
        if self._splitter is None:
            self.handle.emit(TextDelta(delta))
        else:
            for event in self._splitter.feed(delta):
                self.handle.emit(event)

    def result(self, stop_reason: StopReason, fed: list[int]) -> ChatResult:
        """The finished reply (its last text deltas are emitted first); `fed` holds every
        token given to the model."""
        delta = self._text.finish()
        rc = self.row_constraint
        if self._closing_at is None and rc is not None and rc.closed_to_fit:
            self._closing_began(rc)  # an empty ending: the reply stops where it is
        if delta:
            self._emit_text(delta)
        if self._splitter is not None:
            for event in self._splitter.finish():
                self.handle.emit(event)
        logprobs = None
        if self.row_logprobs is not None:
            assert self._token_text is not None
            logprobs, rest = self.row_logprobs.finish(self._token_text)
            if rest:
                self._emit_logprobs(rest)
        stats = self.stats
        stats.cached_tokens = self.n_cached
        stats.generated_tokens = len(self.generated)
        stats.stop_reason = stop_reason.value
        stats.budget_tokens = self.budget
        stats.total_s = time.perf_counter() - self.started
        first, last = self._first_token_at, self._last_token_at
        if first is not None:
            stats.ttft_s = first - self.started
            new_tokens = len(self.prompt_tokens) - self.n_cached
            stats.prefill_tps = new_tokens / stats.ttft_s if stats.ttft_s > 0 else 0.0
            if len(self.generated) > 1 and last > first:
                stats.decode_tps = (len(self.generated) - 1) / (last - first)
        incomplete = False
        notes: list[str] = []
        tight: list[str] = []
        if self.speculator is not None:
            spec = self.speculator.stats
            stats.speculative = True
            stats.drafted_tokens, stats.accepted_tokens = spec.drafted, spec.accepted
            stats.acceptance_rate = round(spec.acceptance_rate, 4)
        runtime = self.row_constraint
        if runtime is not None:
            runtime.fill_stats(stats)
            incomplete = stop_reason == StopReason.LENGTH or not runtime.accepting
            if stop_reason == StopReason.CANCELLED:
                incomplete = True
            if self.tool_plan is None:
                from engine.constraints.validate import constraint_notes

                notes, tight = constraint_notes(runtime.constraint)
            if incomplete and stop_reason == StopReason.LENGTH and self._close_to_fit:
                notes.append(_unclosed(runtime.closing_needed, self.budget))

        text, calls = self._text.text, list[ToolCall]()
        reasoning = None
        if self._thought:
            text = text.lstrip()
            reasoning = self._finish_thinking(stats)
        if self.tool_plan is not None:
            text, calls = self.tool_plan.parse(text)
            if self._splitter is not None:
                calls = self._splitter.with_ids(calls)
        constraint = self.constraint
        as_written = self._check_as_written(text, calls)
        filled: list[str] = []
        if self._closing_at is not None:
            filled = self._filled(text, calls)
            if logprobs is not None:
                logprobs = _mark_closing(logprobs, self._closing_at)
        return ChatResult(
            text=text,
            stop_reason=stop_reason,
            stats=stats,
            incomplete=incomplete,
            constraint_name=constraint.name or constraint.kind if constraint is not None else None,
            tool_calls=calls,
            constraint_use=self.constraint_use,
            warnings=(self.tool_plan.warnings if self.tool_plan is not None else notes)
            + (self.vision.notes if self.vision is not None else []),
            tight=tight,
            token_ids=list(fed),
            reply_token_ids=list(self.generated),
            logprobs=logprobs,
            as_written=as_written,
            reasoning=reasoning,
            filled_paths=filled,
        )

    def _filled(self, text: str, calls: list[ToolCall]) -> list[str]:
        """JSON pointers of the values the closing policy wrote (engine.constraints.filled):
        into the reply's JSON, or into each tool call's arguments (a call it began whole
        is named whole)."""
        from engine.constraints.filled import common_prefix, filled_paths

        raw = self._text.text
        answer = raw.lstrip() if self._thought else raw
        offset = self._closing_char - (len(raw) - len(answer))  # into `answer`
        if self.tool_plan is None:
            return filled_paths(text, offset)
        if not calls:  # the reply followed the user's own format: its content
            start = answer.find(text) if text else -1
            return filled_paths(text, offset - start) if start >= 0 else []
        written = self._call_arguments(answer[: max(0, offset)], final=False)
        whole = self._call_arguments(answer, final=True)
        paths: list[str] = []
        for i, call in enumerate(calls):
            if i not in written:
                paths.append(f"/tool_calls/{i}")
                continue
            full = whole.get(i) or json.dumps(call.arguments, ensure_ascii=False)
            own = common_prefix(written[i], full)
            paths += [f"/tool_calls/{i}/arguments{p}" for p in filled_paths(full, own)]
        return paths

    def _call_arguments(self, text: str, *, final: bool) -> dict[int, str]:
        """Each call's arguments JSON text as the streaming split reads it from `text`
        (by call index; a call whose name is read has an entry, "" until its arguments)."""
        assert self.tool_plan is not None
        splitter = self.tool_plan.stream()
        if splitter is None:
            return {}
        events = splitter.feed(text) + (splitter.finish() if final else [])
        found: dict[int, str] = {}
        for event in events:
            if isinstance(event, ToolCallDelta):
                found[event.index] = found.get(event.index, "") + event.arguments
        return found

    def _finish_thinking(self, stats: GenerationStats) -> str | None:
        """The thinking block's text (None if the reply never opened one), its figures
        into `stats`."""
        assert self._reasoning is not None
        if self._phase == "thinking":  # ended inside the block: what it holds so far
            if delta := self._reasoning.finish():
                self.handle.emit(ReasoningDelta(delta))
            if self._thinking_started is not None:
                self._thinking_s = time.perf_counter() - self._thinking_started
        opened = self._thinking_started is not None
        stats.thinking_tokens = self._thinking_tokens
        stats.thinking_s = round(self._thinking_s, 3)
        stats.answer_tokens = self._answer_tokens
        if self.row_constraint is not None:
            stats.thinking_forced_end = self.row_constraint.thinking_forced
        else:
            cap = self._thinking_cap
            stats.thinking_forced_end = cap is not None and self._thinking_tokens >= cap
        return self._reasoning.text.strip() if opened else None

    def _check_as_written(self, text: str, calls: list[ToolCall]) -> AsWrittenCheck | None:
        """The reply against the user's own schema (or its tools'), timed into the stats.

        A text reply is checked against the user's constraint unless the tools paused it;
        a reply with calls, against the tools' parameter schemas."""
        from engine.constraints.as_written import check_reply

        user = self.user_constraint if self.constraint_use != "paused" else None
        if user is None and not calls:
            return None
        started = time.perf_counter()
        tools = self.tool_plan.tools if self.tool_plan is not None else []
        kind, source = (user.kind, user.source) if user is not None else (None, "")
        result = check_reply(kind, source, text, tools, calls)
        self.stats.as_written_ms = round((time.perf_counter() - started) * 1000, 3)
        return result


def _mark_closing(tokens: list[TokenLogprob], start: int) -> list[TokenLogprob]:
    """`tokens` with those from `start` on marked as the closing policy's (Corral's)."""
    from dataclasses import replace

    start = max(0, start)
    return tokens[:start] + [replace(t, closing=True) for t in tokens[start:]]


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
