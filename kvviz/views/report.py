"""A layout's figures as PNG + SVG files and one self-contained `report.html` (`kvviz render`).

The HTML holds everything it shows: the figures as base64 PNGs, the group and layout tables,
the text byte map and the stride derivation. It links to nothing outside itself.

Writing never follows a symbolic link: each file is written to a fresh temporary file inside the
output folder, an output name (or a pool's folder) that is a link is refused, and the files are
renamed into place only once all of them are written: a run that fails or is interrupted half
way leaves the previous report as it was and removes its temporary files. A run killed outright
(SIGQUIT, SIGKILL) cannot; the next render into that folder removes what it left (sweep_stale).
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from pathlib import Path
from typing import Callable

from kvviz.base.errors import KvvizError, require
from kvviz.base.inputs import DPI_RANGE, checked, instance, optional, printable, short_repr
from kvviz.core.accept import plan_of, pools_of
from kvviz.core.layout import Layout, Placement
from kvviz.views.anatomy import page_anatomy
from kvviz.views.args import FLAG, RESOLUTION, TITLE
from kvviz.views.blockmap import block_map
from kvviz.views.compare import before_after
from kvviz.views.planes import pool_planes
from kvviz.views.planes_data import PLANE_PAGES_MAX_BLOCKS
from kvviz.views.query import DEFAULT_DPI, save_figure, to_png_bytes
from kvviz.views.report_html import RenderedFigure, report_html

# Blocks of the small pool a hybrid report's layer-plane figure shows: every block's page is drawn.
POOL_PLANES_BLOCKS = PLANE_PAGES_MAX_BLOCKS


# Temporary names: `.kvviz-<pid>.<what>...`, so a later run can tell its own leftovers (a run
# killed by SIGQUIT or SIGKILL runs no cleanup) from another live run's files (sweep_stale).
_TMP_PREFIX = ".kvviz-"
_STALE = re.compile(r"\.kvviz-(\d+)\.")


def _tmp_prefix(what: str) -> str:
    return f"{_TMP_PREFIX}{os.getpid()}.{what}."


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


class Staged:
    """Files written under temporary names next to their final ones, renamed into place only by
    commit(), once every one of them is written: a render that fails half way (a full disk, an
    interrupt) leaves the previous report as it was. As a context manager: commit() when the block
    succeeds, discard() (remove every temporary file) when it raises, KeyboardInterrupt too."""

    def __init__(self, what: str = "out_dir"):
        self._pending: list[tuple[str, Path]] = []
        self._retired: list[Path] = []
        self.what = what  # the argument or flag the refusals name

    def retire(self, path: Path) -> None:
        """Remove `path` (a file of an earlier report this one does not write) once commit() has
        renamed every new file into place; a failed run leaves it with the report it belongs to."""
        self._retired.append(path)

    def add(self, path: Path, data: bytes | str | Callable[[Path], None]) -> None:
        """Write `data` (bytes, text, or a function that writes a given path) to a fresh temporary
        file in `path`'s folder (O_EXCL: never an existing file or link)."""
        require(
            not path.is_symlink(), f"{self.what}: {printable(path)!r} is a symbolic link; refusing to write through it"
        )
        tmp = None
        try:
            # Same suffix, so a writer that picks the format from the name (save_figure) still can.
            fd, tmp = tempfile.mkstemp(prefix=_tmp_prefix(path.name), suffix=f".tmp{path.suffix}", dir=path.parent)
            self._pending.append((tmp, path))
            os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600; a plain new file gets 0666 - umask
            with os.fdopen(fd, "wb") as f:
                if not callable(data):
                    f.write(data.encode("utf-8") if isinstance(data, str) else data)
            if callable(data):
                data(Path(tmp))
        except OSError as e:
            raise KvvizError(f"{self.what}: cannot write {printable(path)!r} ({e.strerror or e})") from None

    def commit(self) -> list[Path]:
        """Rename every temporary file into place (os.replace: a link at the final name is replaced
        itself, never followed); the final paths, in the order added."""
        for _, path in self._pending:  # checked again: a link planted while the files were written
            require(
                not path.is_symlink(),
                f"{self.what}: {printable(path)!r} is a symbolic link; refusing to write through it",
            )
        done = []
        try:
            while self._pending:
                tmp, path = self._pending[0]
                os.replace(tmp, path)
                self._pending.pop(0)
                done.append(path)
        except OSError as e:
            raise KvvizError(f"{self.what}: cannot write {printable(path)!r} ({e.strerror or e})") from None
        for path in self._retired:
            if path not in done:
                with contextlib.suppress(OSError):
                    os.unlink(path)  # a link itself, never its target
        self._retired.clear()
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


def report_figures(layout: Layout, *, before: Layout | None = None, after: Layout | None = None):
    """(name, caption, build) for each figure of a report, in report order; build() returns the Figure."""
    yield (
        "block-map",
        f"Block map: {layout.planner} layout, block stride {layout.block_stride:,} B, "
        f"binding group {layout.binding_label}.",
        lambda: block_map(layout),
    )
    # One page size: vLLM resolves its default layer-outermost arrangement (validate_kv_cache_layout;
    # docs/hybrid.md#hybrid-planners); mixed pages (DeepSeek V4) pack block-outermost.
    if len({p.page_bytes for p in layout.placements}) == 1:
        n = POOL_PLANES_BLOCKS
        yield (
            "pool-planes",
            f"The pool as layer planes x blocks (layer-outermost, vLLM's default), {n} blocks: "
            f"layer stride = {n} x page, block stride = page; every tensor starts at byte 0 of the pool.",
            lambda: pool_planes(layout, n),
        )
    if before is not None and after is not None:
        pct = 100.0 * (after.block_stride - before.block_stride) / before.block_stride
        yield (
            "before-after",
            f"Before ({before.planner}) and after ({after.planner}): block stride "
            f"{before.block_stride:,} B -> {after.block_stride:,} B ({pct:+.2f}%).",
            lambda: before_after(before, after),
        )
    # One anatomy per row format, of its largest page (first seen on ties); pages known only by
    # their size have no anatomy.
    largest: dict[str, Placement] = {}
    for p in layout.placements:
        fmt = p.cache.row_format.name
        if fmt != "opaque" and (fmt not in largest or p.page_bytes > largest[fmt].page_bytes):
            largest[fmt] = p
    for fmt, p in largest.items():
        yield (
            f"anatomy-{fmt}",
            f"Page anatomy of {p.name} ({p.cache.kind.label}, {fmt}).",
            lambda c=p.cache: page_anatomy(c),
        )


@checked(title=TITLE, dpi=RESOLUTION, svg=FLAG, staged=optional(instance(Staged, what="a Staged")))
def render_report(
    out_dir,
    folder=None,
    *,
    layout: Layout | None = None,
    before: Layout | None = None,
    after: Layout | None = None,
    title: str | None = None,
    dpi: int = DEFAULT_DPI,
    svg: bool = True,
    staged: Staged | None = None,
) -> list[Path]:
    """Write every figure as <name>.png (and <name>.svg) plus report.html; return the paths written
    (report.html last). Every file is written under a temporary name first and renamed into place
    only when all are written, so a failure leaves the previous report whole. With `staged` given,
    the files are only added to it: they take their names when the caller commits it (several
    reports at once, `kvviz render` of separate pools).

    Called `render_report(plan, folder)` (a Plan or Layout, then the folder; before/after may be Plans of
    one pool): the title says what was planned, and a separate-pools plan writes one report per pool in
    folder/pool-<name>/, as `kvviz render` does (`plan_reports`). Or `render_report(folder, layout=...)`."""
    if layout is None:
        return plan_reports(out_dir, folder, before=before, after=after, title=title, dpi=dpi, svg=svg, staged=staged)
    require(folder is None, "folder: give the folder once (render_report(folder, layout=...) or (plan, folder))")
    require(isinstance(layout, Layout), f"layout: expected a kvviz Layout, got {type(layout).__name__}")
    title = f"{layout.planner} layout" if title is None else title
    require((before is None) == (after is None), "before/after: give both layouts or neither")
    require(
        isinstance(out_dir, (str, os.PathLike)),
        f"out_dir={short_repr(out_dir)}: give a folder (a str or pathlib.Path)",
    )
    require(isinstance(title, str), f"title={short_repr(title)}: must be a string (the report's heading)")
    low, high = DPI_RANGE
    require(type(dpi) is int and low <= dpi <= high, f"dpi={dpi!r}: must be an integer from {low} to {high}")
    out = prepare_out_dir(out_dir)
    figures = list(report_figures(layout, before=before, after=after))
    names = [f"{n}.{ext}" for n, _, _ in figures for ext in ("png", "svg")[: 1 + svg]] + ["report.html"]
    for name in names:  # refuse a link before writing anything
        require(
            not (out / name).is_symlink(),
            f"out_dir: {printable(out / name)!r} is a symbolic link; refusing to write through it",
        )
    if staged is None:
        with Staged() as own:
            return render_report(
                out, layout=layout, before=before, after=after, title=title, dpi=dpi, svg=svg, staged=own
            )
    _retire_old_figures(out, names, staged)
    rendered = []
    for name, caption, build in figures:
        fig = build()
        png = to_png_bytes(fig, dpi=dpi)
        staged.add(out / f"{name}.png", png)
        if svg:
            staged.add(out / f"{name}.svg", lambda tmp, fig=fig: save_figure(fig, tmp, dpi=dpi))
        rendered.append(RenderedFigure(name, caption, png))
    staged.add(out / "report.html", report_html(layout, rendered, title=title, before=before, after=after))
    return [out / name for name in names]


def _one_pool(value, name: str) -> Layout | None:
    if value is None:
        return None
    pools = pools_of(value, name)
    require(len(pools) == 1, f"{name}: a before/after compares one pool with one; this plan has {len(pools)}")
    return pools[0]


def plan_reports(source, folder, *, before=None, after=None, title=None, staged=None, **options) -> list[Path]:
    """`render_report(plan, folder)`: one report of a Plan or Layout (kvviz.core.accept.pools_of), titled with
    the model and what was planned (`Plan.setting`); a separate-pools plan: one report per pool, each in
    folder/pool-<name>/, all renamed into place together."""
    pools, plan = pools_of(source, "plan"), plan_of(source)
    if title is None:
        title = f"{pools[0].planner} layout" if plan is None else f"{plan.model}: {plan.planner} layout"
        title += f" ({plan.setting})" if plan is not None and plan.setting else ""
    pair = {"before": _one_pool(before, "before"), "after": _one_pool(after, "after")}
    if len(pools) == 1:
        return render_report(folder, layout=pools[0], title=title, staged=staged, **pair, **options)
    require(before is None and after is None, "before/after: a separate-pools plan's report has no before/after")
    if staged is None:
        with Staged() as own:
            return plan_reports(source, folder, title=title, staged=own, **options)
    out, paths = prepare_out_dir(folder), []
    for pool in pools:
        name = pool.groups[0].name
        sub = prepare_sub_dir(out, f"pool-{name}")
        paths += render_report(sub, layout=pool, title=f"{title}: pool {name}", staged=staged, **options)
    return paths


# The figure files a report writes (report_figures' names): a report folder's other ones belong to
# an earlier report (another model's anatomy formats, its before/after) and go when this one lands.
REPORT_FIGURE = re.compile(r"(block-map|pool-planes|before-after|anatomy-[A-Za-z0-9_.+-]+)\.(png|svg)")


def _retire_old_figures(out: Path, names: list[str], staged: Staged) -> None:
    if not (out / "report.html").is_file():
        return  # not a report's folder: nothing there is kvviz's to remove
    with contextlib.suppress(OSError):
        for entry in os.scandir(out):
            if REPORT_FIGURE.fullmatch(entry.name) and entry.name not in names:
                if not entry.is_dir(follow_symlinks=False):
                    staged.retire(out / entry.name)
