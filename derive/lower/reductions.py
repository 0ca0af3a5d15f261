"""Lowering of sums: a contraction of plain tensors becomes a matmul or one einsum, any other
Sum a ``.sum(dims)`` over the lowered body.

In: ``Sum(body, limits)`` and the lowerer; out: a :class:`~derive.lower.value.Value` naming a
temporary the lowerer binds once per distinct sum (alpha-equal sums share it).
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

import sympy as sp

from derive.errors import DerivationError
from derive.lower.indexing import indexed
from derive.lower.value import ATOM, Value, matmul, natural_order, plain

if TYPE_CHECKING:
    from derive.lower.lowerer import Lowerer


def _einsum_value(values: list[Value], out: tuple, order: list) -> Value:
    every = list(dict.fromkeys(list(order) + [a for v in values for a in v.axes]))
    letters = dict(zip(every, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", strict=False))
    spec = ",".join("".join(letters[x] for x in v.axes) for v in values)
    spec += "->" + "".join(letters[x] for x in out)
    return Value(f'torch.einsum("{spec}", {", ".join(v.code for v in values)})', out)


def sum_value(lw: Lowerer, e: sp.Sum, order: list[sp.Symbol], name: str | None = None) -> Value:
    known = lw.recall(e)
    if known is not None:
        return lw._permuted(known, order)
    bound = [lim[0] for lim in e.limits]
    lw.sizes.update({var: hi - lo + 1 for var, lo, hi in e.limits})
    inner = natural_order(e.function, order)
    value = _partly_known(lw, e)
    if value is None:
        value = contraction(lw, e.function, bound, list(dict.fromkeys(list(order) + inner)))
    if value is None:
        value = _summed(lw, e.function, bound, inner, e)
    name = name or lw._temp(e)
    lw.lines.append(f"{name} = {value.code}")
    lw.remember(e, Value(name, value.axes))
    return lw._permuted(Value(name, value.axes), order)


def _summed(lw: Lowerer, body: sp.Expr, bound: list, inner: list, e: sp.Expr) -> Value:
    """sum over ``bound`` of the element-wise body: ``body.sum(dims)``."""
    value = lw.value(body, inner)
    missing = [b for b in bound if b not in value.axes]
    if missing:
        raise DerivationError(lw.op, f"sum over unused index {missing} in {e}")
    return _sum_code(value, bound)


def _sum_code(value: Value, bound: list) -> Value:
    dims = ", ".join(str(value.axes.index(b)) for b in bound)
    code = f"{value.wrap(ATOM)}.sum({'(' + dims + ')' if len(bound) > 1 else dims})"
    return Value(code, tuple(a for a in value.axes if a not in bound))


def _partly_known(lw: Lowerer, e: sp.Sum) -> Value | None:
    """sum_{b,t,t1} f with sum_t1 f computed already (dq, then dbq = sum_{b,t} dq): the
    remaining indices are summed off the known tensor, not the whole body again."""
    limits = list(e.limits)
    for size in range(len(limits) - 1, 0, -1):
        for part in itertools.combinations(limits, size):
            known = lw.recall(sp.Sum(e.function, *part))
            if known is not None:
                return _sum_code(known, [lim[0] for lim in limits if lim not in part])
    return None


def contraction(lw: Lowerer, body: sp.Expr, bound: list, order: list) -> Value | None:
    """sum_k A[.., k] B[k, ..] -> A @ B (or an einsum), when body is two plain tensors;
    a product of three or more tensors (or reductions) -> one einsum, which contracts pair
    by pair instead of materialising the broadcast product of all of them."""
    coef, rest = body.as_coeff_Mul()
    factors = sp.Mul.make_args(rest)
    if any(_composite(f) for f in factors):
        return _grouped(lw, body, bound, order)
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
    out = tuple(x for x in order if x in (set(a.axes) | set(b.axes)) - set(bound))
    if not set(bound) <= shared and set(bound) <= set(a.axes) | set(b.axes):
        # an index of one side alone is summed too: sum_{b,t,c} W[h,d,c] g[b,t,c], one einsum
        return _einsum_value([a, b], out, order)
    if not set(bound) <= shared or not (set(a.axes) - shared) or not (set(b.axes) - shared):
        return None
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


def _composite(f: sp.Expr) -> bool:
    """A factor that is element-wise work on tensors (not one tensor, not a reduction)."""
    return not plain(f) and not isinstance(f, sp.Sum) and bool(f.atoms(sp.Indexed))


def _grouped(lw: Lowerer, body: sp.Expr, bound: list, order: list) -> Value | None:
    """sum_k E(..k..) A[k, ..] with E element-wise (a product with sums, differences):
    E is computed once into a tensor of its own axes, then contracted by matmul/einsum.

    The softmax backward inside attention, ``sum_t2 P (dP - rowsum(dP P)) k``, becomes
    ``dS = P * (dP - rowsum)`` and ``dS @ k``: never the broadcast product over all the
    indices at once. E takes the factors that live on its axes (P beside dP - rowsum) and
    the numbers; it is remembered, so dq's and dk's sums share one dS.
    """
    factors = sp.Mul.make_args(body)
    grouped = [f for f in factors if _composite(f) or not f.atoms(sp.Indexed)]
    axes = {i for f in grouped for i in f.free_symbols if lw._is_axis(i)}
    grouped += [f for f in factors if plain(f) and set(f.indices) <= axes]
    if len(grouped) == len(factors):
        return None  # nothing to contract with: an element-wise body summed
    product = sp.Mul(*grouped)
    if not all(lw._is_axis(i) for f in product.atoms(sp.Indexed) for i in f.indices):
        return None  # a gather inside: its axes are data, not indices to contract over
    known = lw.recall(product)
    if known is None:
        value = lw.value(product, order)
        if value.scalar:
            return None
        name = lw._name(
            "t_" + "_".join(sorted({i.base.label.name for i in product.atoms(sp.Indexed)}))
        )
        lw.lines.append(f"{name} = {value.code}")
        known = Value(name, value.axes)
        lw.remember(product, known)
    temp = sp.IndexedBase(known.code, real=True)[known.axes]
    lw.names.setdefault(known.code, known.code)
    rest = sp.Mul(temp, *[f for f in factors if f not in grouped])
    value = contraction(lw, rest, bound, order)
    return value if value is not None else _summed(lw, rest, bound, order, body)
