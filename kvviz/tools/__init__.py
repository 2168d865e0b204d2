"""Command-line tools that run beside the library, not part of it (``python -m kvviz.tools.NAME``).

Each tool is a thin program over the library's public names: it parses arguments, prints, and
exits with a status. Nothing in kvviz imports kvviz.tools, so the library never pulls a tool's
argument parsing or its test inputs in. They live inside the package (not in scripts/) so that
tests and benchmarks import them by name, an installed kvviz ships them, and a bare checkout
runs them with only the checkout on PYTHONPATH (scripts/gpu_check.sh).

* `quant_parity`: every kvviz.quant codec on the CPU and on another device, byte for byte.
"""
