"""Lowering of sums: a contraction of plain tensors becomes a matmul or one einsum, any other
Sum a ``.sum(dims)`` over the lowered body.

In: ``Sum(body, limits)`` and the lowerer; out: a :class:`~derive.lower.value.Value` naming a
temporary the lowerer binds once per distinct sum (alpha-equal sums share it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import sympy as sp

from derive.errors import DerivationError
from derive.lower.indexing import indexed
from derive.lower.value import ATOM, Value, matmul, memo_key, natural_order, plain

if TYPE_CHECKING:
    from derive.lower.lowerer import Lowerer


def _einsum_value(values: list[Value], out: tuple, order: list) -> Value:
    every = list(dict.fromkeys(list(order) + [a for v in values for a in v.axes]))
    letters = dict(zip(every, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", strict=False))
    spec = ",".join("".join(letters[x] for x in v.axes) for v in values)
    spec += "->" + "".join(letters[x] for x in out)
    return Value(f'torch.einsum("{spec}", {", ".join(v.code for v in values)})', out)


def sum_value(lw: Lowerer, e: sp.Sum, order: list[sp.Symbol], name: str | None = None) -> Value:
    key = memo_key(e)
    if key in lw.memo:
        return lw._permuted(lw.memo[key], order)
    bound = [lim[0] for lim in e.limits]
    lw.sizes.update({var: hi - lo + 1 for var, lo, hi in e.limits})
    inner = natural_order(e.function, order)
    value = contraction(lw, e.function, bound, list(dict.fromkeys(list(order) + inner)))
    if value is None:
        body = lw.value(e.function, inner)
        missing = [b for b in bound if b not in body.axes]
        if missing:
            raise DerivationError(lw.op, f"sum over unused index {missing} in {e}")
        dims = ", ".join(str(body.axes.index(b)) for b in bound)
        code = f"{body.wrap(ATOM)}.sum({'(' + dims + ')' if len(bound) > 1 else dims})"
        value = Value(code, tuple(a for a in body.axes if a not in bound))
    name = name or lw._temp(e)
    lw.lines.append(f"{name} = {value.code}")
    lw.memo[key] = Value(name, value.axes)
    return lw._permuted(lw.memo[key], order)


def contraction(lw: Lowerer, body: sp.Expr, bound: list, order: list) -> Value | None:
    """sum_k A[.., k] B[k, ..] -> A @ B (or an einsum), when body is two plain tensors;
    a product of three or more tensors (or reductions) -> one einsum, which contracts pair
    by pair instead of materialising the broadcast product of all of them."""
    coef, rest = body.as_coeff_Mul()
    factors = sp.Mul.make_args(rest)
    if coef != 1 or len(factors) < 2:
        return None
    if len(factors) > 2 or any(isinstance(f, sp.Sum) for f in factors):
        return einsum(lw, factors, bound, order)
    if not all(plain(f) for f in factors):
        return None
    if not all(lw._is_axis(i) for f in factors for i in f.indices):
        return None
    a, b = (indexed(lw, f, list(f.indices)) for f in factors)
    shared = set(a.axes) & set(b.axes)
    if not set(bound) <= shared or not (set(a.axes) - shared) or not (set(b.axes) - shared):
        return None
    out = tuple(x for x in order if x in (set(a.axes) | set(b.axes)) - set(bound))
    mm = matmul(a, b, bound, out)
    return mm if mm is not None else _einsum_value([a, b], out, order)


def einsum(lw: Lowerer, factors: tuple, bound: list, order: list) -> Value | None:
    if not all(plain(f) or isinstance(f, sp.Sum) for f in factors):
        return None  # element-wise work first: not a pure contraction
    if not all(lw._is_axis(i) for f in factors if plain(f) for i in f.indices):
        return None
    values = [indexed(lw, f, list(f.indices)) if plain(f) else lw.value(f, order) for f in factors]
    if any(v.scalar for v in values) or not set(bound) <= {a for v in values for a in v.axes}:
        return None
    out = tuple(x for x in order if x in {a for v in values for a in v.axes} - set(bound))
    return _einsum_value(values, out, order)
