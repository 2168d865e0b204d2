"""Files written whole or not at all: every output of kvviz (a report's figures and HTML, `--figure`,
`fit.png`) goes through `Staged` (or `write_file`, one file).

* Each file is written to a fresh temporary file in its folder (O_EXCL: never an existing file or a
  link) and renamed into place only once every file of the set is written: a run that fails half way
  (a full disk, a signal) leaves the previous files as they were and removes its temporary files.
* A writer's failure is one KvvizError line naming the file, whatever the writer raised about the
  disk (an OSError, or what matplotlib's PDF writer raises while it unwinds one: `writer_failure`).
* No signal lands between creating a temporary file and noting it for cleanup, nor in the middle of
  the renames (kvviz.base.signals.deferred): a SIGHUP at any moment leaves nothing behind.
* The renames of one set, and the removal of an earlier report's figures this one does not write,
  happen under an exclusive lock of each folder (flock): four renders into one folder at once each
  land whole, one after another, and the folder ends holding one of them, never a mix.

A run killed outright (SIGQUIT, SIGKILL) runs no cleanup; the next one into that folder removes what
it left (`sweep_stale`).
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
import zlib
from pathlib import Path
from typing import Callable

from kvviz.base import signals
from kvviz.base.errors import KvvizError, require
from kvviz.base.inputs import printable

try:
    import fcntl
except ImportError:  # no flock on this platform: commits are not serialised across processes
    fcntl = None  # type: ignore[assignment]

# Temporary names: `.kvviz-<pid>.<what>...`, so a later run can tell its own leftovers (a run
# killed by SIGQUIT or SIGKILL runs no cleanup) from another live run's files (sweep_stale).
_TMP_PREFIX = ".kvviz-"
_STALE = re.compile(r"\.kvviz-(\d+)\.")


def _tmp_prefix(what: str) -> str:
    return f"{_TMP_PREFIX}{os.getpid()}.{what}."


def writer_failure(error: BaseException) -> str | None:
    """Why a writer could not write, from what it raised: the OSError in its chain of causes (a full disk
    under matplotlib's PDF writer surfaces as the zlib.error or AttributeError of its clean-up, with the
    OSError as its context), or the zlib.error itself; None for anything else (a bug, shown as one)."""
    seen: set[int] = set()
    cause: BaseException | None = error
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, OSError):
            return cause.strerror or str(cause) or type(cause).__name__
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return f"zlib.error: {error}" if isinstance(error, zlib.error) else None


def prepare_out_dir(path, *, what: str = "out_dir") -> Path:
    """Create the output folder (parents too) and check it takes new files; a KvvizError naming
    `what` if that is impossible. Temporary files that dead kvviz runs left there are removed."""
    require(str(path) != "", f"{what} '': needs a folder name")
    p = Path(path)
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise KvvizError(f"{what} {printable(p)!r}: cannot create the folder ({e.strerror or e})") from None
    require(p.is_dir(), f"{what} {printable(p)!r}: is not a folder")
    try:  # a probe under a fresh name (O_EXCL): never opens an existing file or link
        with signals.deferred():  # created and removed with no signal in between
            fd, probe = tempfile.mkstemp(prefix=_tmp_prefix("write-test"), dir=p)
            os.close(fd)
            os.unlink(probe)
    except OSError as e:
        raise KvvizError(f"{what} {printable(p)!r}: cannot write there ({e.strerror or e})") from None
    sweep_stale(p)
    return p


def prepare_sub_dir(parent: Path, name: str, *, what: str = "out_dir") -> Path:
    """The folder `name` inside `parent`, created when missing; a symbolic link there is refused,
    so nothing is written outside `parent` through it."""
    p = Path(parent) / name
    require(not p.is_symlink(), f"{what}: {printable(p)!r} is a symbolic link; refusing to write through it")
    return prepare_out_dir(p, what=what)


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: alive, someone else's
        return True
    return True


def sweep_stale(folder: Path) -> list[Path]:
    """Remove the temporary files kvviz runs that are no longer alive left in `folder` (a run
    killed by SIGQUIT or SIGKILL); another live run's files are left alone. The paths removed."""
    removed = []
    with contextlib.suppress(OSError):
        for entry in os.scandir(folder):
            m = _STALE.match(entry.name)
            if m and not entry.is_dir(follow_symlinks=False) and not _alive(int(m.group(1))):
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)  # a link itself, never its target
                    removed.append(Path(entry.path))
    return removed


@contextlib.contextmanager
def _locked(folders):
    """An exclusive flock of each folder (in path order, so two runs never wait on each other crosswise),
    held for the block; a folder that cannot be opened is left unlocked (the renames then say why)."""
    fds = []
    try:
        for folder in sorted({str(f) for f in folders}):
            if fcntl is None:
                break
            try:
                fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
            except OSError:
                continue
            fds.append(fd)
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        for fd in fds:
            os.close(fd)  # closing the descriptor releases its lock


class Staged:
    """Files written under temporary names next to their final ones, renamed into place only by
    commit(), once every one of them is written: a render that fails half way (a full disk, an
    interrupt) leaves the previous report as it was. As a context manager: commit() when the block
    succeeds, discard() (remove every temporary file) when it raises, KeyboardInterrupt too."""

    def __init__(self, what: str = "out_dir"):
        self._pending: list[tuple[str, Path]] = []
        self._replaces: list[tuple[Path, re.Pattern, frozenset[str]]] = []
        self.what = what  # the argument or flag the refusals name

    def replaces(self, folder: Path, pattern: re.Pattern, keep) -> None:
        """When commit() lands this set, remove the files of `folder` whose names match `pattern` but are not
        in `keep` (an earlier report's figures this one does not write), if `folder` holds a report.html
        then: decided under the folder's lock, so a report that landed meanwhile is replaced whole too."""
        self._replaces.append((Path(folder), pattern, frozenset(keep)))

    def add(self, path: Path, data: bytes | str | Callable[[Path], None]) -> None:
        """Write `data` (bytes, text, or a function that writes a given path) to a fresh temporary
        file in `path`'s folder (O_EXCL: never an existing file or link)."""
        require(
            not path.is_symlink(), f"{self.what}: {printable(path)!r} is a symbolic link; refusing to write through it"
        )
        try:
            # Same suffix, so a writer that picks the format from the name (save_figure) still can.
            with signals.deferred():  # noted for discard() before any signal can land
                fd, tmp = tempfile.mkstemp(prefix=_tmp_prefix(path.name), suffix=f".tmp{path.suffix}", dir=path.parent)
                self._pending.append((tmp, path))
            os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600; a plain new file gets 0666 - umask
            with os.fdopen(fd, "wb") as f:
                if not callable(data):
                    f.write(data.encode("utf-8") if isinstance(data, str) else data)
            if callable(data):
                data(Path(tmp))
        except Exception as e:  # noqa: BLE001 (only a failure to write is turned into a line: writer_failure)
            why = writer_failure(e)
            if why is None:
                raise
            raise KvvizError(f"{self.what}: cannot write {printable(path)!r} ({why})") from None

    def commit(self) -> list[Path]:
        """Rename every temporary file into place (os.replace: a link at the final name is replaced
        itself, never followed), then remove what `replaces` named, all under the folders' locks and with
        signals held back until the set has landed; the final paths, in the order added."""
        for _, path in self._pending:  # checked again: a link planted while the files were written
            require(
                not path.is_symlink(),
                f"{self.what}: {printable(path)!r} is a symbolic link; refusing to write through it",
            )
        done: list[Path] = []
        folders = [path.parent for _, path in self._pending] + [f for f, _, _ in self._replaces]
        with signals.deferred(), _locked(folders):
            stale = [
                Path(entry.path)
                for folder, pattern, keep in self._replaces
                if (folder / "report.html").is_file()  # a report's folder: its figures are kvviz's to replace
                for entry in _entries(folder)
                if pattern.fullmatch(entry.name) and entry.name not in keep and not entry.is_dir(follow_symlinks=False)
            ]
            try:
                while self._pending:
                    tmp, path = self._pending[0]
                    os.replace(tmp, path)
                    self._pending.pop(0)
                    done.append(path)
            except OSError as e:
                raise KvvizError(f"{self.what}: cannot write {printable(path)!r} ({e.strerror or e})") from None
            for old in stale:
                with contextlib.suppress(OSError):
                    os.unlink(old)  # a link itself, never its target
        self._replaces.clear()
        return done

    def discard(self) -> None:
        """Remove every temporary file written so far; nothing is renamed into place."""
        for tmp, _ in self._pending:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        self._pending.clear()

    def __enter__(self) -> "Staged":
        return self

    def __exit__(self, kind, value, tb) -> None:
        try:
            if kind is None:
                self.commit()
        finally:
            self.discard()  # what commit() did not rename: a failure, an interrupt


def _entries(folder: Path) -> list[os.DirEntry]:
    try:
        return list(os.scandir(folder))
    except OSError:
        return []


def write_file(path: Path, data: bytes | str | Callable[[Path], None], *, what: str = "out_dir") -> None:
    """Write `data` (bytes, text, or a function that writes a given path) to `path` through a
    temporary file in the same folder renamed into place: never follows a link, and never leaves
    a half-written file under the final name. Refusals name `what` (the argument or flag)."""
    with Staged(what) as staged:
        staged.add(path, data)


def _umask() -> int:
    mask = os.umask(0o022)  # reading the umask means setting it; put it straight back
    os.umask(mask)
    return mask
