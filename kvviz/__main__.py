"""`python -m kvviz` and the `kvviz` console script (pyproject.toml: `kvviz = "kvviz.__main__:run"`).

The signal handlers come first, before the command line's modules are imported (~0.2 s of imports): a
Ctrl-C, SIGTERM or SIGHUP from then on ends with one line and the shell's status, as within a command
(kvviz.base.signals), and once the command is done, with the status alone (`signals.settle`). Before
that, only the interpreter's own start-up is left (Python's SIGINT handler is in place from then).

A command does no linear algebra, but numpy (which a config's first sight imports through transformers, and
`render` through matplotlib) starts one OpenBLAS thread a core when it is imported, ~0.2 s of a first sight's
1 s here: the command's process asks OpenBLAS for one thread (OPENBLAS_NUM_THREADS=1) unless the user set it.
"""

import os
import sys

from kvviz.base import signals


def run(argv: list[str] | None = None) -> int:
    """`kvviz` on `argv` (None: sys.argv): kvviz.cli.main.main, imported inside `signals.handled()` so that a
    signal during the imports ends as one during the command does (`kvviz: interrupted` 130, `kvviz:
    terminated` 128 + N). The process's entry point: once the command is done the signals are the system's
    again (`signals.settle`), for the moments the interpreter takes to exit; in Python, call kvviz.cli.main."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # read once, when numpy loads OpenBLAS (module docstring)
    try:
        with signals.handled():
            from kvviz.cli.main import main

            status = main(argv)
    except BaseException as e:
        signum = getattr(e, "signum", signals.SIGINT) if isinstance(e, KeyboardInterrupt) else signals.received()
        if signum is None or isinstance(e, SystemExit):
            raise
        signals.settle()  # a library may have turned the signal into its own error during the imports
        line, status = signals.signalled(signum)
        print(line, file=sys.stderr)
        return status
    signals.settle()
    return status


if __name__ == "__main__":
    sys.exit(run())
