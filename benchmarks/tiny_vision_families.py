"""Tiny random vision models of the families people run, from mlx-vlm's own model classes.

Each builder writes an MLX folder that mlx-vlm's `load` reads as a downloaded model:
`config.json` for the family's model class, the family's real image processor settings
(`preprocessor_config.json`, scaled down so an image is a few dozen tokens), and the default
model's tokenizer with the family's special tokens added and the family's real chat
template (read in place from `../shared/datasets/chat-templates`, never copied into the
repository). The weights are random: the replies mean nothing, but a reply that differs
from mlx-vlm's own `generate` on the same folder shows a prompt, a picture or a position
read differently.

`FAMILIES` names each builder; `build_family(name, out, tokenizer_dir, templates)` writes
one folder.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import mlx.core as mx
from mlx.utils import tree_flatten

# Qwen2-VL's normalisation constants (its preprocessor_config.json), CLIP's.
_CLIP_MEAN = [0.48145466, 0.4578275, 0.40821073]
_CLIP_STD = [0.26862954, 0.26130258, 0.27577711]


def _write_tokenizer(
    tokenizer_dir: Path,
    out: Path,
    specials: list[str],
    template: str,
    named: dict[str, str] | None = None,
) -> dict[str, int]:
    """The default tokenizer with `specials` added as special tokens and `template` as its
    chat template, saved into `out`; `named` special tokens become tokenizer attributes
    (`boi_token`, `image_token`, ... as the family's tokenizer_config.json names them).
    Returns each special token's id."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    tok.add_special_tokens({"additional_special_tokens": specials})
    tok.chat_template = template
    tok.save_pretrained(str(out))
    if named:
        config_file = out / "tokenizer_config.json"
        config = json.loads(config_file.read_text())
        config["extra_special_tokens"] = named
        config_file.write_text(json.dumps(config, indent=2))
    return {s: _token_id(tok, s) for s in specials}


def _token_id(tok: Any, token: str) -> int:
    found = tok.convert_tokens_to_ids(token)
    assert isinstance(found, int), found
    return found


def _save_weights(model: Any, out: Path, seed: int) -> None:
    leaves = cast(list[tuple[str, mx.array]], tree_flatten(model.parameters()))
    # mlx's default initialisation; the output head is untied from the token embedding so
    # that a reply depends on the whole prompt (the picture and every position), not
    # only on its last token (a tied random head mostly echoes it).
    params = dict(leaves)
    mx.save_safetensors(str(out / "model.safetensors"), params, metadata={"format": "mlx"})


def _text_config(vocab: int, hidden: int = 64, **extra: Any) -> dict[str, Any]:
    return {
        "hidden_size": hidden,
        "num_hidden_layers": 2,
        "intermediate_size": hidden * 3,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "rms_norm_eps": 1e-6,
        "vocab_size": vocab,
        "max_position_embeddings": 8192,
        "tie_word_embeddings": False,
        **extra,
    }


def build_qwen2_vl(out: Path, tokenizer_dir: Path, templates: Path, seed: int = 0) -> Path:
    """Qwen2-VL: `<|vision_start|><|image_pad|><|vision_end|>`, the pad repeated once per
    merged 2×2 patch, and 3-D rotary positions (time, height, width) over the image."""
    return _build_qwen_vl("qwen2_vl", out, tokenizer_dir, templates, seed)


def build_qwen2_5_vl(out: Path, tokenizer_dir: Path, templates: Path, seed: int = 0) -> Path:
    """Qwen2.5-VL: Qwen2-VL's prompt (the same template) with a windowed vision tower."""
    return _build_qwen_vl("qwen2_5_vl", out, tokenizer_dir, templates, seed)


def build_qwen2_vl_thinking(out: Path, tokenizer_dir: Path, templates: Path, seed: int = 0) -> Path:
    """Qwen2-VL's tiny model with Qwen3.5's chat template, which opens a `<think>` block
    in the prompt (and places pictures as Qwen2-VL's does): thinking over a picture."""
    return _build_qwen_vl(
        "qwen2_vl", out, tokenizer_dir, templates, seed, "qwen3.5.jinja", ["<think>", "</think>"]
    )


def _build_qwen_vl(
    family: str,
    out: Path,
    tokenizer_dir: Path,
    templates: Path,
    seed: int,
    template: str = "qwen2-vl.jinja",
    more: list[str] | None = None,
) -> Path:
    import importlib

    specials = ["<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>"]
    specials += more or []
    ids = _write_tokenizer(tokenizer_dir, out, specials, (templates / template).read_text())
    vocab = max(ids.values()) + 1
    hidden = 64
    text = _text_config(
        vocab,
        hidden,
        model_type=family,
        rope_theta=10000.0,
        rope_scaling={"type": "mrope", "mrope_section": [2, 3, 3]},  # head_dim 16: 8 pairs
    )
    vision: dict[str, Any] = {
        "model_type": family,
        "depth": 2,
        "num_heads": 2,
        "patch_size": 14,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
        "in_channels": 3,
    }
    if family == "qwen2_vl":
        vision |= {"embed_dim": 32, "hidden_size": hidden, "mlp_ratio": 2}
    else:
        vision |= {
            "hidden_size": 32,
            "intermediate_size": 64,
            "out_hidden_size": hidden,
            "window_size": 56,
            "fullatt_block_indexes": [1],
        }
    config = {
        **text,
        "model_type": family,
        "vision_config": vision,
        "image_token_id": ids["<|image_pad|>"],
        "video_token_id": ids["<|video_pad|>"],
        "vision_start_token_id": ids["<|vision_start|>"],
        "vision_end_token_id": ids["<|vision_end|>"],
        "eos_token_id": 2,
    }
    module = importlib.import_module(f"mlx_vlm.models.{family}")
    mx.random.seed(seed)
    model_config = module.ModelConfig.from_dict(dict(config))
    model_config.vision_config = module.VisionConfig.from_dict(vision)
    model_config.text_config = module.TextConfig.from_dict(text)
    _save_weights(module.Model(model_config), out, seed)
    (out / "config.json").write_text(json.dumps(config, indent=2))
    preprocessor = {
        "image_processor_type": "Qwen2VLImageProcessor",
        "processor_class": "Qwen2_5_VLProcessor" if family == "qwen2_5_vl" else "Qwen2VLProcessor",
        "do_resize": True,
        "do_rescale": True,
        "rescale_factor": 1 / 255,
        "do_normalize": True,
        "do_convert_rgb": True,
        "image_mean": _CLIP_MEAN,
        "image_std": _CLIP_STD,
        "patch_size": 14,
        "merge_size": 2,
        "temporal_patch_size": 2,
        "min_pixels": 56 * 56,
        "max_pixels": 112 * 112,  # at most 8 × 8 patches: 16 image tokens
    }
    (out / "preprocessor_config.json").write_text(json.dumps(preprocessor, indent=2))
    return out


def build_qwen3_vl(out: Path, tokenizer_dir: Path, templates: Path, seed: int = 0) -> Path:
    """Qwen3-VL: Qwen2-VL's prompt and 3-D positions, 16-pixel patches, and deepstack (the
    vision tower's earlier features added to the image positions in the first layers).
    The shared datasets hold no Qwen3-VL template; it places images as Qwen2-VL's does,
    which the tiny model uses."""
    from mlx_vlm.models import qwen3_vl

    specials = ["<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>"]
    ids = _write_tokenizer(tokenizer_dir, out, specials, (templates / "qwen2-vl.jinja").read_text())
    vocab = max(ids.values()) + 1
    hidden = 64
    text = _text_config(
        vocab,
        hidden,
        model_type="qwen3_vl",
        head_dim=16,
        rope_theta=10000.0,
        rope_scaling={
            "rope_type": "default",
            "mrope_section": [2, 3, 3],
            "mrope_interleaved": True,
        },
    )
    vision: dict[str, Any] = {
        "model_type": "qwen3_vl",
        "depth": 2,
        "hidden_size": 32,
        "intermediate_size": 64,
        "out_hidden_size": hidden,
        "num_heads": 2,
        "patch_size": 16,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
        "in_channels": 3,
        "num_position_embeddings": 16,
        "deepstack_visual_indexes": [0],
    }
    config = {
        "model_type": "qwen3_vl",
        "text_config": text,
        "vision_config": vision,
        "image_token_id": ids["<|image_pad|>"],
        "video_token_id": ids["<|video_pad|>"],
        "vision_start_token_id": ids["<|vision_start|>"],
        "vision_end_token_id": ids["<|vision_end|>"],
        "vocab_size": vocab,
        "eos_token_id": 2,
    }
    mx.random.seed(seed)
    model_config = qwen3_vl.ModelConfig.from_dict(dict(config))
    _save_weights(qwen3_vl.Model(model_config), out, seed)
    (out / "config.json").write_text(json.dumps(config, indent=2))
    preprocessor = {
        "image_processor_type": "Qwen2VLImageProcessor",
        "processor_class": "Qwen3VLProcessor",
        "do_resize": True,
        "do_rescale": True,
        "rescale_factor": 1 / 255,
        "do_normalize": True,
        "do_convert_rgb": True,
        "image_mean": [0.5, 0.5, 0.5],
        "image_std": [0.5, 0.5, 0.5],
        "patch_size": 16,
        "merge_size": 2,
        "temporal_patch_size": 2,
        "size": {"shortest_edge": 64 * 64, "longest_edge": 128 * 128},
    }
    (out / "preprocessor_config.json").write_text(json.dumps(preprocessor, indent=2))
    return out


def build_gemma3(out: Path, tokenizer_dir: Path, templates: Path, seed: int = 0) -> Path:
    """Gemma 3: `<start_of_image>` in the text, which the processor turns into a fixed
    number of soft image tokens between `<start_of_image>` and `<end_of_image>`, with a
    blank line either side; a SigLIP tower pooled to that many tokens."""
    from mlx_vlm.models import gemma3

    named = {
        "boi_token": "<start_of_image>",
        "eoi_token": "<end_of_image>",
        "image_token": "<image_soft_token>",
    }
    specials = ["<start_of_turn>", "<end_of_turn>", *named.values()]
    template = (templates / "gemma-3-vllm-pythonic.jinja").read_text()
    ids = _write_tokenizer(tokenizer_dir, out, specials, template, named)
    vocab = max(ids.values()) + 1
    hidden, image_size, tokens = 64, 112, 16  # 8 × 8 patches pooled to 4 × 4 tokens
    text = _text_config(
        vocab,
        hidden,
        model_type="gemma3_text",
        head_dim=16,
        query_pre_attn_scalar=16,
        sliding_window=512,
        sliding_window_pattern=2,
        mm_tokens_per_image=tokens,
        rope_global_base_freq=10000.0,
        rope_local_base_freq=10000.0,
    )
    vision = {
        "model_type": "siglip_vision_model",
        "hidden_size": 32,
        "num_hidden_layers": 2,
        "intermediate_size": 64,
        "num_attention_heads": 2,
        "patch_size": 14,
        "image_size": image_size,
        "num_channels": 3,
        "layer_norm_eps": 1e-6,
    }
    config = {
        "model_type": "gemma3",
        "text_config": text,
        "vision_config": vision,
        "image_token_index": ids["<image_soft_token>"],
        "hidden_size": hidden,
        "vocab_size": vocab,
        "pad_token_id": 0,
        "eos_token_id": [ids["<end_of_turn>"]],
    }
    mx.random.seed(seed)
    model_config = gemma3.ModelConfig.from_dict(dict(config))
    model_config.text_config = gemma3.TextConfig.from_dict(text)
    model_config.vision_config = gemma3.VisionConfig.from_dict(vision)
    _save_weights(gemma3.Model(model_config), out, seed)
    (out / "config.json").write_text(json.dumps(config, indent=2))
    preprocessor = {
        "image_processor_type": "Gemma3ImageProcessor",
        "processor_class": "Gemma3Processor",
        "do_resize": True,
        "size": {"height": image_size, "width": image_size},
        "resample": 2,
        "do_rescale": True,
        "rescale_factor": 1 / 255,
        "do_normalize": True,
        "image_mean": [0.5, 0.5, 0.5],
        "image_std": [0.5, 0.5, 0.5],
        "do_convert_rgb": True,
        "do_pan_and_scan": False,
    }
    (out / "preprocessor_config.json").write_text(json.dumps(preprocessor, indent=2))
    processor = {"processor_class": "Gemma3Processor", "image_seq_length": tokens}
    (out / "processor_config.json").write_text(json.dumps(processor, indent=2))
    return out


def build_mistral3(out: Path, tokenizer_dir: Path, templates: Path, seed: int = 0) -> Path:
    """Mistral Small 3.1 (Pixtral's tower): `[IMG]` per merged patch, rows ended by
    `[IMG_BREAK]` and the image by `[IMG_END]`, at the picture's own aspect ratio."""
    from mlx_vlm.models import mistral3

    specials = [
        "[INST]",
        "[/INST]",
        "[SYSTEM_PROMPT]",
        "[/SYSTEM_PROMPT]",
        "[AVAILABLE_TOOLS]",
        "[/AVAILABLE_TOOLS]",
        "[TOOL_CALLS]",
        "[TOOL_RESULTS]",
        "[/TOOL_RESULTS]",
        "[IMG]",
        "[IMG_BREAK]",
        "[IMG_END]",
    ]
    template = (templates / "mistral-small-3.1.jinja").read_text()
    ids = _write_tokenizer(tokenizer_dir, out, specials, template)
    vocab = max(ids.values()) + 1
    hidden, patch, longest = 64, 14, 112
    text = _text_config(vocab, hidden, model_type="mistral", head_dim=16, rope_theta=10000.0)
    vision = {
        "model_type": "pixtral",
        "num_hidden_layers": 2,
        "hidden_size": 32,
        "head_dim": 16,
        "intermediate_size": 64,
        "num_attention_heads": 2,
        "image_size": longest,
        "patch_size": patch,
        "num_channels": 3,
        "rope_theta": 10000.0,
    }
    config = {
        "model_type": "mistral3",
        "text_config": text,
        "vision_config": vision,
        "image_token_index": ids["[IMG]"],
        "spatial_merge_size": 2,
        "vision_feature_layer": -1,
        "multimodal_projector_bias": False,
        "projector_hidden_act": "gelu",
        "vocab_size": vocab,
        "eos_token_id": 2,
    }
    mx.random.seed(seed)
    model_config = mistral3.ModelConfig.from_dict(dict(config))
    model_config.text_config = mistral3.TextConfig.from_dict(text)
    model_config.vision_config = mistral3.VisionConfig.from_dict(vision)
    _save_weights(mistral3.Model(model_config), out, seed)
    (out / "config.json").write_text(json.dumps(config, indent=2))
    preprocessor = {
        "image_processor_type": "PixtralImageProcessor",
        "processor_class": "PixtralProcessor",
        "do_resize": True,
        "size": {"longest_edge": longest},
        "patch_size": {"height": patch, "width": patch},
        "resample": 3,
        "do_rescale": True,
        "rescale_factor": 1 / 255,
        "do_normalize": True,
        "image_mean": _CLIP_MEAN,
        "image_std": _CLIP_STD,
        "do_convert_rgb": True,
    }
    (out / "preprocessor_config.json").write_text(json.dumps(preprocessor, indent=2))
    processor = {
        "processor_class": "PixtralProcessor",
        "image_token": "[IMG]",
        "image_break_token": "[IMG_BREAK]",
        "image_end_token": "[IMG_END]",
        "patch_size": patch,
        "spatial_merge_size": 2,
    }
    (out / "processor_config.json").write_text(json.dumps(processor, indent=2))
    return out


def build_smolvlm(out: Path, tokenizer_dir: Path, templates: Path, seed: int = 0) -> Path:
    """SmolVLM (Idefics3's design): the picture split into tiles plus a global view, each
    tile `<fake_token_around_image><row_R_col_C>` and its image tokens, rows ended by a
    newline. The shared datasets hold no SmolVLM chat template, so the tiny model uses the
    Qwen2-VL one (ChatML that places image parts) with its pad as the image token: the
    family's processor, tiles and tower are SmolVLM's own."""
    from mlx_vlm.models import smolvlm

    named = {
        "image_token": "<|image_pad|>",
        "fake_image_token": "<fake_token_around_image>",
        "global_image_token": "<global-img>",
        "end_of_utterance_token": "<end_of_utterance>",
    }
    rows = [f"<row_{r}_col_{c}>" for r in range(1, 5) for c in range(1, 5)]
    specials = ["<|vision_start|>", "<|vision_end|>", *named.values(), *rows]
    template = (templates / "qwen2-vl.jinja").read_text()
    ids = _write_tokenizer(tokenizer_dir, out, specials, template, named)
    vocab = max(ids.values()) + 1
    hidden, tile, patch, scale = 64, 56, 14, 2  # a tile: 4 × 4 patches shuffled to 4 tokens
    text = _text_config(vocab, hidden, model_type="llama", rope_theta=10000.0)
    vision = {
        "model_type": "siglip_vision_model",
        "hidden_size": 32,
        "num_attention_heads": 2,
        "num_hidden_layers": 2,
        "intermediate_size": 64,
        "patch_size": patch,
        "image_size": tile,
        "num_channels": 3,
    }
    config = {
        "model_type": "smolvlm",
        "text_config": text,
        "vision_config": vision,
        "scale_factor": scale,
        "image_token_id": ids["<|image_pad|>"],
        "vocab_size": vocab,
        "eos_token_id": [2],
    }
    mx.random.seed(seed)
    model_config = smolvlm.ModelConfig.from_dict(dict(config))
    model_config.text_config = smolvlm.TextConfig.from_dict(text)
    model_config.vision_config = smolvlm.VisionConfig.from_dict(vision)
    _save_weights(smolvlm.Model(model_config), out, seed)
    (out / "config.json").write_text(json.dumps(config, indent=2))
    preprocessor = {
        "image_processor_type": "SmolVLMImageProcessor",
        "processor_class": "SmolVLMProcessor",
        "do_convert_rgb": True,
        "do_resize": True,
        "size": {"longest_edge": tile * 2},
        "resample": 1,
        "do_image_splitting": True,
        "max_image_size": {"longest_edge": tile},
        "do_rescale": True,
        "rescale_factor": 1 / 255,
        "do_normalize": True,
        "image_mean": [0.5, 0.5, 0.5],
        "image_std": [0.5, 0.5, 0.5],
        "do_pad": True,
    }
    (out / "preprocessor_config.json").write_text(json.dumps(preprocessor, indent=2))
    processor = {
        "processor_class": "SmolVLMProcessor",
        "image_seq_len": (tile // patch) ** 2 // scale**2,
    }
    (out / "processor_config.json").write_text(json.dumps(processor, indent=2))
    return out


# mlx-vlm's Phi-3.5-vision tower is CLIP ViT-L/14-336 whatever the config says (a class
# attribute: 24 layers, 300M parameters, far too slow on a CPU for a test). The tiny model
# keeps its shape where the code depends on it (1024 wide, 336-pixel tiles of 24 × 24
# patches: 144 image tokens per tile) and has 2 layers with a narrow MLP. The attribute is
# read when a model is built, so it is set for this process, before the tiny model is
# written and for every load of it after (Corral's and the reference's alike).
TINY_PHI3_TOWER = {"num_hidden_layers": 2, "intermediate_size": 64}


def use_tiny_phi3_tower() -> None:
    """Build every Phi-3.5-vision model of this process with the tiny tower."""
    from types import SimpleNamespace

    from mlx_vlm.models.phi3_v.vision import VisionModel

    tower = vars(VisionModel.CLIP_VIT_LARGE_PATCH14_336_CONFIG) | TINY_PHI3_TOWER
    VisionModel.CLIP_VIT_LARGE_PATCH14_336_CONFIG = SimpleNamespace(**tower)


def _add_bos(out: Path) -> None:
    """The saved tokenizer adds its BOS in front of what it encodes, as Phi-3.5-vision's
    does (its processor drops the first token of each piece after a picture: that BOS)."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(out))
    file = out / "tokenizer.json"
    data = json.loads(file.read_text())
    bos, bos_id = str(tok.bos_token), int(tok.bos_token_id)
    data["post_processor"] = {
        "type": "TemplateProcessing",
        "single": [
            {"SpecialToken": {"id": bos, "type_id": 0}},
            {"Sequence": {"id": "A", "type_id": 0}},
        ],
        "pair": [
            {"SpecialToken": {"id": bos, "type_id": 0}},
            {"Sequence": {"id": "A", "type_id": 0}},
            {"Sequence": {"id": "B", "type_id": 1}},
        ],
        "special_tokens": {bos: {"id": bos, "ids": [bos_id], "tokens": [bos]}},
    }
    file.write_text(json.dumps(data))


def build_phi3_v(out: Path, tokenizer_dir: Path, templates: Path, seed: int = 0) -> Path:
    """Phi-3.5-vision: numbered `<|image_N|>` markers, which its processor replaces by
    `-N` once per image token (a 336-pixel global view and tiles, 12 separators a row);
    the model finds the pictures by the negative ids. The tokenizer gets `<|image|>`, the
    special image token of Phi-3.5-vision's own tokenizer."""
    from mlx_vlm.models import phi3_v

    use_tiny_phi3_tower()
    specials = ["<|system|>", "<|user|>", "<|assistant|>", "<|end|>", "<|image|>"]
    template = (templates / "phi-3.5-vision.jinja").read_text()
    ids = _write_tokenizer(tokenizer_dir, out, specials, template)
    _add_bos(out)
    vocab = max(ids.values()) + 1
    hidden = 64
    config = _text_config(
        vocab,
        hidden,
        model_type="phi3_v",
        rope_theta=10000.0,
        image_token_index=-1,
        eos_token_id=[ids["<|end|>"]],
        vision_config={"model_type": "phi3_v", "num_img_tokens": 144},
    )
    mx.random.seed(seed)
    model_config = phi3_v.ModelConfig.from_dict(dict(config))
    _save_weights(phi3_v.Model(model_config), out, seed)
    (out / "config.json").write_text(json.dumps(config, indent=2))
    preprocessor = {
        "image_processor_type": "Phi3VImageProcessor",
        "processor_class": "Phi3VProcessor",
        "num_crops": 1,  # one 336-pixel tile and the global view: 313 image tokens
        "num_img_tokens": 144,
        "image_mean": _CLIP_MEAN,
        "image_std": _CLIP_STD,
    }
    (out / "preprocessor_config.json").write_text(json.dumps(preprocessor, indent=2))
    return out


def build_qwen3_5(out: Path, tokenizer_dir: Path, templates: Path, seed: int = 0) -> Path:
    """Qwen3.5: Qwen3-VL's pictures over a language model whose layers are mostly linear
    attention (Gated DeltaNet), which keeps a recurrent state instead of keys and values:
    Corral refuses it at load (`REFUSED`), so the tiny model only has to load."""
    from mlx_vlm.models import qwen3_5

    specials = ["<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>"]
    ids = _write_tokenizer(tokenizer_dir, out, specials, (templates / "qwen3.5.jinja").read_text())
    vocab = max(ids.values()) + 1
    hidden = 64
    text = _text_config(
        vocab,
        hidden,
        model_type="qwen3_5_text",
        head_dim=16,
        linear_num_value_heads=2,
        linear_num_key_heads=2,
        linear_key_head_dim=16,
        linear_value_head_dim=16,
        linear_conv_kernel_dim=4,
        full_attention_interval=2,
        rope_parameters={
            "type": "default",
            "mrope_section": [1, 1, 0],
            "rope_theta": 10000.0,
            "partial_rotary_factor": 0.25,
        },
    )
    vision = {
        "model_type": "qwen3_5",
        "depth": 1,
        "hidden_size": 32,
        "intermediate_size": 64,
        "out_hidden_size": hidden,
        "num_heads": 2,
        "patch_size": 16,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
        "in_channels": 3,
        "num_position_embeddings": 16,
        "deepstack_visual_indexes": [],
    }
    config = {
        "model_type": "qwen3_5",
        "text_config": text,
        "vision_config": vision,
        "image_token_id": ids["<|image_pad|>"],
        "video_token_id": ids["<|video_pad|>"],
        "vision_start_token_id": ids["<|vision_start|>"],
        "vision_end_token_id": ids["<|vision_end|>"],
        "vocab_size": vocab,
        "eos_token_id": 2,
    }
    mx.random.seed(seed)
    model_config = qwen3_5.ModelConfig.from_dict(dict(config))
    _save_weights(qwen3_5.Model(model_config), out, seed)
    (out / "config.json").write_text(json.dumps(config, indent=2))
    preprocessor = {
        "image_processor_type": "Qwen2VLImageProcessor",
        "processor_class": "Qwen3VLProcessor",
        "patch_size": 16,
        "merge_size": 2,
        "temporal_patch_size": 2,
        "image_mean": [0.5, 0.5, 0.5],
        "image_std": [0.5, 0.5, 0.5],
        "size": {"shortest_edge": 64 * 64, "longest_edge": 128 * 128},
    }
    (out / "preprocessor_config.json").write_text(json.dumps(preprocessor, indent=2))
    return out


def build_llama4(out: Path, tokenizer_dir: Path, templates: Path, seed: int = 0) -> Path:
    """Llama 4: three of every four layers attend within fixed chunks of tokens (a chunked
    KV cache that drops what lies before the chunk): Corral refuses it at load
    (`REFUSED`), so the tiny model only has to load."""
    from mlx_vlm.models import llama4

    specials = [
        "<|header_start|>",
        "<|header_end|>",
        "<|eot|>",
        "<|image|>",
        "<|image_start|>",
        "<|image_end|>",
        "<|patch|>",
        "<|tile_x_separator|>",
        "<|tile_y_separator|>",
    ]
    template = (templates / "llama-4-vllm-pythonic.jinja").read_text()
    ids = _write_tokenizer(tokenizer_dir, out, specials, template)
    vocab = max(ids.values()) + 1
    hidden = 64
    text = _text_config(
        vocab,
        hidden,
        model_type="llama4_text",
        head_dim=16,
        rope_theta=10000.0,
        num_hidden_layers=4,
        intermediate_size_mlp=128,
        num_local_experts=2,
        interleave_moe_layer_step=2,
        no_rope_layers=[1, 1, 1, 0],
        attention_chunk_size=64,
    )
    vision = {
        "model_type": "llama4_vision_model",
        "hidden_size": 32,
        "image_size": 56,
        "initializer_range": 0.02,
        "intermediate_size": 64,
        "norm_eps": 1e-5,
        "num_attention_heads": 2,
        "num_channels": 3,
        "num_hidden_layers": 1,
        "patch_size": 14,
        "pixel_shuffle_ratio": 0.5,
        "projector_dropout": 0.0,
        "projector_input_dim": 64,
        "projector_output_dim": 64,
        "rope_theta": 10000.0,
        "vision_feature_layer": -1,
        "vision_feature_select_strategy": "default",
        "vision_output_dim": 64,
    }
    config = {
        "model_type": "llama4",
        "text_config": text,
        "vision_config": vision,
        "image_token_id": ids["<|image|>"],
        "eos_token_id": [ids["<|eot|>"]],
    }
    mx.random.seed(seed)
    model_config = llama4.ModelConfig.from_dict(dict(config))
    model_config.text_config = llama4.TextConfig.from_dict(text)
    model_config.vision_config = llama4.VisionConfig.from_dict(vision)
    _save_weights(llama4.Model(model_config), out, seed)
    (out / "config.json").write_text(json.dumps(config, indent=2))
    preprocessor = {"size": {"height": 56, "width": 56}, "max_patches": 4}
    (out / "preprocessor_config.json").write_text(json.dumps(preprocessor, indent=2))
    return out


def build_gemma4(out: Path, tokenizer_dir: Path, templates: Path, seed: int = 0) -> Path:
    """Gemma 4: `<|image|>` placed by the template (a blank line either side), which the
    processor expands to `<|image>`, one soft token per pooled 3 × 3 patches of the picture
    at its own aspect ratio, and `<image|>`; per-layer token inputs beside the embeddings."""
    from mlx_vlm.models import gemma4

    named = {"boi_token": "<|image>", "eoi_token": "<image|>", "image_token": "<|image|>"}
    specials = [
        "<|turn>",
        "<turn|>",
        "<|think|>",
        "<|channel>",
        "<channel|>",
        "<|tool>",
        "<tool|>",
        "<|tool_call>",
        "<tool_call|>",
        "<|tool_response>",
        "<tool_response|>",
        "<|audio|>",
        "<|video|>",
        *named.values(),
    ]
    template = (templates / "gemma-4.jinja").read_text()
    ids = _write_tokenizer(tokenizer_dir, out, specials, template, named)
    vocab = max(ids.values()) + 1
    hidden = 64
    text = {
        "model_type": "gemma4_text",
        "hidden_size": hidden,
        "num_hidden_layers": 4,
        "intermediate_size": hidden * 2,
        "num_attention_heads": 2,
        "head_dim": 16,
        "global_head_dim": 32,
        "num_key_value_heads": 1,
        "num_kv_shared_layers": 2,
        "vocab_size": vocab,
        "vocab_size_per_layer_input": vocab,
        "hidden_size_per_layer_input": 8,
        "sliding_window": 512,
        "sliding_window_pattern": 2,
        "use_double_wide_mlp": False,
        "tie_word_embeddings": True,
    }
    vision = {
        "model_type": "gemma4_vision",
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "global_head_dim": 16,
        "patch_size": 16,
        "position_embedding_size": 64,
        "pooling_kernel_size": 3,
        "default_output_length": 16,
    }
    config = {
        "model_type": "gemma4",
        "text_config": text,
        "vision_config": vision,
        "vocab_size": vocab,
        "hidden_size": hidden,
        "image_token_id": ids["<|image|>"],
        "boi_token_id": ids["<|image>"],
        "eoi_token_id": ids["<image|>"],
        "audio_token_id": ids["<|audio|>"],
        "video_token_id": ids["<|video|>"],
        "vision_soft_tokens_per_image": 16,
        "eos_token_id": [ids["<turn|>"]],
    }
    mx.random.seed(seed)
    model_config = gemma4.ModelConfig.from_dict(dict(config))
    model_config.text_config = gemma4.TextConfig.from_dict(text)
    model_config.vision_config = gemma4.VisionConfig.from_dict(vision)
    _save_weights(gemma4.Model(model_config), out, seed)
    (out / "config.json").write_text(json.dumps(config, indent=2))
    preprocessor = {
        "image_processor_type": "Gemma4ImageProcessor",
        "processor_class": "Gemma4Processor",
        "patch_size": 16,
        "max_soft_tokens": 16,
        "pooling_kernel_size": 3,
        "image_mean": [0.0, 0.0, 0.0],
        "image_std": [1.0, 1.0, 1.0],
    }
    (out / "preprocessor_config.json").write_text(json.dumps(preprocessor, indent=2))
    processor = {"processor_class": "Gemma4Processor", "image_seq_length": 16}
    (out / "processor_config.json").write_text(json.dumps(processor, indent=2))
    return out


# Families Corral refuses at load, each with the words its refusal names why.
REFUSED: dict[str, tuple[Callable[[Path, Path, Path, int], Path], tuple[str, ...]]] = {
    "qwen3_5": (build_qwen3_5, ("linear attention", "recurrent")),
    "llama4": (build_llama4, ("chunked attention",)),
}


FAMILIES: dict[str, Callable[[Path, Path, Path, int], Path]] = {
    "qwen2_vl": build_qwen2_vl,
    "qwen2_5_vl": build_qwen2_5_vl,
    "qwen3_vl": build_qwen3_vl,
    "gemma3": build_gemma3,
    "gemma4": build_gemma4,
    "mistral3": build_mistral3,
    "smolvlm": build_smolvlm,
    "phi3_v": build_phi3_v,
}

# Tiny models for one test each, not families of their own.
OTHERS: dict[str, Callable[[Path, Path, Path, int], Path]] = {
    "qwen2_vl_thinking": build_qwen2_vl_thinking,
}


def build_family(
    name: str, out: str | Path, tokenizer_dir: str | Path, templates: str | Path, seed: int = 0
) -> Path:
    """Write the tiny model of family `name` into `out` (created)."""
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    builders = FAMILIES | {k: v[0] for k, v in REFUSED.items()} | OTHERS
    builder = builders[name]
    return builder(folder, Path(tokenizer_dir), Path(templates), seed)


if __name__ == "__main__":  # python -m benchmarks.tiny_vision_families FAMILY OUT TEMPLATES
    import sys

    from engine.library.load import ensure_default_model

    print(build_family(sys.argv[1], sys.argv[2], ensure_default_model(), sys.argv[3]))
