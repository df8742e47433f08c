"""The models people already have: GGUF import of more quantizations and architectures,
discovery of models in other apps' stores, and downloads from Hugging Face.

Modules: `gguf_file` (the one GGUF header reader: every field checked against the file;
tensors as views of a memory map), `quants` (one tensor to MLX's format), `architectures`
(GGUF names and metadata onto mlx-lm's model classes), `convert` (a whole file, tensor by
tensor), `discovery` (the library), `downloads` (Hugging Face repos), `paths` (what Corral
may write and delete), `budget` (the memory a model may use, without MLX), `cli`
(`python -m engine models | download`).
"""
