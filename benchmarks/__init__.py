"""Every benchmark of Corral, kept out of the runtime package and out of the packaged app.

`python -m benchmarks` (or `python -m engine bench`) prints the engine's figures;
`python benchmarks/gui_bench.py` the window's. `tiny_model` builds the tiny random model the
tests and the stress benchmarks share.
"""
