"""The logs a definition's text adds inside an exp: ``exp(x + log(keep) - m)``.

SymPy takes a term out of an exp the moment that term's exp evaluates, and ``exp(log(u))``
is u: the masked softmax written ``exp(x + log(keep) - m)`` is ``keep exp(x - m)`` to SymPy,
the moment it is read or a definition ``s = x + log(keep)`` is inlined into ``exp(s - m)``.
The two are equal as real numbers, not as floats: where keep = 0 the text's exp is
``exp(-inf) = 0``, and SymPy's product is ``0 * inf = nan`` once ``x - m > 709`` (a masked
logit of 1e4; found by probing). Where u is tiny and x - m large, the text's exp is finite
and the product ``u * inf``.

:func:`exp_logs` records each such u (under index names made canonical), so that the lowering
puts it back in its exp, ``u**c exp(a)`` computed as ``exp(a + c log(u))``
(:func:`derive.lower.arithmetic.logged_exps`; the saving keeps such an exp beside its factor,
:mod:`derive.symbolic.saving`). Only u the text takes the log of inside an
exp: u >= 0 wherever the forward is real there, so ``u**c = exp(c log(u))`` holds at u = 0
too (``exp(-inf) = 0``); a u the text multiplies elsewhere may be negative, and stays.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping

import sympy as sp

from derive.language.graph import Definition


def exp_logs(
    rhs: str,
    read: Callable[[str], sp.Expr],
    definitions: Mapping[str, Definition],
) -> list[sp.Expr]:
    """The u of every ``log(u)`` that ``rhs`` (a definition's right-hand side) adds into an
    exp's argument, ``c log(u)`` for a number c included: written there, or added in a sum
    that defines a tensor the argument reads (``exp(s - m)`` with ``s = x + log(keep)``),
    through any chain of such sums. ``read`` parses a part of the text as SymPy reads it (an
    exception: a part it cannot read alone is skipped, the order of evaluation is a matter of
    range, never of value)."""
    try:
        tree = ast.parse(rhs.strip(), mode="eval")
    except SyntaxError:
        return []
    found: list[sp.Expr] = []
    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "exp"
            and len(node.args) == 1
        ):
            continue
        try:
            arg = read(ast.unparse(node.args[0]))
        except Exception:  # noqa: BLE001 (the parser's many types; see the docstring)
            continue
        found += added_logs(arg, definitions)
    return found


def added_logs(e: sp.Expr, definitions: Mapping[str, Definition], depth: int = 0) -> list:
    """The u of each term ``c log(u)`` of the sum ``e``, and of the sums that define the
    tensors ``e`` adds (their indices put in), to a depth of 32 definitions."""
    out: list[sp.Expr] = []
    for term in sp.Add.make_args(e):
        _, rest = term.as_coeff_Mul()
        if isinstance(rest, sp.log):
            out.append(rest.args[0])
            continue
        step = _definition_read(rest, definitions)
        if step is None or depth >= 32:
            continue
        indices = rest.indices if isinstance(rest, sp.Indexed) else ()
        body = step.body.xreplace(dict(zip(step.indices, indices, strict=True)))
        out += added_logs(body, definitions, depth + 1)
    return out


def _definition_read(e: sp.Expr, definitions: Mapping[str, Definition]) -> Definition | None:
    """The definition ``e`` reads whole (``s[n, c]`` of ``s[n, c] = ..``, a 0-d ``s``), when
    its body is a sum; else None."""
    if isinstance(e, sp.Indexed):
        step = definitions.get(e.base.label.name)
        if step is None or len(step.indices) != len(e.indices):
            return None
    elif isinstance(e, sp.Symbol):
        step = definitions.get(e.name)
        if step is None or step.indices:
            return None
    else:
        return None
    return step if isinstance(step.body, sp.Add) else None


def logged_key(u: sp.Expr) -> sp.Expr:
    """``u`` with its indices renamed in the order they first subscript (``keep[n, c]`` and
    ``keep[n, k]`` are one key): a factor of a derived product is the text's u under other
    index names. Sizes (positive) keep their names."""
    seen: list[sp.Symbol] = []
    for node in sp.preorder_traversal(u):
        if isinstance(node, sp.Indexed):
            for i in node.indices:
                for s in sorted(i.free_symbols, key=str):
                    if isinstance(s, sp.Symbol) and not s.is_positive and s not in seen:
                        seen.append(s)
    return u.xreplace({s: sp.Symbol(f"_i{k}", integer=True) for k, s in enumerate(seen)})


def logged_factors(
    e: sp.Mul, logged: frozenset[sp.Expr], beside_exp: bool = True
) -> list[tuple[sp.Expr, sp.Expr]]:
    """``(factor, c log(u))`` for each factor ``u**c`` (c a number) of the product ``e`` whose
    u is :func:`logged_key`-among ``logged``, when ``e`` has an exp to take them in (or
    whether it has or not, ``beside_exp`` False); else []."""
    if not logged or beside_exp and not any(isinstance(f, sp.exp) for f in e.args):
        return []
    out = []
    for f in e.args:
        base, c = (f.base, f.exp) if isinstance(f, sp.Pow) and f.exp.is_number else (f, 1)
        if base.is_number or isinstance(base, sp.exp):
            continue
        if logged_key(base) in logged:
            out.append((f, c * sp.log(base)))
    return out
