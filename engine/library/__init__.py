"""Models: loading them, and the models people already have.

Modules: `load` (a spec, "default", a folder, a .gguf file or a repo id, to a LoadedModel
on the engine thread), `defaults` (each model's recommended sampling), `gguf_import` (a
GGUF file to a cached MLX folder, once), `import_cache` (that cache's folders and locks),
`gguf_tokenizer` (the tokenizer in a GGUF's metadata), `gguf_file` (the one GGUF header
reader: every field checked against the file; tensors as views of a memory map), `quants`
(one tensor to MLX's format), `architectures` (GGUF names and metadata onto mlx-lm's model
classes), `convert` (a whole file, tensor by tensor), `discovery` (the library),
`downloads` (Hugging Face repos), `paths` (what Corral may write and delete), `cli`
(`python -m engine models | download`).
"""
