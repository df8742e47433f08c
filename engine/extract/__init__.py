"""Extraction: a schema over a pile of documents, a table out.

`document` reads a file into pages (PDF through `pdf`, Word through `office`, HTML through
`html_text`, text and images), within limits, refusing hostile files one by one; `windows`
cuts a long document into page windows that fit the context; `store` keeps jobs and their
rows in SQLite as they finish; `prompt` builds each row's request (the shared instructions
first); `feeder` keeps a batch of requests in flight on the engine; `runner` runs a job;
`export` writes its rows as JSONL, CSV or XLSX; `cli` is `python -m engine extract`.
Above the Engine, below the front ends; no MLX here.
"""
