"""SIGTERM and SIGHUP end kvviz the way Ctrl-C does.

By default those signals kill Python on the spot: no message, no `finally`, and `kvviz render`'s
temporary files stay behind. Within `handled()` (cli.main runs every command in it) each raises
`Terminated` in the main thread instead, a KeyboardInterrupt, so every cleanup that runs on
Ctrl-C runs; cli.main prints `kvviz: terminated` and exits 128 + the signal's number, as a shell
reports a command the signal killed.

A signal the process started with ignored (`nohup` ignores SIGHUP) stays ignored. SIGQUIT keeps
its default (quit at once, with a core dump where enabled): a later render sweeps the temporary
files such a run left (kvviz.views.report).

The `kvviz` console script and `python -m kvviz` (kvviz/__main__.py) enter `handled()` before they
import the command line's modules, so a signal in the first fraction of a second (the imports take
~0.2 s) ends the same way. `deferred()` holds SIGINT, SIGTERM and SIGHUP back for the few statements
that create a file and note it for cleanup: the signal lands just after, when the cleanup knows it.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading

SIGINT = signal.SIGINT  # Ctrl-C: what a KeyboardInterrupt with no `signum` stands for
EXIT_INTERRUPTED = 128 + SIGINT  # what a shell reports for a command ended by Ctrl-C (130)
HANDLED = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))
DEFERRED = HANDLED + (SIGINT,)  # what `deferred` holds back and `settle` gives back to the system


class Terminated(KeyboardInterrupt):
    """Raised by SIGTERM/SIGHUP inside `handled()`; `signum` is the signal's number."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum

    @property
    def exit_status(self) -> int:
        """The exit status a shell reports for this signal: 128 + its number."""
        return 128 + self.signum


# The signals that arrived within the outermost `handled()` block, in order: a library may turn the exception a
# signal raised into its own (numpy's import, interrupted, raises ImportError), and the CLI still reports the signal.
_RECEIVED: list[int] = []
_DEPTH = [0]


def _raise(signum, frame):
    _RECEIVED.append(signum)
    raise Terminated(signum)


def _interrupt(signum, frame):
    _RECEIVED.append(signum)
    raise KeyboardInterrupt


def _again(unraisable) -> None:
    """sys.unraisablehook within `handled()`: a signal whose exception was raised inside a callback Python ignores
    exceptions from (a weakref callback of the import system's locks, a __del__) would be printed as 'Exception
    ignored in: ...' and lost; it is sent again instead, to the main thread (so that a call blocking there wakes)
    a moment later from another thread, so that its handler runs outside the callback (sent from here, it would
    run inside this hook, ignored again)."""
    error = unraisable.exc_value
    if isinstance(error, KeyboardInterrupt):
        again = threading.Timer(
            0.001, signal.pthread_kill, (threading.main_thread().ident, getattr(error, "signum", SIGINT))
        )
        again.daemon = True
        again.start()
        return
    _HOOK[0](unraisable)


_HOOK = [sys.unraisablehook]  # the hook `_again` hands every other unraisable exception to


def received() -> int | None:
    """The first signal that arrived within the outermost `handled()` block now running (None: none did)."""
    return _RECEIVED[0] if _RECEIVED else None


def signalled(signum: int) -> tuple[str, int]:
    """(the line kvviz says, the exit status) for a command ended by signal `signum`."""
    if signum == signal.SIGINT:
        return "kvviz: interrupted", EXIT_INTERRUPTED
    return "kvviz: terminated", 128 + signum


@contextlib.contextmanager
def handled():
    """SIGTERM and SIGHUP raise Terminated within the block, SIGINT KeyboardInterrupt (as Python's own handler
    does), and each is noted (`received`); the previous handlers come back after. Outside the main thread (where
    Python cannot set handlers) nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    if _DEPTH[0] == 0:
        _RECEIVED.clear()
        _HOOK[0], sys.unraisablehook = sys.unraisablehook, _again
    _DEPTH[0] += 1
    previous = {}
    try:
        for sig, handler in [(s, _raise) for s in HANDLED] + [(signal.SIGINT, _interrupt)]:
            if signal.getsignal(sig) in (signal.SIG_IGN, None):
                continue
            previous[sig] = signal.signal(sig, handler)
        yield
    finally:
        _DEPTH[0] -= 1
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if _DEPTH[0] == 0:
            sys.unraisablehook = _HOOK[0]


def settle() -> None:
    """SIGINT, SIGTERM and SIGHUP back to the system's default action (end the process with the shell's
    status, silently): for the moments after a command has said its last line, as the process exits
    (kvviz/__main__.py). A signal ignored since start stays ignored; outside the main thread nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in DEFERRED:
        if signal.getsignal(sig) is not signal.SIG_IGN:
            signal.signal(sig, signal.SIG_DFL)


@contextlib.contextmanager
def deferred():
    """SIGINT, SIGTERM and SIGHUP held back within the block and raised again when it ends, to whatever handles
    them then: for a file created and noted for cleanup in one step, so that no signal lands between the two.
    (The handlers note the signal instead of acting; blocking it with pthread_sigmask would hold it back from
    this thread only, and another thread's C handler would still wake the main thread's Python handler.)
    Outside the main thread nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    arrived: list[int] = []
    previous = {}
    try:
        for sig in DEFERRED:
            if signal.getsignal(sig) not in (signal.SIG_IGN, None):  # None: a handler not set from Python
                previous[sig] = signal.signal(sig, lambda signum, frame: arrived.append(signum))
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        for signum in dict.fromkeys(arrived):  # each once, in the order they came
            signal.raise_signal(signum)
