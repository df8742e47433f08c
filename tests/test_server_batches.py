"""The OpenAI Batch API on the local server, driven by the official `openai` client: files
uploaded, a batch of chat completion and Responses lines run in the background under their
schemas, polled, its output and error files read; a bad input file failing the batch with
line numbers; cancelling; a batch that survives a server restart with no line run twice."""

from __future__ import annotations

import io
import json
import time
from pathlib import Path
from typing import Any

import jsonschema
import openai
import pytest

from engine.server.batches.lines import MAX_FILE_BYTES
from tests.server_support import openai_client, serving

SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 20}, "rank": {"type": "integer"}},
    "required": ["city", "rank"],
}


@pytest.fixture(autouse=True)
def own_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "batches"
    monkeypatch.setenv("CORRAL_BATCH_DIR", str(folder))
    return folder


def _chat_line(i: int, model: str, **extra: Any) -> dict[str, Any]:
    body = {
        "model": model,
        "messages": [{"role": "user", "content": f"City number {i}?"}],
        "max_tokens": 24,
        "response_format": {"type": "json_schema", "json_schema": {"name": "c", "schema": SCHEMA}},
        **extra,
    }
    return {"custom_id": f"line-{i}", "method": "POST", "url": "/v1/chat/completions", "body": body}


def _upload(client: openai.OpenAI, lines: list[dict[str, Any]]) -> str:
    data = "".join(json.dumps(line) + "\n" for line in lines).encode()
    return client.files.create(file=("in.jsonl", io.BytesIO(data)), purpose="batch").id


def _wait(client: openai.OpenAI, batch_id: str, timeout: float = 300) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        batch = client.batches.retrieve(batch_id)
        if batch.status in ("completed", "failed", "cancelled"):
            return batch
        time.sleep(0.1)
    raise AssertionError(f"batch {batch_id} did not end: {batch.status}")


def _lines(client: openai.OpenAI, file_id: str | None) -> list[dict[str, Any]]:
    if file_id is None:
        return []
    return [json.loads(x) for x in client.files.content(file_id).text.splitlines()]


def test_chat_completion_batch_runs_every_line_under_its_schema(tiny_engine) -> None:
    model = tiny_engine.snapshot.model.name
    with serving(tiny_engine) as server:
        client = openai_client(server)
        lines = [_chat_line(i, model) for i in range(5)]
        # fields clients send that change nothing pass the compatibility table, as online
        lines.append(_chat_line(5, model, user="u-1", metadata={"k": "v"}, store=False))
        lines.append(_chat_line(6, "some-other-model"))  # refused as the endpoint would
        lines.append(_chat_line(7, model, stream=True))
        lines.append(_chat_line(8, model, logit_bias={"1": 5}))  # would change the reply
        file_id = _upload(client, lines)
        batch = client.batches.create(
            input_file_id=file_id, endpoint="/v1/chat/completions", completion_window="24h"
        )
        assert batch.status == "validating" and batch.request_counts.total == 9
        done = _wait(client, batch.id)
        assert done.status == "completed"
        assert (done.request_counts.completed, done.request_counts.failed) == (6, 3)
        output = _lines(client, done.output_file_id)
        assert [line["custom_id"] for line in output] == [f"line-{i}" for i in range(6)]
        for line in output:
            assert line["response"]["status_code"] == 200
            reply = line["response"]["body"]["choices"][0]["message"]["content"]
            jsonschema.validate(json.loads(reply), SCHEMA)
        errors = {
            line["custom_id"]: line["response"] for line in _lines(client, done.error_file_id)
        }
        assert errors["line-6"]["status_code"] == 404
        assert errors["line-7"]["status_code"] == 400
        assert "stream" in errors["line-7"]["body"]["error"]["message"]
        assert errors["line-8"]["status_code"] == 400
        assert errors["line-8"]["body"]["error"]["param"] == "logit_bias"
        listed = client.batches.list()
        assert [b.id for b in listed.data] == [batch.id]
        files = {f.id: f.purpose for f in client.files.list()}
        assert files == {
            file_id: "batch",
            done.output_file_id: "batch_output",
            done.error_file_id: "batch_output",
        }
        assert client.files.delete(done.error_file_id).deleted
        with pytest.raises(openai.NotFoundError):
            client.files.content(done.error_file_id)
        # Each line is in the server's request log, as the online request would be.
        logged = [r for r in server.activity.records if "(batch line" in r.endpoint]
        assert sorted(r.status for r in logged) == [200] * 6 + [400, 400, 404]
        assert all(r.completion_tokens > 0 for r in logged if r.status == 200)


def test_responses_batch_keeps_the_text_format(tiny_engine) -> None:
    model = tiny_engine.snapshot.model.name
    with serving(tiny_engine) as server:
        client = openai_client(server)
        body = {
            "model": model,
            "input": "Name a city.",
            "max_output_tokens": 24,
            "text": {"format": {"type": "json_schema", "name": "c", "schema": SCHEMA}},
        }
        lines = [
            {"custom_id": f"r{i}", "method": "POST", "url": "/v1/responses", "body": body}
            for i in range(3)
        ]
        batch = client.batches.create(
            input_file_id=_upload(client, lines), endpoint="/v1/responses", completion_window="24h"
        )
        done = _wait(client, batch.id)
        assert done.request_counts.completed == 3
        for line in _lines(client, done.output_file_id):
            response = line["response"]["body"]
            assert response["object"] == "response"
            jsonschema.validate(json.loads(response["output"][-1]["content"][0]["text"]), SCHEMA)


def test_bad_input_file_fails_the_batch_with_line_numbers(tiny_engine) -> None:
    model = tiny_engine.snapshot.model.name
    with serving(tiny_engine) as server:
        client = openai_client(server)
        good = _chat_line(0, model)
        lines = [good, good, {**_chat_line(2, model), "url": "/v1/embeddings"}]
        batch = client.batches.create(
            input_file_id=_upload(client, lines),
            endpoint="/v1/chat/completions",
            completion_window="24h",
        )
        assert batch.status == "failed"
        found = {(e.line, e.param) for e in batch.errors.data}
        assert found == {(2, "custom_id"), (3, "url")}
        with pytest.raises(openai.BadRequestError, match="purpose"):
            client.files.create(file=("x.jsonl", io.BytesIO(b"{}")), purpose="fine-tune")
        with pytest.raises(openai.APIStatusError) as caught:
            client.files.create(
                file=("big.jsonl", io.BytesIO(b"x" * (MAX_FILE_BYTES + 1))), purpose="batch"
            )
        assert caught.value.status_code == 413


def test_cancelled_batch_reports_the_lines_it_did_not_run(tiny_engine) -> None:
    model = tiny_engine.snapshot.model.name
    with serving(tiny_engine) as server:
        client = openai_client(server)
        lines = [_chat_line(i, model, max_tokens=400) for i in range(40)]
        batch = client.batches.create(
            input_file_id=_upload(client, lines),
            endpoint="/v1/chat/completions",
            completion_window="24h",
        )
        cancelling = client.batches.cancel(batch.id)
        assert cancelling.status in ("cancelling", "cancelled")
        done = _wait(client, batch.id)
        assert done.status == "cancelled"
        errors = _lines(client, done.error_file_id)
        output = _lines(client, done.output_file_id)
        assert len(errors) + len(output) == 40 and errors
        assert errors[-1]["response"]["body"]["error"]["code"] == "batch_cancelled"


def test_batch_survives_a_server_restart_with_no_line_run_twice(
    tiny_engine, own_folder: Path
) -> None:
    from engine.server.batches.store import BatchStore

    model = tiny_engine.snapshot.model.name
    # budgets apart, so lines end one by one: the server stops with the last ones mid-reply
    lines = [_chat_line(i, model, max_tokens=40 + 30 * i) for i in range(12)]
    with serving(tiny_engine, max_queued_requests=None) as server:
        client = openai_client(server)
        batch = client.batches.create(
            input_file_id=_upload(client, lines),
            endpoint="/v1/chat/completions",
            completion_window="24h",
        )
        deadline = time.monotonic() + 300
        while client.batches.retrieve(batch.id).request_counts.completed < 2:
            assert time.monotonic() < deadline
            time.sleep(0.05)
    # The first server has stopped (its worker with it), mid-batch.
    store = BatchStore(own_folder)
    before = {line: result for line, _, result in store.results(batch.id)}
    store.close()
    assert 2 <= len(before) < 12
    with serving(tiny_engine) as server:
        client = openai_client(server)
        done = _wait(client, batch.id)
        assert done.status == "completed" and done.request_counts.completed == 12
        output = _lines(client, done.output_file_id)
    assert sorted(line["custom_id"] for line in output) == sorted(f"line-{i}" for i in range(12))
    for line, result in before.items():
        assert output[line] == result  # written once, before the restart, kept as it was
    store = BatchStore(own_folder)
    assert set(store.completions(batch.id).values()) == {1}
    store.close()


def test_a_line_with_tools_keeps_the_tool_guarantee(tiny_engine) -> None:
    model = tiny_engine.snapshot.model.name
    parameters = {
        "type": "object",
        "properties": {"city": {"type": "string", "maxLength": 12}},
        "required": ["city"],
    }
    body = {
        "model": model,
        "messages": [{"role": "user", "content": "Weather in Oslo?"}],
        "max_tokens": 40,
        "tools": [{"type": "function", "function": {"name": "weather", "parameters": parameters}}],
        "tool_choice": "required",
        "parallel_tool_calls": False,
        "temperature": 0,
    }
    line = {"custom_id": "t", "method": "POST", "url": "/v1/chat/completions", "body": body}
    with serving(tiny_engine) as server:
        client = openai_client(server)
        batch = client.batches.create(
            input_file_id=_upload(client, [line]),
            endpoint="/v1/chat/completions",
            completion_window="24h",
        )
        done = _wait(client, batch.id)
        (output,) = _lines(client, done.output_file_id)
    choice = output["response"]["body"]["choices"][0]
    # as online: `tool_calls` when the model finished the call, `length` when Corral did
    ending = output["response"]["body"]["corral"]["ending"]
    assert choice["finish_reason"] == ("tool_calls" if ending == "finished" else "length")
    (call,) = choice["message"]["tool_calls"]
    assert call["function"]["name"] == "weather"
    jsonschema.validate(json.loads(call["function"]["arguments"]), parameters)


def test_an_online_request_does_not_wait_for_the_batch(tiny_engine) -> None:
    """A batch keeps only a batch's worth of lines in flight, so an online request arriving
    meanwhile gets a row as soon as one line ends, long before the batch does."""
    model = tiny_engine.snapshot.model.name
    free = {"model": model, "messages": [{"role": "user", "content": "Tell a story."}]}
    lines = [  # free text: the tiny model's replies run to the limit
        {"custom_id": f"s{i}", "method": "POST", "url": "/v1/chat/completions",
         "body": {**free, "max_tokens": 200}}
        for i in range(40)
    ]  # fmt: skip
    with serving(tiny_engine) as server:
        client = openai_client(server)
        batch = client.batches.create(
            input_file_id=_upload(client, lines),
            endpoint="/v1/chat/completions",
            completion_window="24h",
        )
        deadline = time.monotonic() + 300
        while client.batches.retrieve(batch.id).status != "in_progress":
            assert time.monotonic() < deadline
            time.sleep(0.02)
        reply = client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": "Hi"}], max_tokens=8
        )
        assert reply.choices[0].message.content is not None
        during = client.batches.retrieve(batch.id)
        assert during.status == "in_progress" and during.request_counts.completed < 40
        client.batches.cancel(batch.id)
        _wait(client, batch.id)


def test_a_batch_request_body_is_checked_as_every_body_is(tiny_engine) -> None:
    import httpx

    with serving(tiny_engine) as server:
        url = server.url + "/v1/batches"
        as_json = {"content-type": "application/json"}
        too_large = httpx.post(url, content=b"{" + b" " * (1 << 20) + b"}", headers=as_json)
        assert too_large.status_code == 413
        assert too_large.json()["error"]["code"] == "body_too_large"
        not_json = httpx.post(url, content=b"{}", headers={"content-type": "text/plain"})
        assert not_json.status_code == 415
        broken = httpx.post(url, content=b"{", headers=as_json)
        assert broken.status_code == 400 and "not valid JSON" in broken.json()["error"]["message"]
