"""Each model's recommended sampling (engine/library/defaults.py), and continuing a reply cut
at its length limit (ChatRequest.continue_final_message)."""

from __future__ import annotations

import json

from engine.library.defaults import GENERATION_CONFIG, from_generation_config, sampling_defaults
from engine.types import ChatRequest, SamplingSettings


def test_generation_config_values_are_read_and_checked(tmp_path):
    (tmp_path / GENERATION_CONFIG).write_text(
        json.dumps(
            {
                "do_sample": True,
                "temperature": 0.6,
                "top_p": 0.95,
                "top_k": 20,
                "repetition_penalty": 1.05,
                "min_p": "0.1",  # not a number: ignored
                "bos_token_id": 1,
            }
        )
    )
    defaults = sampling_defaults(tmp_path, "Qwen-Whatever")
    assert defaults.source == GENERATION_CONFIG
    assert defaults.values == {
        "temperature": 0.6,
        "top_p": 0.95,
        "top_k": 20.0,
        "repetition_penalty": 1.05,
    }


def test_greedy_configs_and_bad_values():
    assert from_generation_config({"do_sample": False, "temperature": 0.9}) == {"temperature": 0.0}
    assert from_generation_config({"temperature": -1, "top_p": 0, "top_k": 0}) == {}
    assert from_generation_config({"temperature": float("nan"), "top_p": True}) == {}


def test_model_cards_fill_in_for_models_without_a_config(tmp_path):
    folder = tmp_path / "SmolLM2-135M-Instruct.Q4_1"
    folder.mkdir()
    (folder / GENERATION_CONFIG).write_text('{"bos_token_id": 1}')  # no sampling in it
    defaults = sampling_defaults(folder, "SmolLM2-135M-Instruct")
    assert defaults.source == "model card"
    assert defaults.values == {"temperature": 0.2, "top_p": 0.9}
    unknown = sampling_defaults(tmp_path, "mystery-model")
    assert unknown.values == {} and unknown.source == ""


def test_the_bundled_model_starts_from_its_card(default_model_dir):
    defaults = sampling_defaults(default_model_dir, "SmolLM2-135M-Instruct")
    assert defaults.values["temperature"] == 0.2


def test_a_reply_continues_from_where_it_stopped(tiny_engine):
    messages = [{"role": "user", "content": "Tell me a story"}]
    sampling = SamplingSettings(temperature=10.0, max_tokens=6, seed=5)  # varied words
    first = tiny_engine.chat(ChatRequest(messages=messages, sampling=sampling))
    assert first.stop_reason.value == "length" and first.text.strip()
    cut = [*messages, {"role": "assistant", "content": first.text}]
    more = tiny_engine.chat(
        ChatRequest(messages=cut, sampling=sampling, continue_final_message=True)
    )
    assert more.error is None and more.text
    # The prompt ends inside the reply: the cut text is its end, with no end-of-turn after it.
    decode = tiny_engine.run(lambda loaded: loaded.tokenizer.decode).result()
    prompt = decode(more.token_ids[: more.stats.prompt_tokens])
    assert prompt.endswith("Tell me a story<|im_end|>\n<|im_start|>assistant\n" + first.text)
    refused = tiny_engine.chat(
        ChatRequest(
            messages=cut,
            sampling=sampling,
            continue_final_message=True,
            tools=[{"type": "function", "function": {"name": "f"}}],
        )
    )
    assert refused.error and "without tools" in refused.error
