"""``python -m derive show OP``'s renderings: one op's derivation for the terminal, as LaTeX or
as JSON (the command's loop, and its cache, are :mod:`~derive.explain.command`).

For the forward definitions and then every adjoint, the output's consumers first, it prints
the chain rule as reverse mode writes it, the simplified step, the collapse down to
``grad_out`` where there is one, and the torch statements the generated module runs for it.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from derive.emit.generate import emit, load_op
from derive.explain.explain import Explanation, explain
from derive.explain.latex import equation_latex, equation_pretty, latex
from derive.symbolic.reverse import GRAD_OUT


def explain_file(path: Path) -> Explanation:
    """Load, derive and generate one op file, and gather its derivation."""
    return explain(emit(load_op(path), "generated"))


def _header(ex: Explanation) -> list[str]:
    op = ex.op
    return [f"{op.name}: {op.doc or op.name}", f"from {op.source}; inputs {', '.join(op.inputs)}"]


def _indent(text: str, by: int = 4) -> str:
    return textwrap.indent(text, " " * by)


def render_text(ex: Explanation, width: int = 100) -> str:
    """SymPy's unicode pretty print, for the terminal."""
    lines = _header(ex) + ["", "Forward"]
    for lhs, rhs in ex.forward:  # a blank line apart: 2-D forms would run into each other
        lines += [_indent(equation_pretty(lhs, rhs, width - 4)), ""]
    if ex.lifted:  # the backward's steps name them: say what they are
        lines += ["Named for the backward (a costly call, computed once and read again)"]
        for lhs, rhs in ex.lifted:
            lines += [_indent(equation_pretty(lhs, rhs, width - 4)), ""]
    if ex.argmax:  # read by a simplified backward: say where they come from
        lines += ["Saved by the forward (the index each Max picks; the backward reads it)"]
        for lhs, rhs in ex.argmax:
            lines += [_indent(equation_pretty(lhs, rhs, width - 4)), ""]
    lines += [f"Backward ({GRAD_OUT} is the adjoint of {ex.output}; consumers before producers)"]
    for step in ex.steps:
        kind = "input" if step.is_input else "intermediate"
        lines += ["", f"── {step.adjoint}  ({kind} {step.tensor}) " + "─" * 20]
        for label, rhs in step.forms():
            lines += [f"  {label}:", _indent(equation_pretty(step.lhs, rhs, width - 4))]
        if step.emitted:
            lines += ["  torch:", _indent(step.emitted)]
    text = "\n".join(lines)
    return "\n".join(line.rstrip() for line in text.splitlines()) + "\n"  # SymPy pads lines


def latex_lines(ex: Explanation) -> list[tuple[str, str]]:
    """Every formula of the derivation as (what it is, LaTeX), in reading order."""
    out = [(f"forward: {lhs}", equation_latex(lhs, rhs)) for lhs, rhs in ex.forward]
    for step in ex.steps:
        out += [
            (f"{step.adjoint}: {label}", equation_latex(step.lhs, rhs))
            for label, rhs in step.forms()
        ]
    return out


def render_latex(ex: Explanation) -> str:
    """One equation per line, each labelled by a LaTeX comment above it."""
    lines = [f"% {line}" for line in _header(ex)]
    for label, tex in latex_lines(ex):
        lines += [f"% {label}", tex]
    return "\n".join(lines) + "\n"


def _expr(e) -> dict | None:
    return None if e is None else {"sympy": str(e), "latex": latex(e)}


def record(ex: Explanation) -> dict:
    """The machine-readable record: op, definitions, adjoints raw and simplified, emitted code."""
    op = ex.op
    steps = [
        {
            "tensor": s.tensor,
            "adjoint": s.adjoint,
            "lhs": _expr(s.lhs),
            "input": s.is_input,
            "chain": _expr(s.chain),
            "simplified": _expr(s.simplified),
            "block": {"to": s.block[0], "expr": _expr(s.block[1])} if s.block else None,
            "collapsed": _expr(s.collapsed),
            "kept": {"to": list(s.kept[0]), "expr": _expr(s.kept[1])} if s.kept else None,
            "computed": s.computed,
            "emitted": s.emitted,
        }
        for s in ex.steps
    ]
    emitted = {s.tensor: s.emitted for s in ex.steps}
    return {
        "op": op.name,
        "doc": op.doc,
        "source": op.source,
        "stepwise": op.stepwise,
        "inputs": list(op.inputs),
        "params": dict(op.params),
        "definitions": [
            {"text": text, "latex": equation_latex(lhs, rhs)}
            for text, (lhs, rhs) in zip(ex.texts, ex.forward, strict=True)
        ],
        "lifted": [
            {"lhs": _expr(lhs), "latex": equation_latex(lhs, rhs)} for lhs, rhs in ex.lifted
        ],
        "adjoints": {
            t: {
                "raw": _expr(ex.raw[t]),
                "simplified": _expr(ex.final[t]),
                "emitted": emitted.get(t),
            }
            for t in ex.final
        },
        "steps": steps,
    }


def render_json(ex: Explanation) -> str:
    return json.dumps(record(ex), indent=2) + "\n"


def render(ex: Explanation, mode: str = "text", width: int = 100) -> str:
    """One explanation in one of text / latex / json."""
    if mode == "latex":
        return render_latex(ex)
    if mode == "json":
        return render_json(ex)
    return render_text(ex, width)
