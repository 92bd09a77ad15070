"""Every relative link in the documentation resolves: README.md, docs/*.md and the roles' READMEs
link only to files that exist, and every #anchor to a heading of the page it names (GitHub's
heading ids). Links to other sites are not followed; code blocks and code spans are not links."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from urllib.parse import unquote

import pytest

from tests.helpers import REPO

PAGES = sorted([REPO / "README.md", *(REPO / "docs").glob("*.md"), *(REPO / "roles").glob("*/README.md")])
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^\s*(```|~~~)")
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def _prose(text: str) -> list[str]:
    """The lines outside fenced code blocks, with code spans blanked."""
    lines: list[str] = []
    fenced = False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(CODE_SPAN.sub("", line))
    return lines


def slug(heading: str) -> str:
    """GitHub's id for a heading: markup dropped, lower case, punctuation but - and _ removed,
    spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text stays
    text = text.replace("`", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


@cache
def anchors(page: Path) -> frozenset[str]:
    """The ids of a page's headings, with GitHub's -1, -2 ... for repeats."""
    seen: dict[str, int] = {}
    found: set[str] = set()
    fenced = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        match = None if fenced else HEADING.match(line)
        if match:
            base = slug(match.group(2))
            count = seen.get(base, 0)
            found.add(base if count == 0 else f"{base}-{count}")
            seen[base] = count + 1
    return frozenset(found)


def links(page: Path) -> list[str]:
    """The targets of a page's relative links (and of its in-page #anchors)."""
    prose = "\n".join(_prose(page.read_text(encoding="utf-8")))  # a link's text may span lines
    targets = [match.group(1) for match in LINK.finditer(prose)]
    return [target for target in targets if not re.match(r"^[a-z][a-z0-9+.-]*:", target)]


def broken(page: Path) -> list[str]:
    """Each link of ``page`` that points nowhere, with why."""
    problems: list[str] = []
    for target in links(page):
        path_part, _, anchor = target.partition("#")
        destination = (page.parent / unquote(path_part)).resolve() if path_part else page
        if not destination.exists():
            problems.append(f"{target}: no such file")
        elif anchor and destination.suffix == ".md" and unquote(anchor) not in anchors(destination):
            problems.append(f"{target}: no heading with that id in {destination.name}")
    return problems


def test_there_are_pages_and_links_to_check() -> None:
    """The README, the docs pages and the role READMEs are found, and they do link (so the test below bites)."""
    names = {str(page.relative_to(REPO)) for page in PAGES}
    assert {"README.md", "docs/variables.md", "docs/gpu-box.md", "roles/vllm/README.md"} <= names
    assert "docs/gpu-box.md" in links(REPO / "README.md")
    assert any("#" in target for page in PAGES for target in links(page))


@pytest.mark.parametrize("page", PAGES, ids=[str(page.relative_to(REPO)) for page in PAGES])
def test_every_relative_link_resolves(page: Path) -> None:
    """Each relative link names a file that exists, and its #anchor a heading of that page."""
    assert broken(page) == []


def test_the_readme_indexes_every_docs_page() -> None:
    """Each page under docs/ is linked from the README's documentation index."""
    readme = set(links(REPO / "README.md"))
    pages = sorted(f"docs/{page.name}" for page in (REPO / "docs").glob("*.md"))
    assert [page for page in pages if page not in readme] == []


def test_a_broken_link_and_a_missing_anchor_are_found(tmp_path: Path) -> None:
    """The checker itself: a missing file and a missing heading are reported; code is not read as links."""
    (tmp_path / "other.md").write_text("# Other page\n\n## The `firewall` (ufw)\n", encoding="utf-8")
    page = tmp_path / "page.md"
    page.write_text(
        "# Title\n\n## Title\n\n[ok](other.md#the-firewall-ufw) [self](#title-1) [web](https://example.invalid/x)\n"
        "[gone](missing.md) [no heading\nacross lines](other.md#nothing)\n\n```\n[in code](nowhere.md)\n```\n"
        "`[span](nowhere.md)`\n",
        encoding="utf-8",
    )
    assert links(page) == ["other.md#the-firewall-ufw", "#title-1", "missing.md", "other.md#nothing"]
    problems = [problem.split(":")[0] for problem in broken(page)]
    assert problems == ["missing.md", "other.md#nothing"]
