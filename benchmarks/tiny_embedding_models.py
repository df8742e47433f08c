"""Tiny random embedding and reranker models of each family Corral serves, built from
mlx-embeddings' own model classes, with real tokenizers.

BERT gets a WordPiece tokenizer and XLM-RoBERTa a SentencePiece-style Unigram one, both
trained here with the `tokenizers` library on this repository's README (no download); the
decoder families (Qwen3-Embedding, EmbeddingGemma, bidirectional Llama) and ModernBERT use
the default model's byte-level BPE tokenizer with the special tokens their families add
(ModernBERT's [CLS]/[SEP], Qwen3-Embedding's end-of-text appended and left padding, ...).
The weights are random: the vectors mean nothing, but Corral's must equal the library's own
on the same folder.

`EMBEDDING_FAMILIES` and `RERANK_FAMILIES` name the builders; `build_embedding_model(name,
out, tokenizer_dir)` writes one folder that `mlx_embeddings.load` reads.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import mlx.core as mx
from mlx.utils import tree_flatten

REPO = Path(__file__).resolve().parents[1]
HIDDEN = 32


def _corpus() -> list[str]:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    return [line for line in text.splitlines() if line.strip()]


def _save_tokenizer(tokenizer: Any, out: Path, **settings: Any) -> None:
    """`tokenizer` (a `tokenizers.Tokenizer`) saved as a transformers fast tokenizer."""
    from transformers import PreTrainedTokenizerFast

    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, **settings)  # type: ignore[no-untyped-call]
    fast.save_pretrained(str(out))


def _wordpiece(out: Path, max_length: int = 64) -> int:
    """A BERT WordPiece tokenizer ([CLS] text [SEP], pairs with token type ids)."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from tokenizers.processors import TemplateProcessing

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    trainer = trainers.WordPieceTrainer(vocab_size=800, special_tokens=specials)
    tok.train_from_iterator(_corpus(), trainer)
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)],
    )
    _save_tokenizer(
        tok,
        out,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
        model_max_length=max_length,
        model_input_names=["input_ids", "token_type_ids", "attention_mask"],
    )
    return int(tok.get_vocab_size())


def _unigram(out: Path) -> int:
    """An XLM-RoBERTa SentencePiece-style Unigram tokenizer (<s> text </s>, pad id 1)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from tokenizers.processors import TemplateProcessing

    specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    tok = Tokenizer(models.Unigram())
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    trainer = trainers.UnigramTrainer(vocab_size=600, special_tokens=specials, unk_token="<unk>")
    tok.train_from_iterator(_corpus(), trainer)
    tok.post_processor = TemplateProcessing(
        single="<s> $A </s>",
        pair="<s> $A </s> </s> $B </s>",
        special_tokens=[("<s>", 0), ("</s>", 2)],
    )
    _save_tokenizer(
        tok,
        out,
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        pad_token="<pad>",
        mask_token="<mask>",
        model_max_length=48,
        model_input_names=["input_ids", "attention_mask"],
    )
    return int(tok.get_vocab_size())


def _bpe(
    out: Path,
    tokenizer_dir: Path,
    single: str,
    pair: str,
    specials: list[str],
    pad: str,
    padding_side: str = "right",
) -> int:
    """The default model's byte-level BPE with `specials` added and a template that puts
    them around a text (`single`) and a pair (`pair`)."""
    from tokenizers import AddedToken, Tokenizer
    from tokenizers.processors import TemplateProcessing

    tok = Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json"))
    tok.add_special_tokens([AddedToken(s, special=True) for s in specials])
    used = {p.split(":")[0] for p in f"{single} {pair}".split() if not p.startswith("$")}
    tok.post_processor = TemplateProcessing(
        single=single, pair=pair, special_tokens=[(s, tok.token_to_id(s)) for s in used]
    )
    _save_tokenizer(
        tok,
        out,
        pad_token=pad,
        padding_side=padding_side,
        model_max_length=96,
        model_input_names=["input_ids", "attention_mask"],
    )
    return int(tok.get_vocab_size())


def _save_model(module: Any, args: Any, config: dict[str, Any], out: Path, seed: int) -> Path:
    """A random `module.Model(args)` saved with `config` as mlx-embeddings reads it."""
    mx.random.seed(seed)
    model = module.Model(args)
    leaves = cast(list[tuple[str, mx.array]], tree_flatten(model.parameters()))
    weights = {k: v.astype(mx.float32) for k, v in leaves}
    mx.save_safetensors(str(out / "model.safetensors"), weights, metadata={"format": "mlx"})
    (out / "config.json").write_text(json.dumps(config, indent=2))
    return out


def _bert(
    out: Path,
    tokenizer_dir: Path,
    hidden: int = HIDDEN,
    layers: int = 2,
    heads: int = 2,
    positions: int = 64,
) -> Path:
    from mlx_embeddings.models import bert

    vocab = _wordpiece(out, positions)
    config = {
        "model_type": "bert",
        "architectures": ["BertModel"],
        "vocab_size": vocab,
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "intermediate_size": hidden * 4 if hidden > HIDDEN else hidden * 2,
        "max_position_embeddings": positions,
        "type_vocab_size": 2,
        "pad_token_id": 0,
    }
    return _save_model(bert, bert.ModelArgs.from_dict(config), config, out, 1)


def build_minilm_shaped(out: str | Path, tokenizer_dir: str | Path) -> Path:
    """A random BERT the shape of all-MiniLM-L6-v2 (6 layers, hidden 384, 12 heads, 512
    positions), the small embedding model editors index with: for timing, where a tiny
    model's forward pass would be all overhead."""
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    return _bert(folder, Path(tokenizer_dir), hidden=384, layers=6, heads=12, positions=512)


def _xlm_roberta(out: Path, tokenizer_dir: Path) -> Path:
    from mlx_embeddings.models import xlm_roberta

    vocab = _unigram(out)
    config = {
        "model_type": "xlm-roberta",
        "architectures": ["XLMRobertaModel"],
        "vocab_size": vocab,
        "hidden_size": HIDDEN,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "intermediate_size": HIDDEN * 2,
        "max_position_embeddings": 50,  # 48 tokens: positions start after the pad id (1)
        "type_vocab_size": 1,
        "pad_token_id": 1,
    }
    return _save_model(xlm_roberta, xlm_roberta.ModelArgs.from_dict(config), config, out, 2)


def _modernbert_config(out: Path, vocab: int, architectures: list[str]) -> dict[str, Any]:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(out))
    cls, sep, pad = (tok.convert_tokens_to_ids(t) for t in ("[CLS]", "[SEP]", "[PAD]"))
    return {
        # its tokenizer's ids, not ModernBERT's defaults (transformers warns of those)
        "pad_token_id": pad,
        "cls_token_id": cls,
        "bos_token_id": cls,
        "sep_token_id": sep,
        "eos_token_id": sep,
        "model_type": "modernbert",
        "architectures": architectures,
        "vocab_size": vocab,
        "hidden_size": HIDDEN,
        "num_hidden_layers": 3,
        "num_attention_heads": 2,
        "intermediate_size": HIDDEN * 2,
        "max_position_embeddings": 96,
        "global_attn_every_n_layers": 3,
        "local_attention": 8,  # short, so the tests' inputs cross the sliding window
    }


def _modernbert_tokenizer(out: Path, tokenizer_dir: Path) -> int:
    return _bpe(
        out,
        tokenizer_dir,
        "[CLS] $A [SEP]",
        "[CLS] $A [SEP] $B [SEP]",
        ["[CLS]", "[SEP]", "[PAD]", "[MASK]"],
        "[PAD]",
    )


def _modernbert(out: Path, tokenizer_dir: Path) -> Path:
    from mlx_embeddings.models import modernbert

    config = _modernbert_config(out, _modernbert_tokenizer(out, tokenizer_dir), ["ModernBertModel"])
    return _save_model(modernbert, modernbert.ModelArgs.from_dict(config), config, out, 3)


def _qwen3(out: Path, tokenizer_dir: Path) -> Path:
    from mlx_embeddings.models import qwen3

    # Qwen3-Embedding appends <|endoftext|> to every input and pads on the left.
    vocab = _bpe(
        out, tokenizer_dir, "$A <|endoftext|>", "$A $B <|endoftext|>", [], "<|endoftext|>", "left"
    )
    config = {
        "model_type": "qwen3",
        "architectures": ["Qwen3ForCausalLM"],
        "vocab_size": vocab,
        "hidden_size": HIDDEN,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "head_dim": 16,
        "intermediate_size": HIDDEN * 2,
        "max_position_embeddings": 96,
        "rope_theta": 10000.0,
        "tie_word_embeddings": True,
    }
    return _save_model(qwen3, qwen3.ModelArgs.from_dict(config), config, out, 4)


def _gemma3(out: Path, tokenizer_dir: Path) -> Path:
    from mlx_embeddings.models import gemma3_text

    # EmbeddingGemma reads <bos> text <eos>: the default tokenizer's first two specials.
    vocab = _bpe(
        out,
        tokenizer_dir,
        "<|im_start|> $A <|im_end|>",
        "<|im_start|> $A $B <|im_end|>",
        [],
        "<|endoftext|>",
    )
    config = {
        "model_type": "gemma3_text",
        "architectures": ["Gemma3TextModel"],
        "vocab_size": vocab,
        "hidden_size": HIDDEN,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "head_dim": 16,
        "intermediate_size": HIDDEN * 2,
        "max_position_embeddings": 96,
        "sliding_window": 8,
        "sliding_window_pattern": 2,
        "rope_theta": 10000.0,
        "rope_local_base_freq": 10000.0,
        "query_pre_attn_scalar": 16,
        "rms_norm_eps": 1e-6,
    }
    return _save_model(gemma3_text, gemma3_text.ModelArgs.from_dict(config), config, out, 5)


def _llama_bidirec(out: Path, tokenizer_dir: Path) -> Path:
    from mlx_embeddings.models import llama_bidirec

    vocab = _bpe(out, tokenizer_dir, "<|im_start|> $A", "<|im_start|> $A $B", [], "<|endoftext|>")
    config = {
        "model_type": "llama_bidirec",
        "architectures": ["LlamaBidirectionalModel"],
        "vocab_size": vocab,
        "hidden_size": HIDDEN,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "intermediate_size": HIDDEN * 2,
        "max_position_embeddings": 96,
        "rope_theta": 10000.0,
    }
    return _save_model(llama_bidirec, llama_bidirec.ModelArgs.from_dict(config), config, out, 6)


def _modernbert_reranker(out: Path, tokenizer_dir: Path) -> Path:
    """A ModernBERT cross-encoder (gte-reranker-modernbert's shape: one label, CLS pooling,
    a sigmoid over its logit)."""
    from mlx_embeddings.models import modernbert

    vocab = _modernbert_tokenizer(out, tokenizer_dir)
    config = _modernbert_config(out, vocab, ["ModernBertForSequenceClassification"])
    config.update(classifier_pooling="cls", id2label={"0": "LABEL_0"}, label2id={"LABEL_0": 0})
    return _save_model(modernbert, modernbert.ModelArgs.from_dict(config), config, out, 7)


EMBEDDING_FAMILIES: dict[str, Callable[[Path, Path], Path]] = {
    "bert": _bert,
    "xlm_roberta": _xlm_roberta,
    "modernbert": _modernbert,
    "qwen3": _qwen3,
    "gemma3_text": _gemma3,
    "llama_bidirec": _llama_bidirec,
}
RERANK_FAMILIES: dict[str, Callable[[Path, Path], Path]] = {
    "modernbert": _modernbert_reranker,
}


def build_embedding_model(
    name: str, out: str | Path, tokenizer_dir: str | Path, *, rerank: bool = False
) -> Path:
    """Write the tiny model of family `name` (a reranker with `rerank`) into `out`."""
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    builders = RERANK_FAMILIES if rerank else EMBEDDING_FAMILIES
    return builders[name](folder, Path(tokenizer_dir))


def write_pooling(folder: Path, pooling: str, normalize: bool = True) -> None:
    """sentence-transformers' modules.json and Pooling config in `folder`: pool by `pooling`
    ("cls", "mean" or "lasttoken"), then normalise where `normalize`."""
    stages = [("", "Transformer"), ("1_Pooling", "Pooling")]
    if normalize:
        stages.append(("2_Normalize", "Normalize"))
    modules = [
        {"idx": i, "name": str(i), "path": path, "type": f"sentence_transformers.models.{kind}"}
        for i, (path, kind) in enumerate(stages)
    ]
    (folder / "modules.json").write_text(json.dumps(modules))
    (folder / "1_Pooling").mkdir(exist_ok=True)
    modes = ("cls_token", "mean_tokens", "max_tokens", "lasttoken")
    wanted = {"cls": "cls_token", "mean": "mean_tokens", "lasttoken": "lasttoken"}[pooling]
    config = {f"pooling_mode_{m}": m == wanted for m in modes}
    (folder / "1_Pooling" / "config.json").write_text(json.dumps(config))
