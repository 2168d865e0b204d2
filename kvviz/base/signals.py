"""SIGTERM and SIGHUP end kvviz the way Ctrl-C does.

By default those signals kill Python on the spot: no message, no `finally`, and `kvviz render`'s
temporary files stay behind. Within `handled()` (cli.main runs every command in it) each raises
`Terminated` in the main thread instead, a KeyboardInterrupt, so every cleanup that runs on
Ctrl-C runs; cli.main prints `kvviz: terminated` and exits 128 + the signal's number, as a shell
reports a command the signal killed.

A signal the process started with ignored (`nohup` ignores SIGHUP) stays ignored. SIGQUIT keeps
its default (quit at once, with a core dump where enabled): a later render sweeps the temporary
files such a run left (kvviz.views.report).
"""

from __future__ import annotations

import contextlib
import signal
import threading

HANDLED = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))


class Terminated(KeyboardInterrupt):
    """Raised by SIGTERM/SIGHUP inside `handled()`; `signum` is the signal's number."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum

    @property
    def exit_status(self) -> int:
        """The exit status a shell reports for this signal: 128 + its number."""
        return 128 + self.signum


def _raise(signum, frame):
    raise Terminated(signum)


@contextlib.contextmanager
def handled():
    """SIGTERM and SIGHUP raise Terminated within the block; the previous handlers come back after.
    Outside the main thread (where Python cannot set handlers) nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {}
    for sig in HANDLED:
        if signal.getsignal(sig) is signal.SIG_IGN:
            continue
        previous[sig] = signal.signal(sig, _raise)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
