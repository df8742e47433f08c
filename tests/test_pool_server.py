"""The server over a model pool of the default model and a tiny one: each answered by its
id through the `openai` and `anthropic` clients and raw HTTP, every response naming the
model that answered; /v1/models listing both, loaded or not; each model's sampling
defaults; turns under a limit below both; 503 with Retry-After while a model's memory is
busy; and `python -m engine serve --model default --model TINY` doing the same."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from engine.pool import DEFAULT_LOAD_WAIT_S, ModelPool, ModelSettings
from engine.server import HTTPServer
from tests.pool_support import KV, make_pool, wait_until
from tests.server_support import anthropic_client, openai_client, serving

DEFAULT_ID = "SmolLM2-135M-Instruct"
HI = [{"role": "user", "content": "Hi"}]


@pytest.fixture(scope="module")
def pool(tiny_model_dir: Path, default_model_dir: Path) -> Iterator[ModelPool]:
    """The default model (the pool's default) and the tiny one as `tiny`, which answers
    in three tokens unless a request says otherwise."""
    pool = make_pool()
    pool.add_model("default", settings=KV)
    pool.add_model(
        str(tiny_model_dir),
        alias="tiny",
        settings=ModelSettings(kv_budget_bytes=KV.kv_budget_bytes, sampling={"max_tokens": 3}),
    )
    pool.ensure_loaded(DEFAULT_ID).result(timeout=300)
    yield pool
    pool.close()


@pytest.fixture(scope="module")
def served(pool: ModelPool) -> Iterator[HTTPServer]:
    with serving(pool) as server:
        yield server


def test_models_lists_every_model_loaded_or_not(served: HTTPServer, pool: ModelPool) -> None:
    pool.unload_model("tiny").result(timeout=60)
    listed = {m.id: m for m in openai_client(served).models.list().data}
    assert list(listed) == [DEFAULT_ID, "tiny"]
    cards = httpx.get(served.url + "/v1/models").json()["data"]
    default, tiny = cards
    assert default["loaded"] is True and default["default"] is True
    assert default["context_length"] == 8192 and default["kind"] == "chat"
    assert tiny["loaded"] is False and tiny["state"] == "unloaded"
    assert tiny["context_length"] == 8192 and "tiny-model0" in tiny["aliases"]
    assert tiny["waiting"] == 0 and tiny["queue_position"] is None
    assert httpx.get(served.url + "/v1/models/tiny-model0").json()["id"] == "tiny"
    health = httpx.get(served.url + "/health").json()
    assert health["models"] == {DEFAULT_ID: "loaded", "tiny": "unloaded"}
    assert 0 < health["model_memory"]["held_bytes"] <= health["model_memory"]["limit_bytes"]


def test_each_model_answers_by_its_id_in_every_dialect(served: HTTPServer) -> None:
    client = openai_client(served)
    anthropic = anthropic_client(served)
    for model in (DEFAULT_ID, "tiny", "tiny-model0"):
        answered = "tiny" if model.startswith("tiny") else DEFAULT_ID
        chat = client.chat.completions.create(model=model, messages=HI, max_tokens=2)  # type: ignore[arg-type]
        assert chat.model == answered and chat.choices[0].message.content is not None
        chunks = list(
            client.chat.completions.create(
                model=model,
                messages=HI,  # type: ignore[arg-type]
                max_tokens=2,
                stream=True,
            )
        )
        assert chunks and {c.model for c in chunks} == {answered}
        message = anthropic.messages.create(model=model, messages=HI, max_tokens=2)
        assert message.model == answered
        count = anthropic.messages.count_tokens(model=model, messages=HI)
        assert count.input_tokens > 0
        response = client.responses.create(model=model, input="Hi", max_output_tokens=2)
        assert response.model == answered
        raw = httpx.post(
            served.url + "/v1/completions",
            json={"model": model, "prompt": "Once", "max_tokens": 2},
            timeout=120,
        )
        assert raw.status_code == 200 and raw.json()["model"] == answered


def test_a_model_that_is_not_served_is_a_404_naming_those_that_are(served: HTTPServer) -> None:
    r = httpx.post(
        served.url + "/v1/chat/completions",
        json={"model": "gpt-4o", "messages": HI, "max_tokens": 2},
        timeout=60,
    )
    error = r.json()["error"]
    assert r.status_code == 404 and error["code"] == "model_not_found"
    assert f"'{DEFAULT_ID}', 'tiny'" in error["message"]


def test_any_name_is_answered_by_the_default_model_when_asked(pool: ModelPool) -> None:
    with serving(pool, serve_any_model_name=True) as server:
        chat = openai_client(server).chat.completions.create(
            model="claude-sonnet",
            messages=HI,
            max_tokens=2,  # type: ignore[arg-type]
        )
        assert chat.model == DEFAULT_ID


def test_a_models_sampling_defaults_fill_what_the_request_leaves(served: HTTPServer) -> None:
    client = openai_client(served)
    chat = client.chat.completions.create(model="tiny", messages=HI, temperature=0)  # type: ignore[arg-type]
    assert chat.usage is not None and chat.usage.completion_tokens == 3  # its max_tokens
    longer = client.chat.completions.create(model="tiny", messages=HI, max_tokens=5, temperature=0)  # type: ignore[arg-type]
    assert longer.usage is not None and longer.usage.completion_tokens == 5  # the request's


def test_a_schema_for_a_model_not_loaded_loads_it(served: HTTPServer, pool: ModelPool) -> None:
    pool.unload_model("tiny").result(timeout=60)
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    chat = openai_client(served).chat.completions.create(
        model="tiny",
        messages=HI,  # type: ignore[arg-type]
        max_tokens=20,
        response_format={"type": "json_schema", "json_schema": {"name": "s", "schema": schema}},
    )
    assert chat.model == "tiny"
    assert isinstance(json.loads(chat.choices[0].message.content or ""), dict)


def test_under_a_limit_below_both_each_is_answered_in_turn(
    served: HTTPServer, pool: ModelPool
) -> None:
    for name in (DEFAULT_ID, "tiny"):
        pool.ensure_loaded(name).result(timeout=300)
    snap = pool.snapshot.pool
    assert snap is not None
    sizes = [m.memory_bytes for m in snap.models]
    pool.set_memory_limit(max(sizes) + min(sizes) // 2)
    try:
        client = openai_client(served)
        for model in ("tiny", DEFAULT_ID, "tiny"):
            chat = client.chat.completions.create(model=model, messages=HI, max_tokens=2)  # type: ignore[arg-type]
            assert chat.model == model
            assert httpx.get(served.url + "/health").json()["status"] == "ok"
            cards = httpx.get(served.url + "/v1/models").json()["data"]
            assert [c["id"] for c in cards if c["loaded"]] == [model]
    finally:
        pool.set_memory_limit(None)


def test_a_model_whose_memory_is_busy_is_a_503_with_retry_after(
    served: HTTPServer, pool: ModelPool
) -> None:
    for name in (DEFAULT_ID, "tiny"):
        pool.ensure_loaded(name).result(timeout=300)
    snap = pool.snapshot.pool
    assert snap is not None
    sizes = [m.memory_bytes for m in snap.models]
    pool.set_memory_limit(max(sizes) + min(sizes) // 2)
    pool.set_load_wait(0.5)
    try:
        pool.ensure_loaded(DEFAULT_ID).result(timeout=300)
        wait_until(lambda: pool.snapshot.pool.find("tiny").state == "unloaded")  # type: ignore[union-attr]
        with pool.lease(DEFAULT_ID).result(timeout=60):  # the default model is busy
            r = httpx.post(
                served.url + "/v1/chat/completions",
                json={"model": "tiny", "messages": HI, "max_tokens": 2},
                timeout=60,
            )
            assert r.status_code == 503 and int(r.headers["Retry-After"]) >= 1
            error = r.json()["error"]
            assert (
                error["code"] == "model_busy" and "could not be loaded within" in error["message"]
            )
            anthropic = httpx.post(
                served.url + "/v1/messages",
                json={"model": "tiny", "messages": HI, "max_tokens": 2},
                timeout=60,
            )
            assert anthropic.status_code == 529  # Anthropic's "overloaded"
    finally:
        pool.set_load_wait(DEFAULT_LOAD_WAIT_S)
        pool.set_memory_limit(None)


def test_serve_two_models_answers_each_by_its_id(
    tiny_model_dir: Path, default_model_dir: Path, tmp_path: Path
) -> None:
    settings = tmp_path / "models.toml"
    tiny = tiny_model_dir.name  # its id: the folder's name
    settings.write_text(
        f"[models.{tiny}]\n"
        "kv_cache_gb = 0.6\n"
        f"[models.{DEFAULT_ID}]\n"
        "kv_cache_gb = 0.6\n"
        "chat_template_kwargs = { custom_switch = true }\n",
        encoding="utf-8",
    )
    command = [sys.executable, "-m", "engine", "serve", "--port", "0"]
    command += ["--model", "default", "--model", str(tiny_model_dir)]
    command += ["--max-model-memory", "1.2", "--models-config", str(settings)]
    proc = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "CORRAL_LOG_DIR": str(tmp_path)},
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith(f"Serving {DEFAULT_ID} (default), {tiny} on"), line
        url = line.split(" on ", 1)[1].split(" ", 1)[0]
        client = openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0, timeout=300)
        import anthropic

        messages = anthropic.Anthropic(base_url=url, api_key="x", max_retries=0, timeout=300)
        for model in (tiny, DEFAULT_ID, tiny):
            chat = client.chat.completions.create(model=model, messages=HI, max_tokens=2)  # type: ignore[arg-type]
            assert chat.model == model
            assert messages.messages.create(model=model, messages=HI, max_tokens=2).model == model
            cards = httpx.get(url + "/v1/models").json()["data"]
            assert [c["id"] for c in cards if c["loaded"]] == [model]  # one at a time
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err[-2000:]
    logged = (tmp_path / "corral.log").read_text()
    assert f"model {tiny} loaded in" in logged and f"model {DEFAULT_ID} unloaded" in logged
    assert f"to make room for {tiny}" in logged
