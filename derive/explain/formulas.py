"""FORMULAS.md and formulas.html: every op's derivation, for GitHub and for a browser offline.

Both render the same data (:func:`sections`): per op the forward definitions, then each
adjoint's chain rule, simplified step and collapse, with the torch lines the module runs, then
the tangents forward mode derives.
FORMULAS.md carries LaTeX in ``$$`` blocks for GitHub; formulas.html carries the same LaTeX
typeset to inline SVG (:mod:`derive.explain.mathsvg`), so it needs no network and no script.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import jinja2
from markupsafe import Markup

from derive.emit.generate import Emitted, emit, load_ops
from derive.emit.module import MARKER, TEMPLATES
from derive.errors import DerivationError
from derive.explain.explain import Explanation, explain
from derive.explain.latex import equation_latex
from derive.explain.orders import tangent_equations

if TYPE_CHECKING:
    from derive.explain.mathsvg import Layout
    from derive.language import Op

MARKDOWN, HTML = "FORMULAS.md", "formulas.html"


@dataclass
class Formula:
    label: str
    tex: str
    svg: Markup = Markup("")  # filled in for the HTML page only


@dataclass
class StepSection:
    adjoint: str
    title: str
    formulas: list[Formula]
    emitted: str | None


@dataclass
class OpSection:
    name: str
    doc: str
    source: str
    inputs: list[str]
    params: str
    forward: list[Formula]
    steps: list[StepSection] = field(default_factory=list)
    tangents: list[Formula] = field(default_factory=list)  # forward mode's steps
    tangent_torch: str = ""  # the lines of the module's _jvp


def _step(step) -> StepSection:
    kind = "input" if step.is_input else "intermediate"
    formulas = [Formula(label, equation_latex(step.lhs, rhs)) for label, rhs in step.forms()]
    return StepSection(step.adjoint, f"{kind} {step.tensor}", formulas, step.emitted)


def section(ex: Explanation, em: Emitted | None = None) -> OpSection:
    """One op's part of both pages; with ``em`` (its module), the tangents too."""
    op = ex.op
    # a default that is another param's reads as its name: stride = kernel_size
    params = ", ".join(
        f"{k} = {v if isinstance(v, str) else repr(v)}" for k, v in sorted(op.params.items())
    )
    forward = [
        Formula(text, equation_latex(lhs, rhs))
        for text, (lhs, rhs) in zip(ex.texts, ex.forward, strict=True)
    ]
    steps = [_step(s) for s in ex.steps]
    sec = OpSection(op.name, op.doc or op.name, op.source, list(op.inputs), params, forward, steps)
    if em is not None and em.data.jvp.lines:
        sec.tangents = [
            Formula(str(lhs), rhs if isinstance(rhs, str) else equation_latex(lhs, rhs))
            for lhs, rhs in tangent_equations(em)
        ]
        sec.tangent_torch = "\n".join(em.data.jvp.lines)
    return sec


def formulas_of(sec: OpSection) -> list[Formula]:
    """The op's formulas in page order: forward, each adjoint's steps, tangents."""
    return sec.forward + [f for s in sec.steps for f in s.formulas] + sec.tangents


def typeset(sections: list[OpSection], layouts: Mapping[str, Layout] | None = None) -> Markup:
    """Typeset every formula into its SVG; returns the glyph definitions they share.
    ``layouts``: formulas already laid out (by LaTeX), by other processes (``--jobs``)."""
    from derive.explain.mathsvg import MathSvg  # matplotlib: only when the page is written

    math, layouts = MathSvg(), layouts or {}
    for sec in sections:
        for f in formulas_of(sec):
            try:
                f.svg = Markup(math.svg(f.tex, f.tex, layouts.get(f.tex)))
            except ValueError as exc:  # a printer bug: name the op and the formula
                problem = f"mathtext cannot typeset {f.tex!r}: {str(exc).strip()}"
                raise DerivationError(sec.name, problem, f.label) from None
    return Markup(math.defs())


def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        undefined=jinja2.StrictUndefined,
        autoescape=jinja2.select_autoescape(enabled_extensions=("html.jinja",)),
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def formulas_pages(
    files: list[str], out_dir: str, made: list[Emitted] | None = None
) -> list[tuple[Path, str]]:
    """FORMULAS.md and formulas.html for the op files, ``(path, text)`` in ``out_dir``, for
    :func:`~derive.emit.generate.write_files` to write.

    ``made``: the ops as ``generate`` just derived and emitted them (generate --formulas): each
    page reads those derivations and modules instead of deriving the ops again.
    """
    out = Path(out_dir)
    ops = load_ops(files)
    by_name = {e.op.name: e for e in made or []}
    done = [by_name.get(op.name) or emit(op, out) for op in ops]
    return pages(ops, [section(explain(e), e) for e in done], out)


def pages(
    ops: list[Op],
    sections: list[OpSection],
    out: Path,
    layouts: Mapping[str, Layout] | None = None,
) -> list[tuple[Path, str]]:
    """Both pages from the ops' sections (``layouts``: as :func:`typeset` takes them)."""
    command = (
        f"python -m derive formulas {' '.join(op.source for op in ops)} --out {out.as_posix()}"
    )
    env = _environment()
    data = {"marker": MARKER, "command": command, "sections": sections}
    markdown = env.get_template("formulas.md.jinja").render(**data)
    html = env.get_template("formulas.html.jinja").render(defs=typeset(sections, layouts), **data)
    return [(out / MARKDOWN, markdown), (out / HTML, html)]
