"""LaTeX to inline SVG with matplotlib's mathtext: typeset maths for a page with no scripts.

formulas.html has to show rendered formulas when opened from disk with no network, so the
maths is typeset here, at generation time, by the same parser the tests use to check every
LaTeX string. Each glyph outline is written once per page (``<defs>``, integer FreeType units),
and so is each run of glyphs on one baseline at one size (a name, mostly); formulas place them
with ``<use>``, which keeps the page small. The output is a pure function of the strings
(rounded coordinates, ids in order of first use): regeneration is byte-identical.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

FONTSET = "cm"  # Computer Modern, the look of LaTeX
EM = 100.0  # mathtext lays out at this size; 100 units = 1em on the page


def _num(x: float) -> str:
    text = f"{x:.2f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def _path_data(vertices: np.ndarray, codes: np.ndarray) -> str:
    """A glyph outline (points at size EM) as SVG path data in integer 1/64 units."""
    from matplotlib.path import Path

    out = []
    letters = {Path.MOVETO: "M", Path.LINETO: "L", Path.CURVE3: "Q", Path.CURVE4: "C"}
    for points, code in Path(vertices * 64, codes).iter_segments(simplify=False, curves=True):
        if code == Path.CLOSEPOLY:
            out.append("Z")
        else:
            out.append(letters[code] + " ".join(str(round(float(v))) for v in points))
    return "".join(out)


@dataclass(frozen=True)
class Layout:
    """One formula as mathtext lays it out, before any id is given (:meth:`MathSvg.layout`):
    a pure function of the LaTeX, so another process can lay formulas out for a page
    (``generate --jobs``). ``outlines``: those of its glyphs the laying-out process had not met
    before (every glyph's outline is in the layouts of a page taken together)."""

    glyphs: list[tuple]  # (glyph key, x, y, scale), in mathtext's order
    outlines: dict  # glyph key -> (vertices, codes)
    rects: list[tuple]  # (x, y, width, height): fraction bars and radicals' overlines
    width: float
    height: float
    depth: float


class MathSvg:
    """Typesets LaTeX strings for one page; :meth:`defs` holds the glyphs they share."""

    def __init__(self) -> None:
        from matplotlib.font_manager import FontProperties
        from matplotlib.textpath import TextToPath

        self._t2p = TextToPath()
        self._prop = FontProperties(size=EM, math_fontfamily=FONTSET)
        self._outlines: dict = {}  # matplotlib's glyph key -> (vertices, codes)
        self._ids: dict[str, str] = {}  # glyph key -> id on the page, in order of first use
        self._runs: dict[str, str] = {}  # a run's <use>s -> its id, in order of first use

    def layout(self, tex: str) -> Layout:
        """mathtext's layout of one formula; raises ValueError if mathtext rejects it."""
        math = f"${tex}$"
        parse = self._t2p.mathtext_parser.parse(math, self._t2p.DPI, self._prop)
        glyphs, new, _ = self._t2p.get_glyphs_mathtext(
            self._prop, math, glyph_map=self._outlines, return_new_glyphs_only=True
        )
        self._outlines.update(new)
        return Layout(glyphs, dict(new), list(parse.rects), parse.width, parse.height, parse.depth)

    def svg(self, tex: str, label: str = "", laid: Layout | None = None) -> str:
        """One formula as an ``<svg>`` sized in em; raises ValueError if mathtext rejects it.
        ``laid``: its layout, made elsewhere (else it is laid out here)."""
        if laid is not None:
            self._outlines.update(laid.outlines)
        if laid is None or any(g[0] not in self._outlines for g in laid.glyphs):
            # laid out elsewhere, a glyph's outline not sent with it (a worker sends each
            # outline once, with the first layout that used it there): laid out here instead
            laid = self.layout(tex)
        body = [self._run(run) for run in _runs(laid.glyphs)]
        body += [  # fraction bars and radicals' overlines, y upwards from the baseline
            f'<rect x="{_num(x)}" y="{_num(y)}" width="{_num(w)}" height="{_num(h)}"/>'
            for x, y, w, h in laid.rects
        ]
        width, height, depth = laid.width, laid.height, laid.depth
        size = f'width="{_num(width / EM)}em" height="{_num(height / EM)}em"'
        return (
            f'<svg viewBox="0 0 {_num(width)} {_num(height)}" {size} '
            f'style="vertical-align:-{_num(depth / EM)}em" role="img" aria-label="{escape(label)}">'
            f'<g transform="matrix(1 0 0 -1 0 {_num(height - depth)})">{"".join(body)}</g></svg>'
        )

    def _run(self, run: list[tuple]) -> str:
        """Glyphs on one baseline at one size (a name, mostly), defined once and reused."""
        _, x0, y, scale = run[0]
        if len(run) == 1:
            return _place(self._glyph(run[0][0]), x0, y, scale)
        inner = "".join(_place(self._glyph(key), x - x0, 0, scale) for key, x, _, _ in run)
        rid = self._runs.setdefault(inner, f"r{len(self._runs)}")
        return _place(rid, x0, y, 1)

    def _glyph(self, key: str) -> str:
        return self._ids.setdefault(key, f"g{len(self._ids)}")

    def defs(self) -> str:
        """The glyph outlines and runs every formula so far uses, as one hidden ``<svg>``."""
        paths = [
            f'<path id="{gid}" transform="scale(0.015625)" d="{_path_data(*self._outlines[key])}"/>'
            for key, gid in self._ids.items()
        ]
        runs = [f'<g id="{rid}">{inner}</g>' for inner, rid in self._runs.items()]
        hidden = '<svg width="0" height="0" style="position:absolute">'
        return f'{hidden}<defs>{"".join(paths + runs)}</defs></svg>'


def _runs(glyphs: list[tuple]) -> list[list[tuple]]:
    """Consecutive glyphs (key, x, y, scale) that share a baseline and a size."""
    out: list[list[tuple]] = []
    for g in glyphs:
        if out and out[-1][0][2:] == g[2:]:
            out[-1].append(g)
        else:
            out.append([g])
    return out


def _place(ref: str, x: float, y: float, scale: float) -> str:
    if scale != 1:
        return (
            f'<use href="#{ref}" transform="translate({_num(x)} {_num(y)}) scale({_num(scale)})"/>'
        )
    at = "".join(f' {k}="{_num(v)}"' for k, v in (("x", x), ("y", y)) if _num(v) != "0")
    return f'<use href="#{ref}"{at}/>'
