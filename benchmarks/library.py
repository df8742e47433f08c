"""The library's figures: GGUF import time and peak memory (the default model, and a larger
Q4_K_M-style file written here), and the error each GGUF type's conversion adds.

Imports run in a child process each, so the peak resident memory (VmHWM on Linux,
`ru_maxrss` on macOS) is the import's own; `import_baseline_peak_mb` is the same child
importing the modules only.
Error figures compare the imported weights (dequantized by MLX with float32 scales) with
the `gguf` package's reference dequantization of the same random, well-formed blocks:
`*_max_err_steps` is the largest error in steps of the stored grid ((max-min)/(2**bits-1)
per group of 32), `*_rel_rms` the RMS error over the RMS of the weights.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from gguf import GGMLQuantizationType as T

REPO = Path(__file__).resolve().parents[1]
TYPES = (T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0)

_CHILD = """
import json, resource, sys, time
t0 = time.perf_counter()
from engine.library.gguf_import import import_gguf
import mlx.core, gguf.quants, tokenizers
ready = time.perf_counter()
if sys.argv[1] != "-":
    import_gguf(sys.argv[1], sys.argv[2])
done = time.perf_counter()
try:  # Linux: this process's own high-water mark (ru_maxrss keeps the parent's across exec)
    status = open("/proc/self/status").read()
    peak = int(status.split("VmHWM:")[1].split()[0]) * 1024
except (OSError, IndexError):
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # bytes on macOS
print(json.dumps({"seconds": done - ready, "peak_mb": peak / 1e6}))
"""


def _import_in_child(source: str, out: Path) -> dict[str, float]:
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, source, str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, float] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def write_large_fixture(path: Path, *, hidden: int = 2048, layers: int = 16, seed: int = 0) -> Path:
    """A llama GGUF laid out like llama.cpp's Q4_K_M: Q4_K for most weights, Q6_K for the
    embedding, the output and every ffn_down (random, well-formed blocks)."""
    import gguf

    from benchmarks.gguf_fixtures import llama_writer, random_quant_blocks

    rng = np.random.default_rng(seed)
    heads, kv, vocab = 16, 4, 32768
    ffn = -(-hidden * 11 // 4 // 256) * 256  # K-quant rows are whole 256-value blocks
    head_dim = hidden // heads
    writer = llama_writer(
        path, layers=layers, context=4096, hidden=hidden, ffn=ffn, heads=heads, kv=kv, vocab=vocab
    )
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_Q4_K_M)

    def add(name: str, rows: int, cols: int, qtype: T) -> None:
        writer.add_tensor(name, random_quant_blocks(qtype, rows, cols, rng), raw_dtype=qtype)

    add("token_embd.weight", vocab, hidden, T.Q6_K)
    add("output.weight", vocab, hidden, T.Q6_K)
    writer.add_tensor("output_norm.weight", np.ones(hidden, dtype=np.float32))
    for i in range(layers):
        p = f"blk.{i}."
        add(p + "attn_q.weight", hidden, hidden, T.Q4_K)
        add(p + "attn_k.weight", kv * head_dim, hidden, T.Q4_K)
        add(p + "attn_v.weight", kv * head_dim, hidden, T.Q4_K)
        add(p + "attn_output.weight", hidden, hidden, T.Q4_K)
        add(p + "ffn_gate.weight", ffn, hidden, T.Q4_K)
        add(p + "ffn_up.weight", ffn, hidden, T.Q4_K)
        add(p + "ffn_down.weight", hidden, ffn, T.Q6_K)
        for norm in ("attn_norm", "ffn_norm"):
            writer.add_tensor(p + norm + ".weight", np.ones(hidden, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def requantization_errors(rows: int = 256, cols: int = 4096, seed: int = 0) -> dict[str, Any]:
    """Per GGUF type: bits stored, method, max error in grid steps, relative RMS error."""
    import gguf
    import mlx.core as mx

    from benchmarks.gguf_fixtures import random_quant_blocks
    from engine.library.gguf_file import TensorInfo
    from engine.library.quants import convert_tensor

    rng = np.random.default_rng(seed)
    figures: dict[str, Any] = {}
    for qtype in TYPES:
        raw = random_quant_blocks(qtype, rows, cols, rng)
        info = TensorInfo("w", (rows, cols), int(qtype), 0, raw.nbytes)
        arrays, choice = convert_tensor(raw.reshape(-1), info, quantize=True)
        assert choice is not None
        got = np.array(
            mx.dequantize(
                arrays["weight"],
                arrays["scales"].astype(mx.float32),
                arrays["biases"].astype(mx.float32),
                group_size=choice.group_size,
                bits=choice.bits,
            )
        )
        ref = gguf.quants.dequantize(raw, qtype).astype(np.float32)
        groups = ref.reshape(-1, choice.group_size)
        step = (groups.max(1) - groups.min(1)) / (2**choice.bits - 1)
        err = np.abs(got.reshape(groups.shape) - groups).max(1)
        ok = step > 0
        name = qtype.name.lower()
        figures[f"requant_{name}_bits"] = choice.bits
        figures[f"requant_{name}_method"] = "repacked" if choice.repacked else "re-quantized"
        figures[f"requant_{name}_max_err_steps"] = round(float((err[ok] / step[ok]).max()), 4)
        rel = np.sqrt(((got - ref) ** 2).sum() / (ref**2).sum())
        figures[f"requant_{name}_rel_rms"] = float(f"{rel:.3g}")
    return figures


def run_library_bench(engine: Any = None, args: argparse.Namespace | None = None) -> dict[str, Any]:
    """All of the library's figures (the engine is not used: imports run in children)."""
    from engine.library.load import default_gguf_path

    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="corral-bench-library-") as tmp:
        folder = Path(tmp)
        baseline = _import_in_child("-", folder / "none")
        figures["import_baseline_peak_mb"] = round(baseline["peak_mb"], 1)
        default = default_gguf_path()
        result = _import_in_child(str(default), folder / "default")
        figures["import_default_file_mb"] = round(default.stat().st_size / 1e6, 1)
        figures["import_default_s"] = round(result["seconds"], 2)
        figures["import_default_peak_mb"] = round(result["peak_mb"], 1)
        started = time.perf_counter()
        large = write_large_fixture(folder / "large-Q4_K_M.gguf")
        figures["import_large_write_fixture_s"] = round(time.perf_counter() - started, 1)
        result = _import_in_child(str(large), folder / "large")
        figures["import_large_file_mb"] = round(large.stat().st_size / 1e6, 1)
        figures["import_large_s"] = round(result["seconds"], 2)
        figures["import_large_peak_mb"] = round(result["peak_mb"], 1)
        out_bytes = sum(p.stat().st_size for p in (folder / "large").glob("*.safetensors"))
        figures["import_large_output_mb"] = round(out_bytes / 1e6, 1)
        figures["import_large_mb_per_s"] = round(large.stat().st_size / 1e6 / result["seconds"], 1)
    figures.update(requantization_errors())
    return figures


if __name__ == "__main__":
    print(json.dumps(run_library_bench(), indent=2))
