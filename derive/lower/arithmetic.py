"""Lowering of arithmetic: sums of terms, products, powers and calls of the function registry
become broadcast torch ops (python on numbers).

In: ``Add``, ``Mul``, ``Pow``, function and ``Heaviside`` nodes and the lowerer; out: a
:class:`~derive.lower.value.Value`. A product multiplies its small factors first (each
full-size product is a pass over the tensor) and folds python numbers into one operation; a
node a fusion matches (:mod:`derive.lower.fusions`) becomes the fused call instead.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import sympy as sp

from derive.errors import DerivationError
from derive.functions import Function, step_code, where
from derive.lower.value import (
    ADD,
    ATOM,
    MUL,
    POW,
    UNARY,
    Value,
    align,
    number,
    number_scale,
    ordered_terms,
    plain,
    union,
)

if TYPE_CHECKING:
    from derive.lower.lowerer import Lowerer


def add(lw: Lowerer, e: sp.Add, order: list[sp.Symbol]) -> Value:
    fused = lw.fuse(e, order)
    if fused is not None:
        return fused
    terms = [lw.value(t, order) for t in ordered_terms(e)]
    axes = union([t.axes for t in terms], order)
    code = align(terms[0], axes).code if terms[0].prec >= ADD else terms[0].code
    for term in ordered_terms(e)[1:]:
        if term.could_extract_minus_sign():
            code += f" - {align(lw.value(-term, order), axes).wrap(MUL + 1)}"
        else:
            code += f" + {align(lw.value(term, order), axes).wrap(ADD)}"
    return Value(code, axes, ADD, scalar=all(t.scalar for t in terms))


def mul(lw: Lowerer, e: sp.Mul, order: list[sp.Symbol]) -> Value:
    fused = lw.fuse(e, order)
    if fused is not None:
        return fused
    gated = _gated(lw, e)
    if gated is not None:
        return lw.value(gated, order)
    coef, rest = e.as_coeff_Mul()
    num, den = [], []
    constant = sp.Mul(*[f for f in sp.Mul.make_args(rest) if f.is_number])
    if constant != 1:  # sqrt(2)/sqrt(pi): one float, not python arithmetic at run time
        num.append(lw.value(constant, order))
    for f in sp.Mul.make_args(rest):
        if f.is_number:
            continue
        if isinstance(f, sp.Pow) and f.exp.is_number and f.exp < 0:
            den.append(lw.value(f.base ** (-f.exp), order))
        else:
            num.append(lw.value(f, order))
    if coef.is_Rational and coef.q != 1:
        den.append(Value(str(coef.q), scalar=True))
        coef = sp.Integer(coef.p)
    if abs(coef) != 1:
        num.insert(0, Value(number(abs(coef)), scalar=True))
    scale = None
    if all(v.scalar for v in num + den):
        value = product(lw, num, den, order, None)
    else:
        scale = number_scale([v for v in num if v.scalar], [v for v in den if v.scalar], coef < 0)
        tensors = [v for v in num if not v.scalar], [v for v in den if not v.scalar]
        value = product(lw, *tensors, order, scale)
    if (
        coef < 0 and scale is None
    ):  # unary minus binds to the first (smallest) factor: no extra full pass
        return Value(f"-{value.wrap(MUL)}", value.axes, UNARY, value.scalar)
    return value


def _gated(lw: Lowerer, e: sp.Mul) -> sp.Expr | None:
    """``where(c, a, 0) x y`` -> ``where(c, a x, 0) y``; ``delta(i, X[j]) x`` -> ``where(i ==
    X[j], x, 0)``: a gate selects, it does not multiply.

    The adjoint of ``where(c, s, -inf)`` carries the gate ``where(c, 1, 0)``, and the rest of
    the product may be inf or NaN at the positions the gate drops (``sinh(-inf) / S**2`` with
    ``S = inf``); a one-hot beside ``0 * sinh(-inf)`` is the same. ``0 * nan`` is nan, so a
    0/1 mask multiplied in keeps it, where autograd's where backward and its scatters select.
    Equal as real numbers wherever the rest is finite.

    What goes inside: the factors on the gate's own axes, and every computed factor (a call,
    a power, a sum: ``0 * inf`` is made of two finite-looking factors). A plain read of a
    tensor over further axes (``probs[b, t, v]`` beside a gate over ``b, t``) stays outside,
    so the gate is taken on the small tensor and the full-size product is one pass. A gate on
    python numbers alone stays the float mask.
    """
    factors = sp.Mul.make_args(e)
    gate = next((f for f in factors if _is_gate(f)), None)
    if gate is None:
        return None
    axes = lw.scope([]).axes
    rest = [f for f in factors if f is not gate]
    inside = [f for f in rest if not (plain(f) or _is_gate(f)) or axes(f) <= axes(gate)]
    if not any(f.atoms(sp.Indexed) for f in inside):
        return None
    x = sp.Mul(*inside)
    outside = sp.Mul(*[f for f in rest if f not in inside])
    if isinstance(gate, sp.KroneckerDelta):
        return where(sp.Eq(*gate.args, evaluate=False), x, 0) * outside
    c, a, b = gate.args
    return where(c, a * x, b * x) * outside


def _is_gate(f: sp.Expr) -> bool:
    return isinstance(f, sp.KroneckerDelta) or (isinstance(f, where) and 0 in f.args[1:])


def power(lw: Lowerer, e: sp.Pow, order: list[sp.Symbol]) -> Value:
    base, exp = lw.value(e.base, order), e.exp
    if base.scalar and abs(exp) == sp.Rational(1, 2):  # sqrt(D): one python float
        lw.modules.add("math")
        root = f"math.sqrt({base.code})"
        return Value(root, scalar=True) if exp > 0 else Value(f"1 / {root}", scalar=True, prec=MUL)
    if base.scalar:
        exponent = lw.value(exp, []).wrap(POW + 1)
        return Value(f"{base.wrap(POW + 1)} ** {exponent}", scalar=True, prec=POW)
    special = {sp.Rational(1, 2): "torch.sqrt", sp.Rational(-1, 2): "torch.rsqrt"}
    if exp in special:
        return Value(f"{special[exp]}({base.code})", base.axes)
    # torch.reciprocal and torch.square skip the python-level operator wrappers of
    # Tensor.__rtruediv__ / __pow__ (a few microseconds a call at the makemore size)
    if exp == -1:
        return Value(f"torch.reciprocal({base.code})", base.axes)
    if exp == 2:
        return Value(f"torch.square({base.code})", base.axes)
    exponent = lw.value(exp, []).wrap(POW + 1)
    return Value(f"{base.wrap(POW + 1)}**{exponent}", base.axes, POW)


def product(
    lw: Lowerer, num: list[Value], den: list[Value], order: list[sp.Symbol], scale: str | None
) -> Value:
    """Multiply the small factors first: each full-size product is a pass over the tensor.

    ``g * probs / N`` becomes ``g / N * probs``, ``bnraw * s / (N - 1)`` becomes
    ``s / (N - 1) * bnraw``; python numbers (``scale``, sign included) are folded into one
    and applied to the smallest tensor factor.
    """
    rank = lambda v: len(v.axes)  # noqa: E731
    acc: Value | None = None
    for level in sorted({rank(v) for v in num + den}):
        parts = ([acc] if acc else []) + [v for v in num if rank(v) == level]
        below = [v for v in den if rank(v) == level]
        if len(parts) == 1 and not below and (scale is None or acc is not None):
            acc = parts[0]
            continue
        axes = union([v.axes for v in parts + below], order)
        if not parts and len(below) == 1 and scale is None and not below[0].scalar:
            acc = Value(f"torch.reciprocal({below[0].code})", below[0].axes)
            continue
        code = " * ".join(align(v, axes).wrap(MUL) for v in parts) or "1"
        for d in below:
            code += f" / {align(d, axes).wrap(POW)}"
        if scale is not None and acc is None:
            code += scale
        scalar = all(v.scalar for v in parts + below)
        acc = Value(code, axes, MUL, scalar)
    return acc if acc else Value("1", scalar=True)


def call(lw: Lowerer, f: Function, args: tuple, order: list[sp.Symbol]) -> Value:
    """A row of the function registry; Max/Min of many arguments nest pairwise."""
    if f.arity == 2 and len(args) > 2:
        return call(lw, f, (args[0], f.make(*args[1:])), order)
    values = [lw.value(a, order) for a in args]
    if all(v.scalar for v in values):
        if f.python is None:
            raise DerivationError(lw.op, f"{f.name}() of a number is not supported")
        lw.modules.update({"math"} if "math." in f.python else set())
        return Value(f.python.format(*(v.code for v in values)), scalar=True)
    if f.arity == 2 and any(v.scalar for v in values):  # maximum(x, 0): a clamp
        t, c = (values[0], values[1]) if values[1].scalar else (values[1], values[0])
        bound = "min" if f.name == "maximum" else "max"
        return Value(f"torch.clamp({t.code}, {bound}={c.code})", t.axes)
    axes = union([v.axes for v in values], order)
    return Value(f.torch.format(*(align(v, axes).code for v in values)), axes)


def step(lw: Lowerer, e: sp.Heaviside, order: list[sp.Symbol]) -> Value:
    """Heaviside(x, h): a kink's derivative, torch on a tensor, python on a number (a param)."""
    arg = lw.value(e.args[0], order)
    at_zero = e.args[1] if len(e.args) > 1 else sp.Rational(1, 2)
    code = step_code(arg.wrap(ATOM), at_zero, None if arg.scalar else lw.device_of)
    prec = ATOM if code.endswith(")") else MUL
    return Value(code, arg.axes, prec, scalar=arg.scalar)
