"""A tiny randomly initialised LLaVA (CLIP vision tower + llama) with real processor files.

LLaVA is the mlx-vlm architecture whose processor is simplest to write offline: its image
processor is CLIP's (resize the short side, centre-crop, normalise), and its prompt gives
each image one `<image>` token that the processor repeats once per patch. The folder is
loaded through mlx-vlm's own `load` (config.json, preprocessor_config.json and
processor_config.json are read by mlx-vlm and transformers as for a downloaded model), and
its language model uses the default model's tokenizer plus the `<image>` token, so prompts
tokenize exactly as the default model's do.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, cast

import mlx.core as mx
from mlx.utils import tree_flatten

IMAGE_TOKEN = "<image>"
_TOKENIZER_FILES = ("tokenizer_config.json", "special_tokens_map.json")
# CLIP's normalisation constants (what llava-1.5's preprocessor_config.json says).
_CLIP_MEAN = [0.48145466, 0.4578275, 0.40821073]
_CLIP_STD = [0.26862954, 0.26130258, 0.27577711]


def _write_tokenizer(tokenizer_dir: Path, out: Path) -> int:
    """Copy the tokenizer with `<image>` added as a special token; returns its id."""
    from tokenizers import AddedToken, Tokenizer

    tok = Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json"))
    tok.add_special_tokens([AddedToken(IMAGE_TOKEN, special=True, normalized=False)])
    tok.save(str(out / "tokenizer.json"))
    for name in _TOKENIZER_FILES:
        if (tokenizer_dir / name).exists():
            shutil.copy(tokenizer_dir / name, out / name)
    image_id = tok.token_to_id(IMAGE_TOKEN)
    assert image_id is not None
    return int(image_id)


def build_tiny_vision_model(
    out_dir: str | Path,
    tokenizer_dir: str | Path,
    *,
    image_size: int = 112,
    patch_size: int = 14,
    layers: int = 2,
    hidden: int = 128,
    vision_layers: int = 2,
    vision_hidden: int = 128,
    seed: int = 0,
    context: int = 8192,
) -> Path:
    """Write a random LLaVA MLX folder at `out_dir` using the tokenizer in `tokenizer_dir`;
    each image becomes (image_size / patch_size)² tokens."""
    from mlx_vlm.models.llava import llava
    from mlx_vlm.models.llava.config import (
        ModelConfig,
        TextConfig,
        VisionConfig,
    )

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    image_id = _write_tokenizer(Path(tokenizer_dir), out)
    vocab = image_id + 1
    text_config: dict[str, Any] = {
        "model_type": "llama",
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "intermediate_size": hidden * 3,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "rms_norm_eps": 1e-5,
        "vocab_size": vocab,
        "rope_theta": 10000.0,
        "max_position_embeddings": context,
        "tie_word_embeddings": True,
    }
    vision_config: dict[str, Any] = {
        "model_type": "clip_vision_model",
        "hidden_size": vision_hidden,
        "num_hidden_layers": vision_layers,
        "intermediate_size": vision_hidden * 4,
        "num_attention_heads": 4,
        "image_size": image_size,
        "patch_size": patch_size,
        "projection_dim": hidden,
        "num_channels": 3,
        "layer_norm_eps": 1e-5,
    }
    config: dict[str, Any] = {
        "model_type": "llava",
        "architectures": ["LlavaForConditionalGeneration"],
        "text_config": text_config,
        "vision_config": vision_config,
        "image_token_index": image_id,
        "vision_feature_select_strategy": "default",
        "vision_feature_layer": -2,
        "vocab_size": vocab,
        "max_position_embeddings": context,
    }
    mx.random.seed(seed)
    model_config = ModelConfig.from_dict(config)  # type: ignore[no-untyped-call]
    model_config.text_config = TextConfig.from_dict(text_config)  # type: ignore[no-untyped-call]
    model_config.vision_config = VisionConfig.from_dict(vision_config)  # type: ignore[no-untyped-call]
    model = llava.Model(model_config)
    leaves = cast(list[tuple[str, mx.array]], tree_flatten(model.parameters()))
    # A larger token embedding than the default init gives peaked but varied logits.
    params = {k: v * 2 if k.endswith("embed_tokens.weight") else v for k, v in leaves}
    mx.save_safetensors(str(out / "model.safetensors"), params, metadata={"format": "mlx"})
    (out / "config.json").write_text(json.dumps(config, indent=2))
    preprocessor = {
        "image_processor_type": "CLIPImageProcessor",
        "processor_class": "LlavaProcessor",
        "do_resize": True,
        "size": {"shortest_edge": image_size},
        "resample": 3,
        "do_center_crop": True,
        "crop_size": {"height": image_size, "width": image_size},
        "do_rescale": True,
        "rescale_factor": 1 / 255,
        "do_normalize": True,
        "image_mean": _CLIP_MEAN,
        "image_std": _CLIP_STD,
        "do_convert_rgb": True,
    }
    (out / "preprocessor_config.json").write_text(json.dumps(preprocessor, indent=2))
    processor = {
        "processor_class": "LlavaProcessor",
        "patch_size": patch_size,
        "vision_feature_select_strategy": "default",
        "image_token": IMAGE_TOKEN,
        "num_additional_image_tokens": 1,
    }
    (out / "processor_config.json").write_text(json.dumps(processor, indent=2))
    return out


if __name__ == "__main__":  # python -m benchmarks.tiny_vision_model OUT_DIR
    import sys

    from engine.library.load import ensure_default_model

    print(build_tiny_vision_model(sys.argv[1], ensure_default_model()))
