"""Check formulas.html as a browser shows it: ``python -m derive.explain.browser PAGE --out DIR``.

Without a browser the page is checked as text (:func:`page_problems`: every formula an inline
SVG, no raw LaTeX left outside the attributes that describe a formula, no script, no stylesheet
or URL to fetch). With headless Chromium the same check runs on the DOM Chromium built, and a
screenshot is taken of the whole page's top and of each op alone (``formulas.html#op`` shows
only that op), for a person to look at.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from html.parser import HTMLParser
from pathlib import Path

DESCRIBING = {"alt", "title", "aria-label"}  # attributes that may hold a formula's LaTeX source
RAW_LATEX = re.compile(r"\\[A-Za-z]+|\$\$")
FLAGS = [  # offline and quiet: no network services, no first-run, a fresh profile per run
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
]


class _Page(HTMLParser):
    """Collects what a reader sees and what the page would fetch."""

    def __init__(self) -> None:
        super().__init__()
        self.text: list[str] = []  # visible text and non-describing attribute values
        self.fetches: list[str] = []
        self.sections: dict[str, int] = {}  # op section id -> number of formula SVGs in it
        self.formulas = self.svgs = 0
        self._section: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        self.text += [v for k, v in attrs if v and k not in DESCRIBING]
        if tag in ("script", "link", "img", "iframe", "object"):
            self.fetches.append(f"<{tag}>")
        self.fetches += [v for k, v in attrs if k in ("src", "href") and v and "//" in v]
        if tag == "section" and "op" in (a.get("class") or "").split():
            self._section = a.get("id") or "?"
            self.sections[self._section] = 0
        if tag == "div" and (a.get("class") or "") in ("eq", "def"):
            self.formulas += 1
        if tag == "svg" and a.get("role") == "img":
            self.svgs += 1
            if self._section is not None:
                self.sections[self._section] += 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "section":
            self._section = None

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def page_problems(html: str, ops: list[str]) -> list[str]:
    """What is wrong with the page (or its DOM) for the given ops; empty when all is well."""
    page = _Page()
    page.feed(html)
    problems = [f"fetches {f}" for f in page.fetches]
    raw = sorted({m for t in page.text for m in RAW_LATEX.findall(t)})
    if raw:
        problems.append(f"raw LaTeX in the page: {', '.join(raw[:10])}")
    if page.formulas != page.svgs:
        problems.append(f"{page.formulas} formulas but {page.svgs} typeset SVGs")
    for op in ops:
        if not page.sections.get(op):
            problems.append(f"no typeset formula for op {op}")
    return problems


def chromium() -> str | None:
    """The Chromium binary, if there is one."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _run(args: list[str], url: str, profile: str) -> str:
    cmd = [chromium() or "chromium", *FLAGS, f"--user-data-dir={profile}", *args, url]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=True)
    return done.stdout


def dump_dom(page: Path) -> str:
    """The DOM Chromium builds from the page, serialised."""
    with tempfile.TemporaryDirectory() as profile:
        return _run(["--dump-dom"], page.resolve().as_uri(), profile)


def screenshot(
    page: Path, png: Path, fragment: str = "", size: tuple[int, int] = (1280, 2000)
) -> Path:
    """A PNG of the page (or of ``page#fragment``) at the given window size."""
    png.parent.mkdir(parents=True, exist_ok=True)
    url = page.resolve().as_uri() + (f"#{fragment}" if fragment else "")
    with tempfile.TemporaryDirectory() as profile:
        _run([f"--screenshot={png.resolve()}", f"--window-size={size[0]},{size[1]}"], url, profile)
    return png


def trim(png: Path, margin: int = 24) -> Path:
    """Cut the blank window below the page off a screenshot (a tall window fits any op)."""
    from PIL import Image, ImageChops  # matplotlib's dependency, so there with the dev extra

    with Image.open(png) as img:
        rgb = img.convert("RGB")
    box = ImageChops.difference(rgb, Image.new("RGB", rgb.size, rgb.getpixel((0, 0)))).getbbox()
    if box is not None:
        rgb.crop((0, 0, rgb.width, min(rgb.height, box[3] + margin))).save(png)
    return png


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m derive.explain.browser", description=__doc__)
    parser.add_argument("page", type=Path, help="formulas.html")
    parser.add_argument("--out", type=Path, default=Path("runs/formulas"), help="screenshot folder")
    parser.add_argument("--height", type=int, default=9000, help="window height for one op")
    parser.add_argument("--ops", nargs="*", help="ops the page must show (default: its sections)")
    args = parser.parse_args(argv)
    ops = args.ops or re.findall(r'<section id="([^"]+)" class="op"', args.page.read_text())
    problems = page_problems(args.page.read_text(), ops)
    if chromium() is None:
        print("chromium not found: checked the page as text only", file=sys.stderr)
    else:
        problems += [f"in Chromium's DOM: {p}" for p in page_problems(dump_dom(args.page), ops)]
        shots = [screenshot(args.page, args.out / "formulas.png")]
        for op in ops:
            shots.append(
                trim(screenshot(args.page, args.out / f"{op}.png", op, (1280, args.height)))
            )
        print("\n".join(f"wrote {p}" for p in shots))
    for p in problems:
        print(f"error: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
