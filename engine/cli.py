"""Command line: `python -m engine chat | serve | import-gguf | models | download | extract |
bench`.

`bench` hands its arguments to the top-level `benchmarks` package, which a checkout has and
the packaged app does not. Run as a program (`python -m engine`), every command writes
`corral.log` in the app's log folder (engine.logs) at `--log-level`: commands, model loads,
server starts and errors at info, what was asked only at debug.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.constraints.as_written import as_written_line
from engine.errors import CorralError
from engine.types import (
    DEFAULT_MAX_ROWS,
    EXIT_STATUS,
    ChatMessage,
    ChatRequest,
    ConstraintSpec,
    ImageInput,
    LoadProgress,
    ModelInfo,
    ReasoningDelta,
    SamplingSettings,
    SchemaOptions,
    TextDelta,
    ToolDefinition,
    ending_note,
    logprobs_summary,
)

if TYPE_CHECKING:
    from engine.api import EngineAPI

log = logging.getLogger("engine.cli")
server_log = logging.getLogger("corral.server")  # the server's own logger (engine.server)


def _progress_printer(enabled: bool) -> Callable[[LoadProgress], None]:
    last = [""]

    def show(p: LoadProgress) -> None:
        if enabled and p.stage != last[0]:
            last[0] = p.stage
            print(f"[{p.fraction:4.0%}] {p.stage}", file=sys.stderr, flush=True)

    return show


def _schema_options(args: argparse.Namespace) -> SchemaOptions:
    return SchemaOptions(tight=not args.allow_extra_properties, lenient=not args.strict_schema)


def _constraint_from_args(args: argparse.Namespace) -> ConstraintSpec | None:
    from engine.constraints.sources import constraint_from_file, constraint_from_text

    if args.json_schema:
        spec = constraint_from_file(args.json_schema, kind="json_schema")
    elif args.grammar:
        spec = constraint_from_file(args.grammar)
    elif args.regex:
        spec = constraint_from_text(args.regex, kind="regex", name="regex")
    else:
        return None
    return replace(spec, options=_schema_options(args))


def _tools_from_args(args: argparse.Namespace) -> list[ToolDefinition] | None:
    if not args.tools:
        return None
    from engine.tools import load_tools

    return load_tools(args.tools)


def add_speculative_arguments(parser: argparse.ArgumentParser) -> None:
    """--speculative/--no-speculative and --draft-model (for chat and serve)."""
    parser.add_argument(
        "--speculative",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="draft tokens and verify them in one forward pass (default: on; the same "
        "replies, faster where they repeat their input; it switches itself off where "
        "drafts do not pay)",
    )
    parser.add_argument(
        "--draft-model",
        metavar="MODEL",
        help="draft with this small model (same tokenizer) instead of prompt lookup",
    )


def load_with_speculation(
    engine: EngineAPI, args: argparse.Namespace, progress: Callable[[LoadProgress], None]
) -> ModelInfo:
    """Load `args.model` and set speculative decoding as the arguments say."""
    started = time.monotonic()
    log.info("loading model %s", args.model)
    info = engine.load_model(args.model, progress).result()
    log.info("model loaded in %.1f s: %s (%s)", time.monotonic() - started, info.name, info.path)
    engine.set_speculative(args.speculative)
    if args.draft_model:
        if not args.speculative:
            raise CorralError("--draft-model needs speculative decoding (not --no-speculative)")
        engine.load_draft_model(args.draft_model).result()
    return info


def _images_from_args(paths: list[str]) -> list[ImageInput]:
    """The `--image` files, read and checked (BadImageError names the file and the reason)."""
    from engine.files import read_limited
    from engine.prompt.images import MAX_IMAGE_BYTES, check_image

    images = []
    for path in paths:
        data = read_limited(path, MAX_IMAGE_BYTES, "image")
        check_image(data, path)
        images.append(ImageInput(data, path))
    return images


def cmd_chat(args: argparse.Namespace) -> int:
    from engine.distributed.cli import make_engine

    messages: list[ChatMessage] = []
    if args.system:
        messages.append({"role": "system", "content": args.system})
    messages.append({"role": "user", "content": args.prompt})
    if args.image:
        try:
            messages[-1]["images"] = _images_from_args(args.image)
        except (CorralError, ValueError, OSError) as exc:  # checked before the model loads
            print(f"error: {exc}", file=sys.stderr)
            return 2
    sampling = SamplingSettings(
        temperature=args.temperature,
        top_p=args.top_p,
        top_k=args.top_k,
        min_p=args.min_p,
        repetition_penalty=args.repetition_penalty,
        seed=args.seed,
        max_tokens=args.max_tokens,
        stop=args.stop or [],
        think=args.think,
        max_thinking_tokens=args.max_thinking_tokens,
    )
    request = ChatRequest(
        messages,
        sampling,
        constraint=_constraint_from_args(args),
        tools=_tools_from_args(args),
        tool_choice=args.tool_choice,
        schema_options=_schema_options(args),
        close_loops=not args.no_close_loops,
        logprobs=args.logprobs,
    )
    engine = make_engine(args)
    if args.mcp:
        from engine.mcp.cli import run_chat

        try:
            load_with_speculation(engine, args, _progress_printer(not args.json))
            return run_chat(args, engine, request)
        finally:
            engine.close()
    try:
        load_with_speculation(engine, args, _progress_printer(not args.json))
        handle = engine.submit(request)
        try:
            for event in handle.events():
                if isinstance(event, TextDelta) and not args.json:
                    print(event.text, end="", flush=True)
                elif isinstance(event, ReasoningDelta) and not args.json:
                    # the thinking goes apart: dim, on stderr, so stdout is the answer
                    print(f"\x1b[2m{event.text}\x1b[0m", end="", file=sys.stderr, flush=True)
        except KeyboardInterrupt:
            handle.cancel()
        result = handle.result()
    finally:
        engine.close()
    for warning in result.warnings:  # what was not enforced, why a reply is incomplete
        print(f"warning: {warning}", file=sys.stderr)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2, ensure_ascii=False))
    else:
        print()
        for call in result.tool_calls:
            print(f"[tool call] {call.name}({json.dumps(call.arguments, ensure_ascii=False)})")
        s = result.stats
        if result.tight:
            print(f"[tight: {'; '.join(result.tight)}]", file=sys.stderr)
        if result.logprobs is not None:
            print(f"[inspector: {logprobs_summary(result.logprobs)}]", file=sys.stderr)
        if result.as_written is not None and not result.as_written.valid:
            print(f"[{as_written_line(result.as_written)}]", file=sys.stderr)
        note = ending_note(
            result.ending,
            close_reason=s.close_reason,
            budget=s.budget_tokens,
            filled=result.filled_paths,
        )
        if note:
            print(f"[{result.ending.value}: {note}]", file=sys.stderr)
        print(
            f"[{result.ending.value}] {s.prompt_tokens} prompt tokens "
            f"({s.cached_tokens} cached), {s.generated_tokens} generated, "
            f"TTFT {s.ttft_s:.2f}s, {s.decode_tps:.1f} tok/s"
            + (
                f", {s.accepted_tokens}/{s.drafted_tokens} drafted tokens accepted"
                if s.drafted_tokens
                else ""
            ),
            file=sys.stderr,
        )
    if result.error:
        print(f"error: {result.error_line}", file=sys.stderr)
    # 0 when the model finished the reply, 3 when Corral filled or cut it, 1 when it failed
    return EXIT_STATUS[result.ending]


def cmd_import_gguf(args: argparse.Namespace) -> int:
    from engine.library.gguf_import import import_gguf
    from engine.library.load import ensure_gguf_imported

    def show(stage: str, fraction: float) -> None:
        print(f"[{fraction:4.0%}] {stage}", file=sys.stderr, flush=True)

    if str(args.file) == "default":
        from engine.library.load import ensure_default_model

        out = ensure_default_model(show)
    elif args.out:
        out = import_gguf(args.file, args.out, show)
    else:
        out = ensure_gguf_imported(args.file, show)
    log.info("imported %s into %s", args.file, out)
    print(out)
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    import os

    from engine.server import HTTPServer, ServerConfig

    config = ServerConfig(
        host=args.host,
        port=args.port,
        api_key=args.api_key or os.environ.get("CORRAL_API_KEY") or None,
        cors_origins=args.cors or [],
        serve_any_model_name=args.serve_any_model_name,
        allow_image_urls=args.allow_image_urls,
        keep_alive_s=args.keep_alive_s,
        report_context=args.report_context,
    )
    config.check()  # refuse a public bind without a key before loading anything
    from engine.logs import remember_secrets

    remember_secrets([config.api_key])
    engine = _serving_engine(args)
    engine.set_max_rows(args.max_rows)
    try:
        names = _load_served(engine, args)
        server = HTTPServer(engine, config)

        def show(record: Any) -> None:
            line = record.line()
            print(line, file=sys.stderr, flush=True)
            server_log.debug("%s", line)

        server.activity.on_record = show

        def ready(url: str) -> None:
            server_log.info("serving %s on %s (key required: %s)", names, url, bool(config.api_key))
            print(f"Serving {names} on {url} (OpenAI and Anthropic APIs at {url}/v1); Ctrl+C stops")
            for model in engine.snapshot.served_models():
                if model.kind != "chat":
                    endpoint = "/v1/embeddings" if model.kind == "embedding" else "/v1/rerank"
                    print(f"  {model.id} ({model.kind} model) at {url}{endpoint}")
            sys.stdout.flush()

        server.serve_forever(ready)
    finally:
        engine.close()
    print("Stopped.", file=sys.stderr)
    server_log.info("server stopped")
    return 0


def _serving_engine(args: argparse.Namespace) -> EngineAPI:
    """What `serve` serves: a model pool (engine.pool), or with --distributed one model
    sharded across a group."""
    from engine.pool.cli import make_pool, pool_flags

    if args.distributed:
        from engine.distributed.cli import make_engine

        used = pool_flags(args)
        if used:
            raise CorralError(
                f"--distributed serves one model: {', '.join(sorted(set(used)))} cannot "
                "be used with it"
            )
        args.model = (args.model or ["default"])[0]
        return make_engine(args)
    from engine.memory.settings import engine_cache_options

    return make_pool(args, engine_cache_options(args))


def _load_served(engine: EngineAPI, args: argparse.Namespace) -> str:
    """Load the --embedding-model and --rerank-model models, then the default model (the
    others load on their first request, pinned ones now; the default last, so that it is
    the one kept where the limit holds not all of them), and set speculative decoding;
    returns the served models' names, for the log."""
    from engine.pool import ModelPool

    if not isinstance(engine, ModelPool):
        return load_with_speculation(engine, args, _progress_printer(True)).name
    for kind, specs in (("embedding", args.embedding_model), ("rerank", args.rerank_model)):
        for spec in specs or []:
            print(f"Loading {kind} model {spec}...", file=sys.stderr, flush=True)
            engine.ensure_loaded(spec).result()
    default = engine.snapshot.find_model(None)
    if default is not None:  # a settings file may list embedding models alone
        log.info("loading model %s (%s)", default.id, default.spec)
        started = time.monotonic()
        info = engine.ensure_loaded(default.id, _progress_printer(True)).result()
        elapsed = time.monotonic() - started
        log.info("model loaded in %.1f s: %s (%s)", elapsed, info.name, info.path)
    engine.set_speculative(args.speculative)
    if args.draft_model:
        if not args.speculative:
            raise CorralError("--draft-model needs speculative decoding (not --no-speculative)")
        engine.load_draft_model(args.draft_model).result()
    served = engine.snapshot.served_models()
    return ", ".join(m.id + (" (default)" if m.default else "") for m in served)


def cmd_bench(args: argparse.Namespace) -> int:
    try:
        from benchmarks.bench import main as bench_main
    except ModuleNotFoundError as exc:
        if exc.name not in ("benchmarks", "benchmarks.bench"):
            raise
        raise CorralError(
            "the benchmarks are not part of this installation: run `python -m engine bench` "
            "from a Corral checkout"
        ) from exc
    argv: list[str] = args.bench_args
    return bench_main(argv, prog="python -m engine bench")


def cmd_launch(args: argparse.Namespace) -> int:
    import os

    from engine.server.launch import launch

    return launch(
        args.agent,
        model=args.model,
        port=args.port,
        api_key=args.api_key or os.environ.get("CORRAL_API_KEY") or None,
        provider=args.provider,
        print_only=args.print,
        agent_args=args.bench_args[1:] if args.bench_args[:1] == ["--"] else args.bench_args,
    )


def cmd_info(args: argparse.Namespace) -> int:
    """Describe a model's dialect (tool-call and thinking syntax) without loading its weights."""
    from engine.library.load import load_tokenizer_of
    from engine.tools.dialect import describe_dialect

    path, tokenizer = load_tokenizer_of(args.model)
    found = {"model": str(path), **describe_dialect(tokenizer)}
    if args.json:
        print(json.dumps(found, indent=2))
        return 0
    print(f"model: {found['model']}")
    print(f"tool calls: {found['tool_syntax']}")
    print(f"  {found['tool_syntax_why']}")
    print(f"thinking: {found['thinking_described']}")
    print(f"template renders tools: {'yes' if found['template_renders_tools'] else 'no'}")
    return 0


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m engine", description=__doc__)
    parser.add_argument(
        "--log-level",
        choices=("warnings", "info", "debug"),
        default=os.environ.get("CORRAL_LOG_LEVEL") or "info",
        help="what corral.log in the log folder records (default info; $CORRAL_LOG_LEVEL)",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    chat = sub.add_parser("chat", help="generate one reply and print it as it streams")
    chat.add_argument(
        "--model",
        default="default",
        help="'default', an MLX folder, a .gguf file or a Hugging Face repo id",
    )
    chat.add_argument("--prompt", required=True)
    chat.add_argument("--system")
    chat.add_argument(
        "--image",
        action="append",
        metavar="FILE",
        help="an image the prompt is about (PNG, JPEG, WebP, GIF; repeatable): vision models",
    )
    chat.add_argument("--max-tokens", type=int, default=256)
    chat.add_argument(
        "--think",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="a model that thinks first does (--think) or not (--no-think); default: its own",
    )
    chat.add_argument(
        "--max-thinking-tokens",
        type=int,
        help="thinking budget: the answer is made to begin after this many thinking tokens",
    )
    chat.add_argument("--temperature", type=float, default=0.7)
    chat.add_argument("--top-p", type=float, default=1.0)
    chat.add_argument("--top-k", type=int, default=0)
    chat.add_argument("--min-p", type=float, default=0.0)
    chat.add_argument("--repetition-penalty", type=float, default=1.0)
    chat.add_argument("--seed", type=int)
    chat.add_argument("--stop", action="append", help="stop string (repeatable)")
    chat.add_argument("--json", action="store_true", help="print one JSON object at the end")
    chat.add_argument(
        "--logprobs",
        type=int,
        metavar="N",
        help="record each token's log-probabilities with its N most likely alternatives "
        "(0-20), before and after the constraint's mask (in --json: `logprobs`)",
    )
    group = chat.add_mutually_exclusive_group()
    group.add_argument("--json-schema", metavar="FILE", help="constrain to a JSON schema file")
    group.add_argument(
        "--grammar", metavar="FILE", help="constrain to a .lark/.gbnf/.regex/.json file"
    )
    group.add_argument("--regex", metavar="R", help="constrain to a regular expression")
    chat.add_argument(
        "--allow-extra-properties",
        action="store_true",
        help="use all the freedom a JSON schema leaves (no tight defaults: undeclared keys, "
        "numbers of any size, free-form values of any depth)",
    )
    chat.add_argument(
        "--strict-schema",
        action="store_true",
        help="refuse JSON schemas with keywords or formats Corral cannot enforce, instead "
        "of ignoring them with a warning",
    )
    chat.add_argument(
        "--no-close-loops",
        action="store_true",
        help="under a constraint, let a reply that repeats itself inside a value run on",
    )
    chat.add_argument("--tools", metavar="FILE", help="tool definitions (OpenAI format, .json)")
    chat.add_argument("--tool-choice", default="auto", help="auto, required, none or a tool name")
    from engine.distributed.cli import add_arguments as add_distributed_arguments
    from engine.mcp.cli import add_arguments as add_mcp_arguments
    from engine.memory.settings import add_cache_arguments

    add_speculative_arguments(chat)
    add_cache_arguments(chat)
    add_mcp_arguments(chat)
    add_distributed_arguments(chat)
    chat.set_defaults(func=cmd_chat)

    serve = sub.add_parser(
        "serve", help="serve models over OpenAI- and Anthropic-compatible HTTP APIs"
    )
    from engine.pool.cli import add_arguments as add_pool_arguments

    add_pool_arguments(serve)
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default: loopback)")
    serve.add_argument("--port", type=int, default=8080)
    serve.add_argument(
        "--api-key", help="require this key (Authorization: Bearer KEY); or CORRAL_API_KEY"
    )
    serve.add_argument(
        "--cors", action="append", metavar="ORIGIN", help="allow browser requests from ORIGIN"
    )
    serve.add_argument(
        "--serve-any-model-name",
        action="store_true",
        help="answer requests naming a model this server does not serve with the default "
        "one (agents send their own default names, such as claude-...); without it such a "
        "name is a 404",
    )
    serve.add_argument(
        "--allow-image-urls",
        action="store_true",
        help="fetch http(s) image URLs in requests (size and time limited; never local or "
        "private addresses); without it images come only as data: URLs or base64",
    )
    serve.add_argument(
        "--max-rows",
        type=_positive_int,
        default=DEFAULT_MAX_ROWS,
        help=f"replies decoded side by side at most (default {DEFAULT_MAX_ROWS}; 1: one at a time)",
    )
    serve.add_argument(
        "--keep-alive-s",
        type=float,
        default=10.0,
        metavar="S",
        help="while a reply has nothing to send (a long prompt being read), send a "
        "keep-alive at least every S seconds (default 10; 0: none)",
    )
    serve.add_argument(
        "--report-context",
        type=_positive_int,
        metavar="N",
        help="context scaling: report token counts (usage, count_tokens) as if the model "
        "read N tokens, so an agent built for an N-token window compacts in time",
    )
    add_speculative_arguments(serve)
    add_cache_arguments(serve)
    add_distributed_arguments(serve)
    serve.set_defaults(func=cmd_serve)

    imp = sub.add_parser("import-gguf", help="convert a GGUF file into an MLX model folder")
    imp.add_argument("file", type=Path, help="a .gguf file, or 'default' for the embedded model")
    imp.add_argument("out", type=Path, nargs="?", help="output folder (default: the model cache)")
    imp.set_defaults(func=cmd_import_gguf)

    info = sub.add_parser("info", help="the model's dialect: its tool-call and thinking syntax")
    info.add_argument("model", nargs="?", default="default", help="as for chat --model")
    info.add_argument("--json", action="store_true", help="print a JSON object")
    info.set_defaults(func=cmd_info)

    from engine.library.cli import add_commands as add_library_commands
    from engine.tools.dialect import template_dialect

    add_library_commands(sub, template_dialect)

    from engine.extract.cli import add_command as add_extract_command

    add_extract_command(sub)

    # Its options belong to benchmarks/bench.py (`python -m engine bench --help` lists them).
    bench = sub.add_parser(
        "bench", help="measure the engine against mlx-lm, side by side", add_help=False
    )
    bench.set_defaults(func=cmd_bench)

    agents = sub.add_parser(
        "launch",
        help="run Claude Code, Codex or OpenCode against Corral (starting the server if "
        "needed); arguments after -- go to the agent",
    )
    agents.add_argument("agent", choices=["claude", "codex", "opencode"])
    agents.add_argument("--model", default="default", help="the model a started server loads")
    agents.add_argument("--port", type=int, default=8080, help="the server's loopback port")
    agents.add_argument("--api-key", help="the server's key, if it has one; or CORRAL_API_KEY")
    agents.add_argument(
        "--provider",
        choices=["openai", "anthropic"],
        default="openai",
        help="OpenCode's provider: OpenAI-compatible chat completions, or Anthropic Messages",
    )
    agents.add_argument(
        "--print", action="store_true", help="print what to set instead of running the agent"
    )
    agents.set_defaults(func=cmd_launch)
    return parser


def main(argv: list[str] | None = None, write_log: bool = False) -> int:
    """Run one command.

    Args:
        argv: the arguments (sys.argv's by default).
        write_log: write corral.log in the log folder (`python -m engine` does; a test
            calling main() in-process leaves the process's logging as it was).
    """
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra and args.command not in ("bench", "launch"):  # launch: the agent's own
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    args.bench_args = extra
    if write_log:
        from engine import logs

        try:
            logs.setup_logging(args.log_level)
        except OSError as exc:  # an unwritable log folder costs the log, not the command
            print(f"warning: not writing the log: {exc}", file=sys.stderr)
            write_log = False
        log.info("python -m engine %s", args.command)  # its arguments may hold a key
    try:
        command: Callable[[argparse.Namespace], int] = args.func
        return command(args)
    except CorralError as exc:
        log.error("%s failed: %s", args.command, exc)
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except Exception:
        log.exception("%s failed", args.command)  # (Python prints it as well)
        raise
    finally:
        if write_log:
            from engine import logs

            logs.close_logging()
