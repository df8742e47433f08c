"""The one table of request fields real clients send that Corral does not implement, and
what each dialect does with them.

Official clients and coding agents (the `openai` and `anthropic` SDKs, Claude Code, Codex,
OpenCode) attach fields about their own session or about the provider's service: request
metadata, cache keys, service tiers, beta flags. A field that cannot change the reply is
ACCEPTED: taken out of the body before it is read, and logged at debug. A field that
would change the reply and that Corral does not implement is REFUSED: a 400 naming it, so a
client never believes a setting took effect when it did not. A refused field given its
"off" value (`presence_penalty: 0`, `echo: false`) changes nothing and is accepted.

Every other field is read by the dialect's own schema, where an unknown one is a 400
("unrecognized request argument"). `screen` applies the table to a body; `HEADERS` lists
the client headers that are read as information only; `HOSTED_TOOLS` the tool types of a
provider's own service that are left out of the offer (the model cannot call them here).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from engine.server.errors import APIError

log = logging.getLogger("corral.server.compat")

Dialect = Literal["chat", "completions", "messages", "responses"]
CHAT: tuple[Dialect, ...] = ("chat",)
OPENAI: tuple[Dialect, ...] = ("chat", "completions")
ALL: tuple[Dialect, ...] = ("chat", "completions", "messages", "responses")
Action = Literal["accept", "refuse"]
ACCEPT: Action = "accept"
REFUSE: Action = "refuse"

# `include` entries of the Responses API that change nothing here: Corral's replies hold no
# encrypted reasoning, searches, files or code runs whose details could be included.
HARMLESS_INCLUDES = frozenset(
    {
        "reasoning.encrypted_content",
        "web_search_call.action.sources",
        "web_search_call.results",
        "file_search_call.results",
        "code_interpreter_call.outputs",
        "computer_call_output.output.image_url",
        "message.input_image.image_url",
    }
)


def _off(value: Any) -> bool:
    """A value that asks for nothing: absent, false, zero, empty."""
    return value is None or value is False or value == 0 or value in ([], {}, "")


def _text_only(value: Any) -> bool:
    return value is None or value == ["text"]


def _harmless_includes(value: Any) -> bool:
    return isinstance(value, list) and all(v in HARMLESS_INCLUDES for v in value)


def _one_choice(value: Any) -> bool:
    return value is None or value == 1


@dataclass(frozen=True)
class Rule:
    """One row: `field` (a dotted path into the body) in `dialects` is accepted (changes
    nothing) or refused (a 400 saying `why`). `fine` tells the values of an accepted
    field that are harmless (others are refused), or of a refused one that ask for nothing
    (accepted)."""

    field: str
    dialects: tuple[Dialect, ...]
    action: Action
    why: str
    fine: Callable[[Any], bool] | None = None

    def allows(self, value: Any) -> bool:
        if self.action == ACCEPT:
            return self.fine is None or self.fine(value)
        return (self.fine or _off)(value)


_SESSION = "about the client's session; the reply is the same without it"
_SERVICE = "about the provider's own service (tiers, storage, regions), which has no meaning here"
_HINT = "a length hint the model is not trained to take"
_SUMMARY = "the model's thinking is not summarised"
_CACHE = "a prompt-cache hint: Corral caches every prompt's prefix on its own"

RULES: tuple[Rule, ...] = (
    # --- accepted: they change nothing about the reply ---
    Rule("metadata", ("chat", "messages"), ACCEPT, _SESSION),
    Rule("client_metadata", ALL, ACCEPT, _SESSION),
    Rule("user", ("chat", "completions", "responses"), ACCEPT, _SESSION),
    Rule("safety_identifier", ("chat", "responses"), ACCEPT, _SESSION),
    Rule("prompt_cache_key", ("chat", "responses"), ACCEPT, _CACHE),
    Rule("prompt_cache_retention", ("chat", "responses"), ACCEPT, _CACHE),
    Rule("cache_control", ("messages",), ACCEPT, _CACHE),
    Rule("service_tier", ("chat", "messages", "responses"), ACCEPT, _SERVICE),
    Rule("store", CHAT, ACCEPT, "chat completions are never stored here"),
    Rule("inference_geo", ("messages",), ACCEPT, _SERVICE),
    Rule("speed", ("messages",), ACCEPT, _SERVICE),
    Rule("user_profile_id", ("messages",), ACCEPT, _SESSION),
    Rule("workspace_id", ("messages",), ACCEPT, _SESSION),
    Rule("diagnostics", ("messages",), ACCEPT, _SESSION),
    Rule(
        "context_management",
        ("messages",),
        ACCEPT,
        "a context-management hint (clearing old thinking and tool results): Corral keeps "
        "the prompt as sent",
    ),
    Rule("verbosity", CHAT, ACCEPT, _HINT),
    Rule("text.verbosity", ("responses",), ACCEPT, _HINT),
    Rule(
        "include",
        ("responses",),
        ACCEPT,
        "extra output Corral's replies never hold",
        _harmless_includes,
    ),
    Rule("truncation", ("responses",), ACCEPT, "a prompt too long is refused with its length"),
    Rule("max_tool_calls", ("responses",), ACCEPT, "the agent decides how many calls it runs"),
    Rule("stream_options", ("responses",), ACCEPT, "the stream is the same without it"),
    Rule("reasoning.summary", ("responses",), ACCEPT, _SUMMARY),
    Rule("reasoning.generate_summary", ("responses",), ACCEPT, _SUMMARY),
    # --- refused: they would change the reply, and Corral does not implement them ---
    Rule("logit_bias", OPENAI, REFUSE, "logit_bias is not supported"),
    Rule(
        "presence_penalty",
        OPENAI,
        REFUSE,
        "presence_penalty is not supported; Corral offers repetition_penalty "
        "(1.0 is off, 1.1 discourages repeats)",
    ),
    Rule(
        "frequency_penalty",
        OPENAI,
        REFUSE,
        "frequency_penalty is not supported; Corral offers repetition_penalty "
        "(1.0 is off, 1.1 discourages repeats)",
    ),
    Rule("modalities", CHAT, REFUSE, "only text output is supported", _text_only),
    Rule("audio", CHAT, REFUSE, "audio is not supported"),
    Rule("prediction", CHAT, REFUSE, "prediction is not supported"),
    Rule("web_search_options", CHAT, REFUSE, "web_search_options is not supported"),
    Rule("functions", CHAT, REFUSE, "functions is not supported (use tools and tool_choice)"),
    Rule(
        "function_call", CHAT, REFUSE, "function_call is not supported (use tools and tool_choice)"
    ),
    Rule("echo", ("completions",), REFUSE, "echo is not supported"),
    Rule("suffix", ("completions",), REFUSE, "suffix is not supported"),
    Rule("best_of", ("completions",), REFUSE, "best_of > 1 is not supported yet", _one_choice),
    Rule("mcp_servers", ("messages",), REFUSE, "mcp_servers is not supported by a local server"),
    Rule("container", ("messages",), REFUSE, "container is not supported by a local server"),
    Rule(
        "background",
        ("responses",),
        REFUSE,
        "background responses are not supported; stream instead",
    ),
    Rule(
        "conversation",
        ("responses",),
        REFUSE,
        "conversations are not supported; use previous_response_id",
    ),
    Rule(
        "prompt",
        ("responses",),
        REFUSE,
        "prompt templates are not supported; send instructions and input",
    ),
    Rule(
        "top_logprobs",
        ("responses",),
        REFUSE,
        "top_logprobs is not supported by the Responses endpoint (chat completions offer logprobs)",
        lambda v: v is None,
    ),
)

# Client headers read as information only (they never change a reply): logged at debug.
HEADERS: dict[str, str] = {
    "anthropic-version": "the Messages API version; Corral speaks the current one",
    "anthropic-beta": "beta features of Anthropic's service; Corral's replies are the same",
    "anthropic-dangerous-direct-browser-access": "a browser flag of Anthropic's SDK",
    "openai-beta": "beta features of OpenAI's service",
    "originator": "the client's name (Codex)",
    "session-id": "the client's session (Codex)",
    "thread-id": "the client's thread (Codex)",
    "x-client-request-id": "the client's request id",
    "x-codex-beta-features": "Codex's feature flags",
    "x-codex-turn-metadata": "Codex's turn metadata",
    "x-codex-window-id": "Codex's window id",
    "x-claude-code-session-id": "Claude Code's session",
    "x-app": "the client's name (Claude Code)",
    "x-session-id": "the client's session (OpenCode)",
    "x-session-affinity": "a load-balancer hint (OpenCode)",
    "x-stainless-*": "the SDK's own description (language, OS, retry count, timeout)",
}

# Tool types of the Responses API that run on OpenAI's service (or group tools for it):
# left out of the tools offered, since a local model cannot call them.
HOSTED_TOOLS = frozenset({"web_search", "web_search_preview", "namespace"})


def _lookup(body: Mapping[str, Any], path: str) -> tuple[Any, bool]:
    node: Any = body
    for part in path.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None, False
        node = node[part]
    return node, True


def _remove(body: dict[str, Any], path: str) -> None:
    *parents, last = path.split(".")
    node: Any = body
    for part in parents:
        node = node[part]
    del node[last]


def rules_for(dialect: Dialect) -> list[Rule]:
    return [rule for rule in RULES if dialect in rule.dialects]


def screen(dialect: Dialect, body: dict[str, Any]) -> dict[str, Any]:
    """`body` with the accepted fields of `dialect` taken out (each logged at debug);
    APIError(400) naming the first refused field that asks for something."""
    for rule in rules_for(dialect):
        value, present = _lookup(body, rule.field)
        if not present:
            continue
        if not rule.allows(value):
            shown = repr(value)[:80]
            why = rule.why if rule.action == REFUSE else f"{rule.field}: {shown} is not supported"
            raise APIError(400, why, param=rule.field, code="unsupported_parameter")
        log.debug("accepted %s (%s): %s", rule.field, dialect, rule.why)
        _remove(body, rule.field)
    return body


def note_headers(headers: Mapping[str, str]) -> None:
    """Log at debug the informational client headers of a request (never their values
    beyond a short start: they may carry ids)."""
    if not log.isEnabledFor(logging.DEBUG):
        return
    for name in headers:
        key = name.lower()
        if key in HEADERS or (key.startswith("x-stainless-") and "x-stainless-*" in HEADERS):
            log.debug("header %s: %s", key, HEADERS.get(key, HEADERS["x-stainless-*"]))
