"""`make lab`'s save hook: JupyterLab saves each notebook as git holds it, so that saving an executed notebook
leaves `git status` clean (``python -m kvviz.tools.notebook_save --extra-keys`` prints the metadata keys stripped
beyond nbstripout's own, for the Makefile's git filter).

Why a hook and not only git's clean filter (the Makefile installs that too, for notebooks written by other
editors): `git status` takes a tracked file whose size differs from the one it recorded for modified without
running the filter (git's read-cache.c `ie_modified`: a changed size is trusted as changed data), so outputs saved
into a notebook show it as modified until `git add` although the filtered content is unchanged. Saved through this
hook the file itself is what git holds: no outputs, execution counts or run metadata, cell ids numbered as
nbstripout numbers them, and the kernel's language_info (with its Python version) reduced to the committed
{"name": "python"}. Run the cells again after reopening a notebook to see their outputs.
"""

from __future__ import annotations

import sys

# Metadata nbstripout keeps by default but JupyterLab writes at every save from the running kernel.
EXTRA_KEYS = (
    "metadata.language_info.codemirror_mode",
    "metadata.language_info.file_extension",
    "metadata.language_info.mimetype",
    "metadata.language_info.nbconvert_exporter",
    "metadata.language_info.pygments_lexer",
    "metadata.language_info.version",
)
# nbstripout's own list (its command line strips these; its strip_output function only what it is given).
NBSTRIPOUT_KEYS = (
    "metadata.signature",
    "metadata.widgets",
    "cell.metadata.collapsed",
    "cell.metadata.ExecuteTime",
    "cell.metadata.execution",
    "cell.metadata.heading_collapsed",
    "cell.metadata.hidden",
    "cell.metadata.scrolled",
)


def strip_on_save(model: dict, path: str, contents_manager=None, **kwargs) -> None:
    """jupyter_server's pre-save hook (`--ContentsManager.pre_save_hook=kvviz.tools.notebook_save.strip_on_save`):
    a notebook's content replaced by nbstripout's strip of it, as the git filter would leave it."""
    if model.get("type") != "notebook":
        return
    import nbformat
    from nbstripout import strip_output

    nb = nbformat.from_dict(model["content"])
    model["content"] = strip_output(
        nb, keep_output=False, keep_count=False, keep_id=False, extra_keys=list(NBSTRIPOUT_KEYS + EXTRA_KEYS)
    )


def main(argv: list[str]) -> int:
    """`--extra-keys`: print EXTRA_KEYS on one line (the Makefile's filter.nbstripout.extrakeys)."""
    if argv != ["--extra-keys"]:
        print("usage: python -m kvviz.tools.notebook_save --extra-keys", file=sys.stderr)
        return 2
    print(" ".join(EXTRA_KEYS))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
