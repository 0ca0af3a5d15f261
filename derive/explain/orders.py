"""``show OP --jvp`` and ``show OP --order 2``: the tangent map and the second order, as the
module computes them (text, LaTeX or JSON).

The tangent steps are forward mode's (:mod:`derive.symbolic.forward_mode`): ``t_<name>`` is
the tangent of ``<name>``, forward order, each in terms of the forward's tensors and earlier
tangents. The second order is the op ``pair = <v, backward(x, grad_out)>``
(:mod:`derive.symbolic.second_order`): its adjoints ``d<name>`` are the double backward, the
gradient of ``pair`` with respect to the inputs and ``grad_y`` (the first backward's grad_out).
Both come from the op's :class:`~derive.emit.generate.Emitted`: nothing is derived twice.
"""

from __future__ import annotations

import json

import sympy as sp

from derive.emit.generate import Emitted
from derive.emit.statements import unguarded
from derive.explain.latex import equation_latex, equation_pretty, latex
from derive.language import Definition


def _lhs(step: Definition) -> sp.Expr:
    if not step.indices:
        return sp.Symbol(step.name, real=True)
    return sp.IndexedBase(step.name)[step.indices]


def tangent_equations(em: Emitted) -> list[tuple[sp.Expr, sp.Expr | str]]:
    """(lhs, rhs) per tangent step; a view's rhs is its text."""
    return [
        (_lhs(s), s.body) if isinstance(s, Definition) else (sp.Symbol(s.name), s.text)
        for s in em.data.jvp.steps
    ]


def second_equations(em: Emitted) -> list[tuple[sp.Expr, sp.Expr]]:
    """(lhs, rhs) per adjoint of the second-order op, consumers first (as it computes them)."""
    d = em.data.double.derivation
    adj = d.adjoints
    out = []
    for t in d.order:
        free = adj.free[t]
        lhs = sp.IndexedBase(adj.names[t])[free] if free else sp.Symbol(adj.names[t])
        out.append((lhs, d.final[t]))
    return out


def _refused(em: Emitted, jvp: bool) -> str | None:
    if jvp and not em.data.jvp.lines:
        return f"forward mode not derived: {em.data.jvp.error}"
    if not jvp and em.data.double.module is None:
        return f"second order not derived: {em.data.double.error}"
    return None


def render_order(em: Emitted, jvp: bool, mode: str = "text", width: int = 100) -> str:
    """The tangent map (``jvp``) or the second order of one op, in ``mode``."""
    op, refused = em.op, _refused(em, jvp)
    title = (
        "Tangents (forward mode; t_<name> is the tangent of <name>, forward order)"
        if jvp
        else "Second order (the gradient of pair = <v, backward(x, grad_y)>; "
        "d<name> is its adjoint of <name>)"
    )
    equations = [] if refused else (tangent_equations(em) if jvp else second_equations(em))
    torch = (
        []
        if refused
        else em.data.jvp.lines if jvp else unguarded(em.data.double.module.backward_lines)
    )
    if mode == "json":
        return json.dumps(_record(op.name, jvp, refused, equations, torch), indent=2) + "\n"
    if mode == "latex":
        lines = [f"% {op.name}: {title}"] + ([f"% {refused}"] if refused else [])
        for lhs, rhs in equations:
            lines += [f"% {lhs}", equation_latex(lhs, rhs) if not isinstance(rhs, str) else rhs]
        return "\n".join(lines) + "\n"
    lines = [f"{op.name}: {op.doc or op.name}", f"from {op.source}", "", title]
    if refused:
        lines.append(f"    {refused}")
    for lhs, rhs in equations:
        shown = rhs if isinstance(rhs, str) else equation_pretty(lhs, rhs, width - 4)
        lines += ["", *("    " + line for line in shown.splitlines())]
    if torch:
        lines += ["", "  torch:", *("    " + line for line in torch)]
    return "\n".join(line.rstrip() for line in lines) + "\n"


def _record(name: str, jvp: bool, refused, equations, torch: list[str]) -> dict:
    return {
        "op": name,
        "what": "tangents" if jvp else "second order",
        "refused": refused,
        "equations": [
            {
                "lhs": str(lhs),
                "sympy": rhs if isinstance(rhs, str) else str(rhs),
                "latex": rhs if isinstance(rhs, str) else latex(rhs),
            }
            for lhs, rhs in equations
        ],
        "torch": list(torch),
    }
