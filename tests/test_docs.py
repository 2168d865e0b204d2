"""Every citation of a docs page points at a section that exists, and the docs pages are used.

Code, tests, scripts, notebooks and README.md cite the rules as ``docs/<page>.md#<anchor>``
(notebooks as ``../docs/<page>.md#<anchor>``); pages inside docs/ link to each other as
``<page>.md#<anchor>`` and to their own sections as ``(#<anchor>)``. An anchor is valid when it
is the GitHub anchor of one of the page's headings (lowercase, punctuation other than '-' and
'_' dropped, spaces to '-', a repeated heading gets '-1', '-2', ...).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
SKIP_DIRS = {
    ".git",
    ".venv",
    "venv",
    "build",
    "dist",
    "node_modules",
    "__pycache__",
    ".ipynb_checkpoints",
    ".pytest_cache",
    ".hypothesis",
}
TEXT_SUFFIXES = {".py", ".md", ".ipynb", ".toml", ".yml", ".yaml", ".cfg", ".txt", ".sh", ".json", ".html"}
TEXT_NAMES = {"Makefile"}
# The project's old citation target, outside the repository (spelt in two parts so that this
# file does not cite it).
OLD_TARGET = "REFERENCE" + ".md"

# The targets the code base was told to cite (one rule, one home: the other helpers cite these).
REQUIRED_ANCHORS = {
    "overlay": ["the-overlay-in-one-paragraph", "models"],
    "caches": ["the-caches-a-layer-registers", "backend-alignment"],
    "row-formats": ["row-formats", "fp8_ds_mla", "mxfp4-indexer-row", "fp8-indexer-row", "page-anatomy"],
    "grouping": ["vllm-grouping"],
    "planners": ["bucketed", "overlay", "overlay-by-spec"],
    "published-numbers": ["the-published-table", "budget-rounding", "admission-estimate"],
    "hazards": ["shared-block", "zeroer", "misread"],
}

# docs/<page>.md#<anchor>, also as ../docs/... from notebooks/.
DOCS_CITATION = re.compile(r"(?<![\w.-])(?:\.\./)?docs/([\w-]+)\.md#([\w-]+)")
# Inside docs/: <page>.md#<anchor> (not preceded by a path) and (#anchor) on the same page.
RELATIVE_CITATION = re.compile(r"(?<![\w/.-])([\w-]+)\.md#([\w-]+)")
SAME_PAGE_LINK = re.compile(r"\]\(#([\w-]+)\)")
HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t#]*$")
FENCE = re.compile(r"^[ \t]*(```|~~~)")


def github_anchor(heading: str) -> str:
    """GitHub's anchor for a heading text: lowercase, drop everything but word characters,
    spaces and '-', then spaces to '-'."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def heading_anchors(markdown: str) -> list[str]:
    """Anchors of all headings outside fenced code, with GitHub's -1, -2 suffixes for repeats."""
    anchors, seen, in_fence = [], defaultdict(int), False
    for line in markdown.splitlines():
        if FENCE.match(line):
            in_fence = not in_fence
            continue
        m = None if in_fence else HEADING.match(line)
        if m:
            base = github_anchor(m.group(2))
            n = seen[base]
            seen[base] += 1
            anchors.append(base if n == 0 else f"{base}-{n}")
    return anchors


def _tracked_files() -> list[Path]:
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, timeout=60)
        files = [ROOT / p for p in out.stdout.decode().split("\0") if p]
        if files:
            # Pages written in this checkout but not yet committed count too.
            files += [p for p in DOCS.glob("*.md") if p not in files]
            return [p for p in files if p.is_file()]
    except (OSError, subprocess.SubprocessError):
        pass
    found = []
    for dirpath, dirnames, filenames in os.walk(ROOT):
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS and not d.endswith(".egg-info")]
        found += [Path(dirpath) / f for f in filenames]
    return found


def _is_text(path: Path) -> bool:
    return path.suffix in TEXT_SUFFIXES or path.name in TEXT_NAMES


def _text_of(path: Path) -> str:
    """A file's text; for a notebook, the sources of its cells."""
    text = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix == ".ipynb":
        cells = json.loads(text).get("cells", [])
        return "\n".join(
            "".join(c.get("source", [])) if isinstance(c.get("source"), list) else c.get("source", "") for c in cells
        )
    return text


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _cites_docs(rel: str) -> bool:
    """The files whose docs citations are checked."""
    top = rel.split("/", 1)[0]
    if rel == "README.md" or (rel.startswith("docs/") and rel.endswith(".md")):
        return True
    if top in ("kvviz", "tests", "benchmarks", "scripts"):
        return rel.endswith(".py") or rel.endswith(".sh")
    return top == "notebooks" and rel.endswith(".ipynb")


TRACKED = sorted({p for p in _tracked_files() if _is_text(p)})


def _citations() -> list[tuple[str, str, str]]:
    """(citing file, page stem, anchor) for every docs citation in the repository."""
    out = []
    for path in TRACKED:
        rel = _rel(path)
        if not _cites_docs(rel):
            continue
        text = _text_of(path)
        out += [(rel, page, anchor) for page, anchor in DOCS_CITATION.findall(text)]
        if rel.startswith("docs/"):
            without_docs_paths = DOCS_CITATION.sub("", text)
            out += [(rel, page, anchor) for page, anchor in RELATIVE_CITATION.findall(without_docs_paths)]
            out += [(rel, path.stem, anchor) for anchor in SAME_PAGE_LINK.findall(text)]
    return out


CITATIONS = _citations()
PAGES = sorted(p.stem for p in DOCS.glob("*.md") if p.name != "README.md")


# ---- the anchor rule itself, against anchors GitHub gives these headings --------------------------
@pytest.mark.parametrize(
    "heading,anchor",
    [
        ("The overlay in one paragraph", "the-overlay-in-one-paragraph"),
        ("`fp8_ds_mla`", "fp8_ds_mla"),
        ("fp8_ds_mla", "fp8_ds_mla"),
        ("Padding before #48993", "padding-before-48993"),
        ("vLLM grouping", "vllm-grouping"),
        ("Overlay by spec", "overlay-by-spec"),
        ("What's new: A, B (and C)", "whats-new-a-b-and-c"),
    ],
)
def test_github_anchor(heading, anchor):
    assert github_anchor(heading) == anchor


def test_heading_anchors_number_repeats_and_skip_code():
    md = "# Title\n## Rows\n```\n# not a heading\n```\n## Rows\n### Rows\ntext # no\n"
    assert heading_anchors(md) == ["title", "rows", "rows-1", "rows-2"]


# ---- the pages -------------------------------------------------------------------------------
def test_docs_index_lists_every_page():
    index = (DOCS / "README.md").read_text()
    missing = [p for p in PAGES if f"({p}.md" not in index]
    assert not missing, f"docs/README.md does not list: {missing}"


@pytest.mark.parametrize("page", sorted(REQUIRED_ANCHORS))
def test_required_targets_exist(page):
    path = DOCS / f"{page}.md"
    assert path.is_file(), f"docs/{page}.md is missing"
    anchors = heading_anchors(path.read_text())
    missing = [a for a in REQUIRED_ANCHORS[page] if a not in anchors]
    assert not missing, f"docs/{page}.md has no section for {missing}; its anchors: {anchors}"


def test_every_page_starts_with_a_title_and_a_paragraph():
    """The pages of REQUIRED_ANCHORS open with a title, then a paragraph saying what they cover."""
    for page in REQUIRED_ANCHORS:
        lines = (DOCS / f"{page}.md").read_text().splitlines()
        assert lines[0].startswith("# "), f"docs/{page}.md: first line is not a title"
        first = next(line for line in lines[1:] if line.strip())
        assert not first.startswith(("#", "|", "*", "-", "1.")), f"docs/{page}.md: no opening paragraph"


# ---- citations -------------------------------------------------------------------------------
def test_citations_were_found():
    """The scan itself works: the notebooks cite the docs."""
    assert any(rel.startswith("notebooks/") for rel, _, _ in CITATIONS)


def test_every_citation_points_at_an_existing_section():
    anchors = {p.stem: set(heading_anchors(p.read_text())) for p in DOCS.glob("*.md")}
    broken = []
    for rel, page, anchor in CITATIONS:
        if page not in anchors:
            broken.append(f"{rel}: docs/{page}.md#{anchor} (no such page)")
        elif anchor not in anchors[page]:
            broken.append(f"{rel}: docs/{page}.md#{anchor} (no such section; the page has {sorted(anchors[page])})")
    assert not broken, "broken docs citations:\n" + "\n".join(broken)


@pytest.mark.parametrize("page", PAGES)
def test_every_page_is_cited_outside_docs(page):
    """Every page of docs/ is cited by the code, a test, a script, a notebook or the README."""
    citing = sorted({rel for rel, p, _ in CITATIONS if p == page and not rel.startswith("docs/")})
    assert citing, f"docs/{page}.md is cited by no code, test, script, notebook or README"


def test_nothing_cites_the_old_reference_file():
    """No tracked file cites the old reference file, which is not in the repository."""
    citing = sorted(_rel(p) for p in TRACKED if OLD_TARGET in _text_of(p))
    assert not citing, f"{OLD_TARGET} is not in the repository, yet these files cite it: {citing}"
