"""Every relative link of the README, the changelog and docs/ names a file that exists (and a
heading of it, where it names one); every source path and `python -m` module the README and
docs/ quote exists. Files move (issue 26 moved half the README); the text must follow."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINKED_FROM = [*PAGES, ROOT / "CHANGELOG.md"]
SOURCE_FOLDERS = ("derive", "train", "tests", "bench", "fuzz", "generated", "ops", "docs")


def prose(text: str) -> str:
    """The text without its fenced code blocks (a `# comment` there is no heading)."""
    return re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)


def code_spans(text: str) -> list[str]:
    return re.findall(r"`([^`\n]+)`", prose(text))


def links(text: str) -> list[str]:
    without_code = re.sub(r"`[^`\n]*`", "", prose(text))
    return re.findall(r"\]\(([^)\s]+)\)", without_code)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = heading.strip().lower().replace("`", "")
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    found = set()
    for heading in re.findall(r"^#+ (.*)$", prose(page.read_text()), flags=re.M):
        base = slug(heading)
        found.add(base if base not in seen else f"{base}-{seen[base]}")
        seen[base] = seen.get(base, 0) + 1
    return found


def _id(page: Path) -> str:
    return str(page.relative_to(ROOT))


@pytest.mark.parametrize("page", LINKED_FROM, ids=_id)
def test_relative_links_resolve(page: Path) -> None:
    broken = []
    for link in links(page.read_text()):
        if re.match(r"[a-z]+:", link):  # https:, mailto:: not ours to check offline
            continue
        path, _, fragment = link.partition("#")
        target = (page.parent / path).resolve() if path else page
        if not target.exists():
            broken.append(f"{link}: no such file")
        elif fragment and target.suffix == ".md" and fragment not in anchors(target):
            broken.append(f"{link}: no heading #{fragment} in {target.name}")
    assert not broken, broken


@pytest.mark.parametrize("page", PAGES, ids=_id)
def test_quoted_source_paths_exist(page: Path) -> None:
    pattern = rf"(?:{'|'.join(SOURCE_FOLDERS)})/[\w./-]*"
    quoted = [s for s in code_spans(page.read_text()) if re.fullmatch(pattern, s)]
    missing = [path for path in quoted if not (ROOT / path).exists()]
    assert not missing, f"{_id(page)} names files that are not there: {missing}"


@pytest.mark.parametrize("page", PAGES, ids=_id)
def test_quoted_modules_exist(page: Path) -> None:
    ours = "|".join(("derive", "train", "bench", "fuzz"))
    modules = re.findall(rf"-m ((?:{ours})(?:\.\w+)*)", page.read_text())
    missing = [
        module
        for module in modules
        if not (ROOT / f"{module.replace('.', '/')}.py").is_file()
        and not (ROOT / module.replace(".", "/") / "__init__.py").is_file()
    ]
    assert not missing, f"{_id(page)} runs modules that are not there: {missing}"
