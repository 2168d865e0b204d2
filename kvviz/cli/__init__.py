"""`kvviz` console script (also `python -m kvviz`): the top floor.

Every subcommand lives here and no library module imports this one. The light commands
(`--help`, `models`, `plan`, `compare`) import neither torch nor matplotlib; a command that needs
one imports its module inside its run function (said there).

Every bad input ends with exit status 2 and one line `kvviz: error: ...`; Ctrl-C ends with the
line `kvviz: interrupted` and exit status 130, SIGTERM/SIGHUP with `kvviz: terminated` and
128 + N (kvviz.base.signals).
"""

from kvviz.cli.main import EXIT_BAD_INPUT, EXIT_INTERRUPTED, VERIFY_FLAGS, add_verify_parser, build_parser, main

__all__ = ["EXIT_BAD_INPUT", "EXIT_INTERRUPTED", "add_verify_parser", "build_parser", "VERIFY_FLAGS", "main"]
