"""Lowering: an index expression becomes vectorized torch code.

Every value carries the indices that label its axes. Element-wise arithmetic becomes broadcast
torch ops (axes aligned with ``x[:, None]``); a Sum becomes a matmul when it is one, an einsum
for other two-tensor contractions, and ``.sum(dim)`` otherwise; a data index becomes a gather
(``C[idx]``, ``x.gather(1, t[:, None])``); a delta against a data index becomes an indexed
update or ``index_add_``, never a materialised one-hot. Nothing loops over elements.
Unsupported shapes of expression raise at generation time, naming the op.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import sympy as sp

from derive.errors import DerivationError

ATOM, POW, UNARY, MUL, ADD = 100, 40, 30, 20, 10
FUNCS = {
    sp.exp: "torch.exp",
    sp.log: "torch.log",
    sp.tanh: "torch.tanh",
    sp.sin: "torch.sin",
    sp.cos: "torch.cos",
    sp.sinh: "torch.sinh",
    sp.cosh: "torch.cosh",
    sp.Abs: "torch.abs",
    sp.sign: "torch.sign",
}
SCALAR_FUNCS = {sp.exp: "math.exp", sp.log: "math.log", sp.tanh: "math.tanh"}


@dataclass(frozen=True)
class Value:
    """Torch (or python-scalar) code and the indices labelling its axes, in order."""

    code: str
    axes: tuple[sp.Symbol, ...] = ()
    prec: int = ATOM
    scalar: bool = False  # a python number or size expression, not a tensor
    operands: tuple[str, str] | None = None  # a matmul's two sides, for fusing a bias in

    def wrap(self, prec: int) -> str:
        return f"({self.code})" if self.prec < prec else self.code


@dataclass
class Lowerer:
    """Lowers expressions of one function body; collects the statements they need."""

    op: str
    names: dict[str, str]  # symbol name -> python expression (tensors, sizes, params)
    sizes: dict[sp.Symbol, sp.Expr]  # index -> its range (for aranges and einsum checks)
    lines: list[str] = field(default_factory=list)
    memo: dict[sp.Expr, Value] = field(default_factory=dict)
    taken: set[str] = field(default_factory=set)
    scalars: set[str] = field(default_factory=set)  # names bound to python numbers (sizes, params)
    device_of: str = "grad_out"  # a tensor whose device/dtype new tensors take

    # -- entry points -----------------------------------------------------------------------
    def assign(self, name: str, expr: sp.Expr, axes: tuple[sp.Symbol, ...], dims: tuple) -> None:
        """Emit ``name = <expr>`` with axes in ``axes`` order (one-hots and scatters included)."""
        self.taken.add(name)
        self.sizes.update(zip(axes, dims, strict=True))
        if isinstance(expr, sp.Sum) and _scatter_delta(expr, axes) is not None:
            return self._scatter(name, expr, axes)
        if isinstance(expr, sp.Sum) and _memo_key(expr) not in self.memo:
            value = self._sum(expr, list(axes), name=name)
            if value.axes == axes:
                return
            self.lines.append(f"{name} = {_align(value, axes).code}")
            return
        plain, picks = _split_deltas(expr, axes)
        value = self._materialise(self.value(plain, list(axes)), axes, fresh=bool(picks))
        self.lines.append(f"{name} = {value}")
        for coef, axis, data in picks:
            self._pick_update(name, coef, axis, data, axes)

    def value(self, e: sp.Expr, order: list[sp.Symbol]) -> Value:
        e = sp.sympify(e)
        if e.is_Number:
            return Value(_number(e), scalar=True, prec=ATOM if e >= 0 else UNARY)
        if isinstance(e, sp.Symbol):
            return self._symbol(e)
        if isinstance(e, sp.Indexed):
            return self._indexed(e, order)
        if isinstance(e, sp.Add):
            return self._add(e, order)
        if isinstance(e, sp.Mul):
            return self._mul(e, order)
        if isinstance(e, sp.Pow):
            return self._pow(e, order)
        if isinstance(e, sp.Sum):
            return self._sum(e, order)
        if e.func in FUNCS and len(e.args) == 1:
            arg = self.value(e.args[0], order)
            if arg.scalar:
                return Value(f"{SCALAR_FUNCS[e.func]}({arg.code})", scalar=True)
            return Value(f"{FUNCS[e.func]}({arg.code})", arg.axes)
        raise DerivationError(self.op, f"cannot lower {e} ({type(e).__name__}) to torch")

    # -- leaves -----------------------------------------------------------------------------
    def _symbol(self, s: sp.Symbol) -> Value:
        if s.name not in self.names:
            raise DerivationError(self.op, f"'{s}' has no value in the generated function")
        return Value(self.names[s.name], (), ATOM, scalar=s.name in self.scalars)

    def _indexed(self, e: sp.Indexed, order: list[sp.Symbol]) -> Value:
        name = self.names.get(e.base.label.name, e.base.label.name)
        idx = e.indices
        if all(isinstance(i, sp.Symbol) for i in idx):
            if len(set(idx)) != len(idx):
                raise DerivationError(self.op, f"repeated index in {e} (a diagonal) is unsupported")
            return self._permuted(Value(name, tuple(idx)), order)
        data = [k for k, i in enumerate(idx) if not isinstance(i, sp.Symbol)]
        if data == [0] and isinstance(idx[0], sp.Indexed):
            # C[X[n, t], e] -> C.index_select(0, X): unlike C[X] it rejects negative indices
            pick = self._indexed(idx[0], order)
            axes = pick.axes + tuple(idx[1:])
            if len(pick.axes) == 1:
                return self._permuted(Value(f"{name}.index_select(0, {pick.code})", axes), order)
            shape = ", ".join(self.value(x, []).code for x in idx[0].base.shape + e.base.shape[1:])
            flat = f"{pick.wrap(ATOM)}.reshape(-1)"
            code = f"{name}.index_select(0, {flat}).reshape({shape})"
            return self._permuted(Value(code, axes), order)
        if data == [len(idx) - 1] and isinstance(idx[-1], sp.Indexed):
            # x[n, t[n]] -> x.gather(1, t[:, None]).squeeze(1)
            pick = self.value(idx[-1], list(idx[:-1]))
            if pick.axes == tuple(idx[:-1]):
                k = len(idx) - 1
                code = f"{name}.gather({k}, {pick.wrap(ATOM)}.unsqueeze({k})).squeeze({k})"
                return self._permuted(Value(code, tuple(idx[:-1])), order)
        raise DerivationError(self.op, f"unsupported data-dependent subscript pattern {e}")

    def _permuted(self, v: Value, order: list[sp.Symbol]) -> Value:
        want = tuple(sorted(v.axes, key=_position(order)))
        if want == v.axes:
            return v
        if len(v.axes) == 2:
            return Value(f"{v.wrap(ATOM)}.T", want)
        perm = ", ".join(str(v.axes.index(a)) for a in want)
        return Value(f"{v.wrap(ATOM)}.permute({perm})", want)

    # -- arithmetic -------------------------------------------------------------------------
    def _add(self, e: sp.Add, order: list[sp.Symbol]) -> Value:
        fused = self._addmm(e, order)
        if fused is None:
            fused = self._addcmul(e, order)
        if fused is not None:
            return fused
        terms = [self.value(t, order) for t in _ordered_terms(e)]
        axes = _union([t.axes for t in terms], order)
        code = _align(terms[0], axes).code if terms[0].prec >= ADD else terms[0].code
        for term in _ordered_terms(e)[1:]:
            if term.could_extract_minus_sign():
                code += f" - {_align(self.value(-term, order), axes).wrap(MUL + 1)}"
            else:
                code += f" + {_align(self.value(term, order), axes).wrap(ADD)}"
        return Value(code, axes, ADD, scalar=all(t.scalar for t in terms))

    def _addcmul(self, e: sp.Add, order: list[sp.Symbol]) -> Value | None:
        """r + c * a * b -> torch.addcmul(r, a, b, value=c): one pass instead of two."""
        best = None
        for term in e.args:
            coef, rest = term.as_coeff_Mul()
            factors = sp.Mul.make_args(rest)
            values = [self.value(f, order) for f in factors]
            if len(factors) < 2 or any(v.scalar for v in values[-1:]):
                continue
            big = max(range(len(factors)), key=lambda k: len(values[k].axes))
            if factors[big].is_Pow and factors[big].exp.is_negative:
                continue
            key = (len(values[big].axes), coef != 1)  # the biggest pass; absorb a coefficient
            if best is None or key > best[0]:
                small = sp.Mul(*factors[:big], *factors[big + 1 :])
                best = (key, term, coef, small, values[big])
        if best is None:
            return None
        _, term, coef, small, big = best
        r, a = self.value(e - term, order), self.value(small, order)
        if r.scalar or a.scalar:
            return None
        axes = _union([r.axes, a.axes, big.axes], order)
        value = "" if coef == 1 else f", value={_number(coef)}"
        args = ", ".join(_align(v, axes).code for v in (r, a, big))
        return Value(f"torch.addcmul({args}{value})", axes)

    def _addmm(self, e: sp.Add, order: list[sp.Symbol]) -> Value | None:
        """b[m] + sum_k x[n, k] W[k, m] -> torch.addmm(b, x, W): the bias rides in the matmul."""
        sums = [t for t in e.args if isinstance(t, sp.Sum) and _memo_key(t) not in self.memo]
        if len(sums) != 1:
            return None
        bound = [lim[0] for lim in sums[0].limits]
        mm = self._contraction(sums[0].function, bound, order)
        if mm is None or mm.operands is None:
            return None
        rest = self.value(e - sums[0], order)
        if rest.scalar or not set(rest.axes) <= set(mm.axes):
            return None
        self.sizes.update({var: hi - lo + 1 for var, lo, hi in sums[0].limits})
        left, right = mm.operands
        return Value(f"torch.addmm({_align(rest, mm.axes).code}, {left}, {right})", mm.axes)

    def _mul(self, e: sp.Mul, order: list[sp.Symbol]) -> Value:
        fused = self._mean(e, order)
        if fused is None:
            fused = self._distribute(e, order)
        if fused is not None:
            return fused
        coef, rest = e.as_coeff_Mul()
        num, den = [], []
        for f in sp.Mul.make_args(rest):
            if isinstance(f, sp.Pow) and f.exp.is_number and f.exp < 0:
                den.append(self.value(f.base ** (-f.exp), order))
            else:
                num.append(self.value(f, order))
        if coef.is_Rational and coef.q != 1:
            den.append(Value(str(coef.q), scalar=True))
            coef = sp.Integer(coef.p)
        if abs(coef) != 1:
            num.insert(0, Value(_number(abs(coef)), scalar=True))
        scale = None
        if all(v.scalar for v in num + den):
            value = self._product(num, den, order, None)
        else:
            scale = _scale([v for v in num if v.scalar], [v for v in den if v.scalar], coef < 0)
            tensors = [v for v in num if not v.scalar], [v for v in den if not v.scalar]
            value = self._product(*tensors, order, scale)
        if (
            coef < 0 and scale is None
        ):  # unary minus binds to the first (smallest) factor: no extra full pass
            return Value(f"-{value.wrap(MUL)}", value.axes, UNARY, value.scalar)
        return value

    def _product(
        self, num: list[Value], den: list[Value], order: list[sp.Symbol], scale: str | None
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
            axes = _union([v.axes for v in parts + below], order)
            if not parts and len(below) == 1 and scale is None and not below[0].scalar:
                acc = Value(f"torch.reciprocal({below[0].code})", below[0].axes)
                continue
            code = " * ".join(_align(v, axes).wrap(MUL) for v in parts) or "1"
            for d in below:
                code += f" / {_align(d, axes).wrap(POW)}"
            if scale is not None and acc is None:
                code += scale
            scalar = all(v.scalar for v in parts + below)
            acc = Value(code, axes, MUL, scalar)
        return acc if acc else Value("1", scalar=True)

    def _mean(self, e: sp.Mul, order: list[sp.Symbol]) -> Value | None:
        """Sum(x[n, m], n) / N -> x.mean(0) when N is the summed extent: one kernel, not two."""
        sums = [f for f in e.args if isinstance(f, sp.Sum)]
        if len(sums) != 1 or _memo_key(sums[0]) in self.memo:
            return None  # a sum computed already is reused, not recomputed as a mean
        bound = [lim[0] for lim in sums[0].limits]
        extent = sp.Mul(*[hi - lo + 1 for _, lo, hi in sums[0].limits])
        inner = _natural_order(sums[0].function, order)
        if sp.simplify(e * extent / sums[0]) != 1:
            return None
        if self._contraction(sums[0].function, bound, inner) is not None:
            return None
        self.sizes.update({var: hi - lo + 1 for var, lo, hi in sums[0].limits})
        body = self.value(sums[0].function, inner)
        if not set(bound) <= set(body.axes):
            return None
        dims = ", ".join(str(body.axes.index(b)) for b in bound)
        code = f"{body.wrap(ATOM)}.mean({'(' + dims + ')' if len(bound) > 1 else dims})"
        return self._permuted(Value(code, tuple(a for a in body.axes if a not in bound)), order)

    def _distribute(self, e: sp.Mul, order: list[sp.Symbol]) -> Value | None:
        """(c + a) * g -> c * g + a * g when that fuses: ``torch.addcmul(g, a, g, value=c)``."""
        adds = [f for f in e.args if isinstance(f, sp.Add)]
        if len(adds) != 1 or len(adds[0].args) != 2 or not adds[0].args[0].is_Number:
            return None
        other = e / adds[0]
        if self.value(other, order).scalar or self.value(adds[0], order).scalar:
            return None
        c, a = adds[0].args
        return self._addcmul(sp.Add(c * other, a * other, evaluate=False), order)

    def _pow(self, e: sp.Pow, order: list[sp.Symbol]) -> Value:
        base, exp = self.value(e.base, order), e.exp
        if base.scalar:
            return Value(f"{base.wrap(POW)} ** {_number(exp)}", scalar=True, prec=POW)
        special = {sp.Rational(1, 2): "torch.sqrt", sp.Rational(-1, 2): "torch.rsqrt"}
        if exp in special:
            return Value(f"{special[exp]}({base.code})", base.axes)
        # torch.reciprocal and torch.square skip the python-level operator wrappers of
        # Tensor.__rtruediv__ / __pow__ (a few microseconds a call at the makemore size)
        if exp == -1:
            return Value(f"torch.reciprocal({base.code})", base.axes)
        if exp == 2:
            return Value(f"torch.square({base.code})", base.axes)
        return Value(f"{base.wrap(POW + 1)}**{_number(exp)}", base.axes, POW)

    # -- reductions -------------------------------------------------------------------------
    def _sum(self, e: sp.Sum, order: list[sp.Symbol], name: str | None = None) -> Value:
        key = _memo_key(e)
        if key in self.memo:
            return self._permuted(self.memo[key], order)
        bound = [lim[0] for lim in e.limits]
        self.sizes.update({var: hi - lo + 1 for var, lo, hi in e.limits})
        inner = _natural_order(e.function, order)
        value = self._contraction(e.function, bound, inner)
        if value is None:
            body = self.value(e.function, inner)
            missing = [b for b in bound if b not in body.axes]
            if missing:
                raise DerivationError(self.op, f"sum over unused index {missing} in {e}")
            dims = ", ".join(str(body.axes.index(b)) for b in bound)
            code = f"{body.wrap(ATOM)}.sum({'(' + dims + ')' if len(bound) > 1 else dims})"
            value = Value(code, tuple(a for a in body.axes if a not in bound))
        name = name or self._temp(e)
        self.lines.append(f"{name} = {value.code}")
        self.memo[key] = Value(name, value.axes)
        return self._permuted(self.memo[key], order)

    def _contraction(self, body: sp.Expr, bound: list, order: list) -> Value | None:
        """sum_k A[.., k] B[k, ..] -> A @ B (or an einsum), when body is two plain tensors."""
        coef, rest = body.as_coeff_Mul()
        factors = sp.Mul.make_args(rest)
        if coef != 1 or len(factors) != 2 or not all(_plain(f) for f in factors):
            return None
        a, b = (self._indexed(f, list(f.indices)) for f in factors)
        shared = set(a.axes) & set(b.axes)
        if not set(bound) <= shared or not (set(a.axes) - shared) or not (set(b.axes) - shared):
            return None
        out = tuple(x for x in order if x in (set(a.axes) | set(b.axes)) - set(bound))
        mm = _matmul(a, b, bound, out)
        if mm is not None:
            return mm
        letters = dict(zip(order, "abcdefghijklmnopqrstuvwxyz", strict=False))
        spec = "".join(letters[x] for x in a.axes) + "," + "".join(letters[x] for x in b.axes)
        spec += "->" + "".join(letters[x] for x in out)
        return Value(f'torch.einsum("{spec}", {a.code}, {b.code})', out)

    def _temp(self, e: sp.Sum) -> str:
        stem = "sum_" + "_".join(sorted({i.base.label.name for i in e.atoms(sp.Indexed)}))
        for k in itertools.count():
            name = stem if k == 0 else f"{stem}_{k}"
            if name not in self.taken:
                self.taken.add(name)
                return name
        raise AssertionError  # unreachable

    # -- one-hots and scatters --------------------------------------------------------------
    def _materialise(self, v: Value, axes: tuple, fresh: bool) -> str:
        """Code for a new tensor with exactly ``axes``; fresh when it will be updated in place."""
        shape = ", ".join(self._size(a) for a in axes)
        like = f"dtype={self.device_of}.dtype, device={self.device_of}.device"
        if v.scalar and v.code == "0":
            return f"torch.zeros({shape}, {like})"
        if v.scalar:
            return f"torch.full(({shape},), {v.code}, {like})" if axes else v.code
        if v.axes != axes:
            return f"{_align(v, axes).wrap(ATOM)}.expand({shape}).clone()"
        if fresh and v.prec == ATOM:
            return f"{v.code}.clone()"
        return v.code

    def _pick_update(self, name: str, coef: sp.Expr, axis, data: sp.Indexed, axes: tuple) -> None:
        others = [a for a in axes if a != axis]
        if self._scatter_pick(name, coef, axis, data, axes):
            return
        index = []
        for a in axes:
            if a == axis:
                index.append(_align(self.value(data, others), tuple(others)).code)
            else:
                aligned = _align(
                    Value(f"torch.arange({self._size(a)}, device={name}.device)", (a,)),
                    tuple(others),
                )
                index.append(aligned.code)
        sign, coef = ("-", -coef) if coef.could_extract_minus_sign() else ("+", coef)
        value = _align(self.value(coef, others), tuple(others))
        self.lines.append(f"{name}[{', '.join(index)}] {sign}= {value.code}")

    def _scatter_pick(self, name: str, coef: sp.Expr, axis, data: sp.Indexed, axes: tuple) -> bool:
        """x[n, t[n]] += v[n] as one ``scatter_add_`` (indexing with ``-=`` is three kernels)."""
        others = tuple(a for a in axes if a != axis)
        pick, value = self.value(data, list(others)), self.value(coef, list(others))
        if pick.axes != others or value.scalar or value.axes not in (others, ()):
            return False
        pos = axes.index(axis)
        if value.axes:
            src = f"{value.wrap(ATOM)}.unsqueeze({pos})"
        else:  # one number for every row: a broadcast view, nothing copied
            shape = [self._size(a) for a in others]
            src = f"{value.wrap(ATOM)}.expand({', '.join(shape[:pos] + ['1'] + shape[pos:])})"
        index = f"{pick.wrap(ATOM)}.unsqueeze({pos})"
        self.lines.append(f"{name}.scatter_add_({pos}, {index}, {src})")
        return True

    def _scatter(self, name: str, e: sp.Sum, axes: tuple) -> None:
        delta, axis, data = _scatter_delta(e, axes)
        bound = [lim[0] for lim in e.limits]
        self.sizes.update({var: hi - lo + 1 for var, lo, hi in e.limits})
        rest = sp.Mul(*[f for f in sp.Mul.make_args(e.function) if f is not delta])
        others = [a for a in axes if a != axis]
        pos = axes.index(axis)
        src_order = others[:pos] + bound + others[pos:]
        source = self.value(rest, src_order)
        if source.axes != tuple(src_order):
            raise DerivationError(self.op, f"cannot lower the scatter {e} to index_add_")
        flat = ", ".join(
            [self._size(a) for a in others[:pos]] + ["-1"] + [self._size(a) for a in others[pos:]]
        )
        index = self.value(data, bound)
        shape = ", ".join(self._size(a) for a in axes)
        dev = f"dtype={self.device_of}.dtype, device={self.device_of}.device"
        src = source.code if len(bound) == 1 else f"{source.wrap(ATOM)}.reshape({flat})"
        idx = index.code if len(bound) == 1 else f"{index.wrap(ATOM)}.reshape(-1)"
        self.lines.append(f"{name} = torch.zeros({shape}, {dev}).index_add_({pos}, {idx}, {src})")

    def _size(self, axis: sp.Symbol) -> str:
        return self.value(self.sizes[axis], []).code


def _memo_key(e: sp.Sum) -> sp.Expr:
    # the same reduction under other bound names is the same tensor: compute it once
    rename = {lim[0]: sp.Symbol(f"_s{k}", integer=True) for k, lim in enumerate(e.limits)}
    return e.xreplace(rename)


def _scale(num: list[Value], den: list[Value], negative: bool) -> str | None:
    """The python-number part of a product, as one operation on the smallest tensor factor."""
    if not num and not den:
        return None
    if not negative and len(num) + len(den) == 1:
        return f" * {num[0].wrap(MUL)}" if num else f" / {den[0].wrap(POW)}"
    code = " * ".join(v.wrap(MUL) for v in num) or "1"
    code += "".join(f" / {d.wrap(POW)}" for d in den)
    return f" * ({'-' if negative else ''}{code})"


def _natural_order(body: sp.Expr, order: list[sp.Symbol]) -> list[sp.Symbol]:
    """Axes in the order the body's largest tensor stores them, so sums need no transpose."""
    leaves = [i for i in body.atoms(sp.Indexed) if _plain(i)]
    if not leaves:
        return list(order)
    widest = max(leaves, key=lambda i: (len(i.indices), sp.default_sort_key(i)))
    natural = list(widest.indices)
    return (
        natural
        + [a for a in order if a not in natural]
        + [
            a
            for a in sorted(body.free_symbols - set(natural) - set(order), key=str)
            if a.is_integer and not a.is_positive
        ]
    )


def _number(x: sp.Expr) -> str:
    if x.is_Integer:
        return str(int(x))
    if x.is_Rational:
        return f"{x.p} / {x.q}"
    return repr(float(x))


def _position(order: list[sp.Symbol]):
    return lambda a: order.index(a) if a in order else len(order)


def _union(groups: list[tuple], order: list[sp.Symbol]) -> tuple:
    return tuple(sorted({a for g in groups for a in g}, key=_position(order)))


def _align(v: Value, axes: tuple) -> Value:
    """Insert ``None`` for the axes ``v`` lacks, so it broadcasts against ``axes``."""
    if v.axes == axes[len(axes) - len(v.axes) :] or v.scalar:
        return v
    parts = [":" if a in v.axes else "None" for a in axes]
    while parts and parts[0] == "None":
        parts.pop(0)
    while parts and parts[-1] == ":":
        parts.pop()
    return Value(f"{v.wrap(ATOM)}[{', '.join(parts)}]", axes, ATOM)


def _plain(f: sp.Expr) -> bool:
    return isinstance(f, sp.Indexed) and all(isinstance(i, sp.Symbol) for i in f.indices)


def _matmul(a: Value, b: Value, bound: list, out: tuple) -> Value | None:
    if len(bound) != 1 or len(a.axes) != 2 or len(b.axes) != 2 or len(out) != 2:
        return None
    (k,) = bound
    for x, y in ((a, b), (b, a)):
        left = x if x.axes[1] == k else Value(f"{x.wrap(ATOM)}.T", x.axes[::-1])
        right = y if y.axes[0] == k else Value(f"{y.wrap(ATOM)}.T", y.axes[::-1])
        if (left.axes[0], right.axes[1]) == out:
            return Value(f"{left.code} @ {right.code}", out, MUL, operands=(left.code, right.code))
    return None


def _ordered_terms(e: sp.Add) -> list[sp.Expr]:
    # positive terms first reads better: a - b rather than -b + a
    terms = list(e.as_ordered_terms())
    return sorted(terms, key=lambda t: t.could_extract_minus_sign())


def _split_deltas(expr: sp.Expr, axes: tuple) -> tuple[sp.Expr, list]:
    """expr = plain + sum_t coef_t * delta(axis_t, data_t): the one-hot terms, split off."""
    if not expr.has(sp.KroneckerDelta):
        return expr, []
    plain, picks = sp.S.Zero, []
    for term in sp.Add.make_args(sp.expand_mul(expr)):
        deltas = [f for f in sp.Mul.make_args(term) if isinstance(f, sp.KroneckerDelta)]
        if not deltas:
            plain += term
            continue
        (d,) = deltas if len(deltas) == 1 else (None,)
        axis = next((x for x in d.args if x in axes), None) if d is not None else None
        data = next((x for x in d.args if isinstance(x, sp.Indexed)), None) if d else None
        if axis is None or data is None:
            raise ValueError(f"unsupported delta term {term}")
        picks.append((term / d, axis, data))
    return sp.factor_terms(plain), picks


def _scatter_delta(e: sp.Sum, axes: tuple):
    bound = {lim[0] for lim in e.limits}
    for f in sp.Mul.make_args(e.function):
        if isinstance(f, sp.KroneckerDelta):
            axis = next((x for x in f.args if x in axes and x not in bound), None)
            data = next((x for x in f.args if isinstance(x, sp.Indexed)), None)
            if axis is not None and data is not None and set(data.indices) == bound:
                return f, axis, data
    return None
