"""Derived sizes (``sizes={"D": "C / n_head"}``) and the place of ``inf`` in a definition.

A derived size is a product of the inputs' sizes and int params, each to the power +-1; it
stays a plain size symbol for the engine (D is D), and the generated forward binds it and
checks that it is a positive whole number (``C = 10 is not divisible by n_head = 3``). It may
also name an input's dimension (a grouped convolution's ``w[O, CG, KH, KW]`` with
``CG = C / groups``): the forward then checks that the input's shape agrees with it.
"""

from __future__ import annotations

import re

import sympy as sp
from sympy.parsing.sympy_parser import parse_expr

from derive.functions import where
from derive.language.graph import Graph, LangError, name_problem
from derive.language.text import bracket_problem, keyword_problem

_GLOBALS = {"Integer": sp.Integer, "Float": sp.Float, "Rational": sp.Rational, "Symbol": sp.Symbol}
_GLOBALS["floor"] = sp.floor  # what parse_expr makes of a // b
_GLOBALS["Function"] = sp.Function  # what it makes of a call (Max(T, 2)): refused by name below


def derived_size(name: str, text: str, sizes: dict[str, sp.Symbol], g: Graph) -> sp.Symbol:
    """The size symbol ``name`` of ``sizes={name: text}``, added to the op's sizes."""
    if not re.fullmatch(r"[A-Z]\w*", name or ""):
        raise LangError(f"derived size '{name}' must be a capitalised name")
    problem = name_problem(name)
    if problem is not None:
        raise LangError(f"size name '{name}' {problem}")
    # a derived size may also be an input's dimension (w[O, CG, KH, KW] with CG = C / groups):
    # the forward computes it from its formula and checks the input's shape agrees
    return sizes.setdefault(name, sp.Symbol(name, integer=True, positive=True))


def parse_size_expr(text: str, sizes: dict[str, sp.Symbol], g: Graph) -> sp.Expr:
    """A product of sizes and int params, each to a whole power (``C / n_head``, ``n_head``,
    ``K / (r * r)``: SymPy reads ``r * r`` as ``r**2``)."""
    problem = keyword_problem(text) or bracket_problem(text)
    if problem is not None:
        raise LangError(f"size expression '{text}': {problem}")
    ns = {**{p.name: p for p in g.params}, **sizes}
    try:
        expr = sp.sympify(parse_expr(text, local_dict=ns, global_dict=dict(_GLOBALS)))
    except Exception as exc:  # noqa: BLE001  (SymPy's parser raises many types)
        raise LangError(f"cannot parse size expression '{text}': {exc}") from None
    if not isinstance(expr, sp.Expr) or expr.is_Relational:  # C == 2 read as True or False
        raise LangError(f"size expression '{text}' is a comparison, not a size ('C / n_head')")
    calls = sorted(str(f.func) for f in expr.atoms(sp.Function) if not isinstance(f, sp.floor))
    if calls:
        raise LangError(
            f"size expression '{text}': no function but // (floor division) is allowed in a "
            f"size, not {calls[0]}"
        )
    _check_known(text, expr, sizes, g)
    if isinstance(expr, sp.Add) or expr.has(sp.floor):
        _check_integer_size(text, expr, sizes, g)
        return expr
    for factor in sp.Mul.make_args(expr):
        base, power = factor.as_base_exp()
        if factor.is_Rational and factor > 0 and (factor.p == 1 or factor.q == 1):
            continue  # 3*C, C / 2: the forward checks the quotient is whole
        if factor.is_Number:  # C / 2.5 reads 0.4*C: say which number, not that it is neither
            shown = f"{float(factor):g}" if factor.is_Float else str(factor)
            raise LangError(
                f"size expression '{text}': a size is a positive whole number, so its numbers "
                f"must be positive integers multiplied or divided (3*C, C / 2); it has a factor "
                f"{shown}"
            )
        known = base in sizes.values() or base in g.params
        if not known or not (power.is_Integer and power != 0):  # r * r is r**2
            raise LangError(
                f"size expression '{text}': use sizes and int params, multiplied or divided "
                f"('C / n_head'); '{factor}' is neither"
            )
        if base in g.params and not isinstance(g.op.param_values()[base.name], int):
            raise LangError(f"param '{base}' sets a size, so its default must be an int")
    return expr


def _check_known(text: str, expr: sp.Expr, sizes: dict[str, sp.Symbol], g: Graph) -> None:
    """Every name a size reads is declared, and nothing divides by zero: SymPy's parser makes
    an unknown name a fresh symbol (``N / groups`` has the factor ``1/groups``) and ``N / 0``
    complex infinity (``zoo``), which the factor checks would quote instead of the cause."""
    if expr.has(sp.zoo, sp.nan):  # N / 0 is zoo*N, 0 / 0 is nan
        raise LangError(f"size expression '{text}' divides by zero (a size is a whole number > 0)")
    known = set(sizes.values()) | set(g.params)
    unknown = sorted(str(s) for s in expr.free_symbols if s not in known)
    if not unknown:
        return
    name = unknown[0]
    declare = f"as an int param (params={{'{name}': 2}})"
    if name[:1].isupper():
        declare = f"in an input's shape (x[{name}]) or in sizes="
    raise LangError(
        f"size expression '{text}': unknown name '{name}': a size reads the inputs' sizes, "
        f"derived sizes and int params; declare it {declare}"
    )


def _check_integer_size(text: str, expr: sp.Expr, sizes: dict, g: Graph) -> None:
    """A size that adds: integers, sizes and int params with + - * and floor division ``//``
    (``(T + 2*P - K) // S + 1``); the forward checks it is positive. A ``/`` here would be a
    fraction: refused, with ``//`` named."""

    def walk(e: sp.Expr, floored: bool) -> None:
        if isinstance(e, sp.floor):
            return walk(e.args[0], True)
        fraction = e.is_Rational and not e.is_Integer and not floored  # N / 2 + 1
        whole = isinstance(e, sp.Pow) and e.exp.is_Integer and (e.exp > 0 or floored)
        if fraction or isinstance(e, sp.Pow) and not whole:  # pad**2, (T - 1) // pad**2 whole
            raise LangError(
                f"size expression '{text}': a size that adds or subtracts divides with // "
                "(floor division), not / or **"
            )
        if e.is_Number and not (e.is_Integer or (floored and e.is_Rational)):
            raise LangError(f"size expression '{text}': its numbers must be integers, not {e}")
        if e in g.params and not isinstance(
            g.op.param_values()[e.name], int
        ):  # (names: _check_known)
            raise LangError(f"param '{e}' sets a size, so its default must be an int")
        if isinstance(e, sp.Function) and not isinstance(e, sp.floor):
            raise LangError(f"size expression '{text}': no function but // is allowed")
        for a in e.args:
            walk(a, floored)

    walk(expr, False)


def check_infinities(body: sp.Expr) -> None:
    """``inf`` is a masked value, a branch of where() (exp(-inf) = 0, a Max skips it), and
    nothing else: exp(inf) or inf - inf would be NaN, with no gradient to derive."""
    wheres = body.atoms(where)
    rest = body.replace(
        lambda e: isinstance(e, where),
        # bottom-up: a where() nested in a branch of another has its own infs cleared too
        lambda w: w.func(w.args[0], *(0 if a in (sp.oo, -sp.oo) else a for a in w.args[1:])),
    )
    # cos(inf) is already SymPy's AccumBounds(-1, 1): an inf a function took in, also refused
    bad = (sp.oo, -sp.oo, sp.zoo, sp.nan, sp.AccumBounds)
    if rest.has(*bad) or any(w.args[0].has(sp.oo, -sp.oo) for w in wheres):
        raise LangError("inf may only be a branch of where(), e.g. where(t2 <= t1, s, -inf)")
    for w in wheres:
        if not isinstance(w.args[0], sp.core.relational.Relational):
            raise LangError(
                f"the condition of {w} must be a comparison (t2 <= t1, t[n] >= 0), "
                f"not '{w.args[0]}'"
            )
