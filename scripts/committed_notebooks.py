"""Copy the notebooks as git holds them into a folder, for `make test` to check and run.

`make lab` lets JupyterLab autosave outputs and metadata into the working copies; those never
reach a commit (the nbstripout filter strips them on `git add`), so `make test` checks what git
holds instead: each notebooks/*.ipynb as the index has it (what is committed, or staged to be),
byte for byte, unfiltered. A committed notebook with outputs is copied with them, so
`nbstripout --verify` on the copies still fails. Outside a git checkout (an unpacked sdist)
nothing is committed: the working copies are copied as they are.

usage: python scripts/committed_notebooks.py DEST   (DEST is emptied of *.ipynb first)
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _git(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(ROOT), *argv], capture_output=True, timeout=60)


def main(dest: str) -> int:
    out = Path(dest)
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.ipynb"):
        old.unlink()
    inside = shutil.which("git") is not None and _git("rev-parse", "--is-inside-work-tree").returncode == 0
    if inside:
        listed = _git("ls-files", "-z", "--", "notebooks/*.ipynb")
        names = [n for n in listed.stdout.decode().split("\0") if n]
        for name in names:
            blob = _git("show", f":{name}")  # the index's blob, no filter applied
            if blob.returncode != 0:
                print(f"committed_notebooks: git show :{name} failed: {blob.stderr.decode().strip()}", file=sys.stderr)
                return 1
            (out / Path(name).name).write_bytes(blob.stdout)
        source = "the git index"
    else:
        names = sorted((ROOT / "notebooks").glob("*.ipynb"))
        for path in names:
            shutil.copyfile(path, out / path.name)
        source = "the working copies (not a git checkout)"
    if not names:
        print("committed_notebooks: no notebooks/*.ipynb found", file=sys.stderr)
        return 1
    print(f"notebooks: {len(names)} from {source} -> {out}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__.strip().splitlines()[-1])
    sys.exit(main(sys.argv[1]))
