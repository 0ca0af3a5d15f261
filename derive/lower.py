"""Lowering: an index expression becomes vectorized torch code.

Every value carries the indices that label its axes. Element-wise arithmetic becomes broadcast
torch ops (axes aligned with ``x[:, None]``); a Sum becomes a matmul when it is one, an einsum
for other two-tensor contractions, and ``.sum(dim)`` otherwise; a data index becomes a gather
(``C.index_select(0, idx)``, ``x.gather(1, t[:, None])``); a delta against a data index becomes
a ``scatter_add_`` or ``index_add_``, never a materialised one-hot. Nothing loops over elements.
Where two kernels can be one, :mod:`derive.fusion` says how. Unsupported shapes of expression
raise at generation time, naming the op.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import sympy as sp

from derive.errors import DerivationError
from derive.functions import BY_NODE, Function, step_code, where
from derive.fusion import Fusions
from derive.select import Selections
from derive.torch_code import (
    ADD,
    ATOM,
    MUL,
    POW,
    UNARY,
    AxisError,
    Value,
    align,
    canonical,
    matmul,
    memo_key,
    natural_order,
    number,
    number_scale,
    ordered_terms,
    permute,
    plain,
    position,
    scatter_delta,
    split_deltas,
    union,
)


def _is_call(e: sp.Basic) -> bool:
    """A function call worth computing once: a registry function or a step."""
    return (type(e) in BY_NODE or isinstance(e, sp.Heaviside)) and bool(e.atoms(sp.Indexed))


def _einsum_value(values: list[Value], out: tuple, order: list) -> Value:
    every = list(dict.fromkeys(list(order) + [a for v in values for a in v.axes]))
    letters = dict(zip(every, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", strict=False))
    spec = ",".join("".join(letters[x] for x in v.axes) for v in values)
    spec += "->" + "".join(letters[x] for x in out)
    return Value(f'torch.einsum("{spec}", {", ".join(v.code for v in values)})', out)


def _composite(f: sp.Expr) -> bool:
    """A factor that is element-wise work on tensors (not one tensor, not a reduction)."""
    return not plain(f) and not isinstance(f, sp.Sum) and bool(f.atoms(sp.Indexed))


def _stem(e: sp.Expr) -> str:
    return "_".join(sorted({i.base.label.name for i in e.atoms(sp.Indexed)}))


@dataclass
class Lowerer(Fusions, Selections):
    """Lowers expressions of one function body; collects the statements they need."""

    op: str
    names: dict[str, str]  # symbol name -> python expression (tensors, sizes, params)
    sizes: dict[sp.Symbol, sp.Expr]  # index -> its range (for aranges and einsum checks)
    lines: list[str] = field(default_factory=list)
    memo: dict[tuple, Value] = field(default_factory=dict)  # see recall / remember
    taken: set[str] = field(default_factory=set)
    scalars: set[str] = field(default_factory=set)  # names bound to python numbers (sizes, params)
    wrapping: set[str] = field(default_factory=set)  # int inputs read by advanced indexing
    repeated: set[sp.Expr] = field(default_factory=set)  # function calls met more than once
    bound: dict[sp.Expr, Value] = field(default_factory=dict)  # ...each computed once, here
    modules: set[str] = field(default_factory=set)  # python modules the code uses (math)

    def share(self, exprs: list[sp.Expr]) -> None:
        """Note the function calls (exp, tanh, sigmoid, ...) that occur more than once in the
        statements of this function: each is then computed once into a name and reused."""
        seen: set[sp.Expr] = set()
        for e in exprs:
            for node in sp.preorder_traversal(e):
                if _is_call(node):
                    (self.repeated if node in seen else seen).add(node)

    device_of: str = "grad_out"  # a tensor whose device/dtype new tensors take

    # -- entry points -----------------------------------------------------------------------
    def assign(self, name: str, expr: sp.Expr, axes: tuple[sp.Symbol, ...], dims: tuple) -> None:
        """Emit ``name = <expr>`` with axes in ``axes`` order (one-hots and scatters included)."""
        try:
            self._assign(name, expr, axes, dims)
        except (AxisError, ValueError) as exc:  # a shape the lowering cannot do: say so, clearly
            raise DerivationError(self.op, f"cannot lower {name} = {expr}: {exc}") from None

    def _assign(self, name: str, expr: sp.Expr, axes: tuple[sp.Symbol, ...], dims: tuple) -> None:
        self.taken.add(name)
        self.sizes.update(zip(axes, dims, strict=True))
        expr = self.slice_constants(expr)
        if not expr.has(sp.KroneckerDelta):
            return self._assign_plain(name, expr, axes)
        if self._stack(name, expr, axes):
            return None
        state = (len(self.lines), dict(self.memo), set(self.taken), set(self.wrapping))
        bound = dict(self.bound)
        try:
            return self._assign_scatter(name, expr, axes)
        except (DerivationError, AxisError, ValueError):
            # no index_add_/scatter_add_ form: the deltas become equality masks, which is
            # always right (and costs a tensor over their axes); undo the attempt first
            del self.lines[state[0] :]
            self.memo, self.taken, self.wrapping = state[1], state[2], state[3]
            self.bound = bound
            value = self._materialise(self._checked(expr, axes, name), axes, fresh=False)
            self.lines.append(f"{name} = {value}")

    def _assign_scatter(self, name: str, expr: sp.Expr, axes: tuple) -> None:
        if isinstance(expr, sp.Sum) and scatter_delta(expr, axes) is not None:
            return self._scatter(name, expr, axes)
        plain, picks = split_deltas(expr, axes)
        value = self._materialise(self._checked(plain, axes, name), axes, fresh=bool(picks))
        self.lines.append(f"{name} = {value}")
        for coef, axis, data in picks:
            self._pick_update(name, coef, axis, data, axes)

    def _assign_plain(self, name: str, expr: sp.Expr, axes: tuple) -> None:
        if isinstance(expr, sp.Sum) and self.recall(expr) is None:
            self._sum(expr, list(axes), name=name)
            stored = self.recall(expr)  # bound to ``name`` in the order it came out
            if stored.axes != axes:  # permuted, and broadcast over axes it does not depend on
                stored = self._exact(stored, axes, name, partial=True)
                self.lines.append(f"{name} = {self._materialise(stored, axes, fresh=False)}")
                self.remember(expr, Value(name, axes))
            return
        value = self._materialise(self._checked(expr, axes, name), axes, fresh=False)
        self.lines.append(f"{name} = {value}")

    def _checked(self, e: sp.Expr, axes: tuple, name: str) -> Value:
        value = self.value(e, list(axes))
        return value if value.scalar else self._exact(value, axes, name, partial=True)

    def _exact(self, v: Value, axes: tuple, name: str, partial: bool = False) -> Value:
        """``v`` permuted to ``axes`` (all of them unless ``partial``): the one guard that an
        assignment's axis order is the target's, whatever order the lowering found it in."""
        try:
            out = permute(v, axes)
        except AxisError as exc:
            raise DerivationError(self.op, f"cannot lower {name}: {exc}") from None
        if not partial and out.axes != axes:
            raise DerivationError(self.op, f"cannot lower {name}: axes {out.axes} for {axes}")
        return out

    def value(self, e: sp.Expr, order: list[sp.Symbol]) -> Value:
        e = sp.sympify(e)
        if e in self.repeated:
            if e not in self.bound:
                v = self._value(e, order)
                if not v.scalar:
                    name = self._name(f"{type(e).__name__.lower()}_{_stem(e)}")
                    self.lines.append(f"{name} = {v.code}")
                    v = Value(name, v.axes)
                self.bound[e] = v
            return self._permuted(self.bound[e], order)
        return self._value(e, order)

    def _value(self, e: sp.Expr, order: list[sp.Symbol]) -> Value:
        if e.is_Number:  # "1 / 3" binds like a product: parenthesised where that matters
            prec = UNARY if e < 0 else ATOM if e.is_Integer or e.is_Float else MUL
            return Value(number(e), scalar=True, prec=prec)
        if e.is_number:  # pi, sqrt(2/pi): one python float, rounded once from SymPy's value
            return Value(number(e), scalar=True, prec=ATOM if e >= 0 else UNARY)
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
        if isinstance(e, sp.Heaviside):
            return self._step(e, order)
        if isinstance(e, sp.KroneckerDelta):
            return self._mask(e, order)
        if isinstance(e, sp.core.relational.Relational):
            return self._relation(e, order)
        if isinstance(e, where):
            return self._where(e, order)
        if e.func in BY_NODE:
            return self._function(BY_NODE[e.func], e.args, order)
        raise DerivationError(self.op, f"cannot lower {e} ({type(e).__name__}) to torch")

    def _function(self, f: Function, args: tuple, order: list[sp.Symbol]) -> Value:
        """A row of the function registry; Max/Min of many arguments nest pairwise."""
        if f.arity == 2 and len(args) > 2:
            return self._function(f, (args[0], f.make(*args[1:])), order)
        values = [self.value(a, order) for a in args]
        if all(v.scalar for v in values):
            if f.python is None:
                raise DerivationError(self.op, f"{f.name}() of a number is not supported")
            self.modules.update({"math"} if "math." in f.python else set())
            return Value(f.python.format(*(v.code for v in values)), scalar=True)
        if f.arity == 2 and any(v.scalar for v in values):  # maximum(x, 0): a clamp
            t, c = (values[0], values[1]) if values[1].scalar else (values[1], values[0])
            bound = "min" if f.name == "maximum" else "max"
            return Value(f"torch.clamp({t.code}, {bound}={c.code})", t.axes)
        axes = union([v.axes for v in values], order)
        return Value(f.torch.format(*(align(v, axes).code for v in values)), axes)

    def _step(self, e: sp.Heaviside, order: list[sp.Symbol]) -> Value:
        arg = self.value(e.args[0], order)
        if arg.scalar:
            raise DerivationError(self.op, f"a step of a number is not supported: {e}")
        at_zero = e.args[1] if len(e.args) > 1 else sp.Rational(1, 2)
        code = step_code(arg.wrap(ATOM), at_zero, self.device_of)
        return Value(code, arg.axes, ATOM if code.endswith(")") else MUL)

    def _mask(self, e: sp.KroneckerDelta, order: list[sp.Symbol]) -> Value:
        """delta(a, b) -> (a == b): an equality mask over the axes of a and b."""
        a, b = (self._index_value(x, order) for x in e.args)
        axes = union([a.axes, b.axes], order)
        left, right = (align(v, axes).wrap(MUL) for v in (a, b))
        return Value(f"({left} == {right}).to({self.device_of}.dtype)", axes)

    def _index_value(self, x: sp.Expr, order: list[sp.Symbol]) -> Value:
        """An index as a value: a plain index is arange over its range."""
        if self._is_axis(x) and x in self.sizes:
            return self._arange(x, self.sizes[x])
        return self.value(x, order)

    def _arange(self, axis: sp.Symbol, size: sp.Expr) -> Value:
        code = f"torch.arange({self.value(size, []).code}, device={self.device_of}.device)"
        return Value(code, (axis,))

    def _gather(self, name: str, e: sp.Indexed, order: list[sp.Symbol]) -> Value:
        """x[i, t[i, s], s] or x[i, i]: advanced indexing, one broadcast index per subscript.

        Advanced indexing wraps negative indices, so the data tensors used here are recorded
        (``wrapping``) and their range is checked before every forward.
        """
        parts = []
        for pos, sub in enumerate(e.indices):
            if self._is_axis(sub):
                parts.append(self._arange(sub, e.base.shape[pos]))
                self.sizes.setdefault(sub, e.base.shape[pos])
            else:
                parts.append(self.value(sub, order))
                self.wrapping.update(i.base.label.name for i in sub.atoms(sp.Indexed))
        axes = union([p.axes for p in parts], order)
        return Value(f"{name}[{', '.join(align(p, axes).code for p in parts)}]", axes)

    # -- leaves -----------------------------------------------------------------------------
    def _symbol(self, s: sp.Symbol) -> Value:
        if s.name not in self.names:
            raise DerivationError(self.op, f"'{s}' has no value in the generated function")
        return Value(self.names[s.name], (), ATOM, scalar=s.name in self.scalars)

    def _is_axis(self, i: sp.Expr) -> bool:
        """An index symbol, not a value with a name (a scalar Max's argmax is data)."""
        return isinstance(i, sp.Symbol) and bool(i.is_integer) and i.name not in self.scalars

    def _indexed(self, e: sp.Indexed, order: list[sp.Symbol]) -> Value:
        name = self.names.get(e.base.label.name, e.base.label.name)
        idx = e.indices
        if not all(self._is_axis(i) or isinstance(i, sp.Indexed) for i in idx):
            return self._gather(name, e, order)
        if all(isinstance(i, sp.Symbol) for i in idx):
            if len(set(idx)) != len(idx):  # a diagonal, x[i, i]
                return self._gather(name, e, order)
            return self._permuted(Value(name, tuple(idx)), order)
        data = [k for k, i in enumerate(idx) if not isinstance(i, sp.Symbol)]
        plain_rest = set(idx[1:]).isdisjoint(idx[0].free_symbols) and len(set(idx[1:])) == len(
            idx[1:]
        )
        if (
            data == [0]
            and isinstance(idx[0], sp.Indexed)
            and all(self._is_axis(i) for i in idx[0].indices)
            and plain_rest
            and len(set(idx[0].indices)) == len(idx[0].indices)
        ):
            # C[X[n, t], e] -> C.index_select(0, X): unlike C[X] it rejects negative indices;
            # X is read in its stored axis order, so its shape is its declared one
            pick = Value(self.names.get(idx[0].base.label.name, str(idx[0].base)), idx[0].indices)
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
        return self._gather(name, e, order)

    def _permuted(self, v: Value, order: list[sp.Symbol]) -> Value:
        """``v`` with its axes in ``order``'s order (axes ``order`` lacks go last)."""
        return permute(v, tuple(sorted(v.axes, key=position(order))))

    # -- arithmetic -------------------------------------------------------------------------
    def _add(self, e: sp.Add, order: list[sp.Symbol]) -> Value:
        fused = self._addmm(e, order)
        if fused is None:
            fused = self._addcmul(e, order)
        if fused is not None:
            return fused
        terms = [self.value(t, order) for t in ordered_terms(e)]
        axes = union([t.axes for t in terms], order)
        code = align(terms[0], axes).code if terms[0].prec >= ADD else terms[0].code
        for term in ordered_terms(e)[1:]:
            if term.could_extract_minus_sign():
                code += f" - {align(self.value(-term, order), axes).wrap(MUL + 1)}"
            else:
                code += f" + {align(self.value(term, order), axes).wrap(ADD)}"
        return Value(code, axes, ADD, scalar=all(t.scalar for t in terms))

    def _mul(self, e: sp.Mul, order: list[sp.Symbol]) -> Value:
        fused = self._mean(e, order)
        if fused is None:
            fused = self._distribute(e, order)
        if fused is not None:
            return fused
        coef, rest = e.as_coeff_Mul()
        num, den = [], []
        constant = sp.Mul(*[f for f in sp.Mul.make_args(rest) if f.is_number])
        if constant != 1:  # sqrt(2)/sqrt(pi): one float, not python arithmetic at run time
            num.append(self.value(constant, order))
        for f in sp.Mul.make_args(rest):
            if f.is_number:
                continue
            if isinstance(f, sp.Pow) and f.exp.is_number and f.exp < 0:
                den.append(self.value(f.base ** (-f.exp), order))
            else:
                num.append(self.value(f, order))
        if coef.is_Rational and coef.q != 1:
            den.append(Value(str(coef.q), scalar=True))
            coef = sp.Integer(coef.p)
        if abs(coef) != 1:
            num.insert(0, Value(number(abs(coef)), scalar=True))
        scale = None
        if all(v.scalar for v in num + den):
            value = self._product(num, den, order, None)
        else:
            scale = number_scale(
                [v for v in num if v.scalar], [v for v in den if v.scalar], coef < 0
            )
            tensors = [v for v in num if not v.scalar], [v for v in den if not v.scalar]
            value = self._product(*tensors, order, scale)
        if (
            coef < 0 and scale is None
        ):  # unary minus binds to the first (smallest) factor: no extra full pass
            return Value(f"-{value.wrap(MUL)}", value.axes, UNARY, value.scalar)
        return value

    def _pow(self, e: sp.Pow, order: list[sp.Symbol]) -> Value:
        base, exp = self.value(e.base, order), e.exp
        if base.scalar and abs(exp) == sp.Rational(1, 2):  # sqrt(D): one python float
            self.modules.add("math")
            root = f"math.sqrt({base.code})"
            return Value(
                root if exp > 0 else f"1 / {root}", scalar=True, prec=ATOM if exp > 0 else MUL
            )
        if base.scalar:
            power = self.value(exp, []).wrap(POW + 1)
            return Value(f"{base.wrap(POW + 1)} ** {power}", scalar=True, prec=POW)
        special = {sp.Rational(1, 2): "torch.sqrt", sp.Rational(-1, 2): "torch.rsqrt"}
        if exp in special:
            return Value(f"{special[exp]}({base.code})", base.axes)
        # torch.reciprocal and torch.square skip the python-level operator wrappers of
        # Tensor.__rtruediv__ / __pow__ (a few microseconds a call at the makemore size)
        if exp == -1:
            return Value(f"torch.reciprocal({base.code})", base.axes)
        if exp == 2:
            return Value(f"torch.square({base.code})", base.axes)
        power = self.value(exp, []).wrap(POW + 1)
        return Value(f"{base.wrap(POW + 1)}**{power}", base.axes, POW)

    # -- reductions -------------------------------------------------------------------------
    def recall(self, e: sp.Expr) -> Value | None:
        """The tensor computed for ``e`` (under any names of its indices), on e's axes."""
        key, rename = canonical(e)
        v = self.memo.get(("renamed", key))
        if v is None:
            return self.memo.get(("named", memo_key(e)))  # remembered under its own names
        back = {p: a for a, p in rename.items()}
        return Value(v.code, tuple(back[a] for a in v.axes), v.prec, v.scalar)

    def remember(self, e: sp.Expr, v: Value) -> None:
        """Remember ``v`` as the value of ``e``: under any index names when its axes are
        exactly e's free indices, else (broadcast, or axes labelled by data) under e's own."""
        key, rename = canonical(e)
        if set(v.axes) == set(rename):
            axes = tuple(rename[a] for a in v.axes)
            self.memo[("renamed", key)] = Value(v.code, axes, v.prec, v.scalar)
        else:
            self.memo[("named", memo_key(e))] = v

    def _sum(self, e: sp.Sum, order: list[sp.Symbol], name: str | None = None) -> Value:
        known = self.recall(e)
        if known is not None:
            return self._permuted(known, order)
        bound = [lim[0] for lim in e.limits]
        self.sizes.update({var: hi - lo + 1 for var, lo, hi in e.limits})
        inner = natural_order(e.function, order)
        value = self._partly_known(e, order)
        if value is None:
            value = self._contraction(e.function, bound, list(dict.fromkeys(list(order) + inner)))
        if value is None:
            value = self._summed(e.function, bound, inner, e)
        name = name or self._temp(e)
        self.lines.append(f"{name} = {value.code}")
        self.remember(e, Value(name, value.axes))
        return self._permuted(Value(name, value.axes), order)

    def _summed(self, body: sp.Expr, bound: list, inner: list, e: sp.Expr) -> Value:
        """sum over ``bound`` of the element-wise body: ``body.sum(dims)``."""
        value = self.value(body, inner)
        missing = [b for b in bound if b not in value.axes]
        if missing:
            raise DerivationError(self.op, f"sum over unused index {missing} in {e}")
        dims = ", ".join(str(value.axes.index(b)) for b in bound)
        code = f"{value.wrap(ATOM)}.sum({'(' + dims + ')' if len(bound) > 1 else dims})"
        return Value(code, tuple(a for a in value.axes if a not in bound))

    def _partly_known(self, e: sp.Sum, order: list[sp.Symbol]) -> Value | None:
        """sum_{b,t,t1} f with sum_t1 f computed already (dq, then dbq = sum_{b,t} dq): the
        remaining indices are summed off the known tensor, not the whole body again."""
        limits = list(e.limits)
        for size in range(len(limits) - 1, 0, -1):
            for part in itertools.combinations(limits, size):
                known = self.recall(sp.Sum(e.function, *part))
                if known is not None:
                    rest = [lim[0] for lim in limits if lim not in part]
                    dims = ", ".join(str(known.axes.index(b)) for b in rest)
                    code = f"{known.code}.sum({'(' + dims + ')' if len(rest) > 1 else dims})"
                    return Value(code, tuple(a for a in known.axes if a not in rest))
        return None

    def _contraction(self, body: sp.Expr, bound: list, order: list) -> Value | None:
        """sum_k A[.., k] B[k, ..] -> A @ B (or an einsum), when body is two plain tensors;
        a product of three or more tensors (or reductions) -> one einsum, which contracts pair
        by pair instead of materialising the broadcast product of all of them."""
        coef, rest = body.as_coeff_Mul()
        factors = sp.Mul.make_args(rest)
        if any(_composite(f) for f in factors):
            return self._grouped(body, bound, order)
        if coef != 1 or len(factors) < 2:
            return None
        if len(factors) > 2 or any(isinstance(f, sp.Sum) for f in factors):
            return self._einsum(factors, bound, order)
        if not all(plain(f) for f in factors):
            return None
        if not all(self._is_axis(i) for f in factors for i in f.indices):
            return None
        a, b = (self._indexed(f, list(f.indices)) for f in factors)
        shared = set(a.axes) & set(b.axes)
        out = tuple(x for x in order if x in (set(a.axes) | set(b.axes)) - set(bound))
        if not set(bound) <= shared and set(bound) <= set(a.axes) | set(b.axes):
            # an index of one side alone is summed too: sum_{b,t,c} W[h,d,c] g[b,t,c], one einsum
            return _einsum_value([a, b], out, order)
        if not set(bound) <= shared or not (set(a.axes) - shared) or not (set(b.axes) - shared):
            return None
        mm = matmul(a, b, bound, out)
        return mm if mm is not None else _einsum_value([a, b], out, order)

    def _grouped(self, body: sp.Expr, bound: list, order: list) -> Value | None:
        """sum_k E(..k..) A[k, ..] with E element-wise (a product with sums, differences):
        E is computed once into a tensor of its own axes, then contracted by matmul/einsum.

        The softmax backward inside attention, ``sum_t2 P (dP - rowsum(dP P)) k``, becomes
        ``dS = P * (dP - rowsum)`` and ``dS @ k``: never the broadcast product over all the
        indices at once. E takes the factors that live on its axes (P beside dP - rowsum) and
        the numbers; it is remembered, so dq's and dk's sums share one dS.
        """
        factors = sp.Mul.make_args(body)
        grouped = [f for f in factors if _composite(f) or not f.atoms(sp.Indexed)]
        axes = {i for f in grouped for i in f.free_symbols if self._is_axis(i)}
        grouped += [f for f in factors if plain(f) and set(f.indices) <= axes]
        if len(grouped) == len(factors):
            return None  # nothing to contract with: an element-wise body summed
        product = sp.Mul(*grouped)
        if not all(self._is_axis(i) for f in product.atoms(sp.Indexed) for i in f.indices):
            return None  # a gather inside: its axes are data, not indices to contract over
        known = self.recall(product)
        if known is None:
            value = self.value(product, order)
            if value.scalar:
                return None
            name = self._name("t_" + _stem(product))
            self.lines.append(f"{name} = {value.code}")
            known = Value(name, value.axes)
            self.remember(product, known)
        temp = sp.IndexedBase(known.code, real=True)[known.axes]
        self.names.setdefault(known.code, known.code)
        rest = sp.Mul(temp, *[f for f in factors if f not in grouped])
        value = self._contraction(rest, bound, order)
        return value if value is not None else self._summed(rest, bound, order, body)

    def _einsum(self, factors: tuple, bound: list, order: list) -> Value | None:
        if not all(plain(f) or isinstance(f, sp.Sum) for f in factors):
            return None  # element-wise work first: not a pure contraction
        if not all(self._is_axis(i) for f in factors if plain(f) for i in f.indices):
            return None
        values = [
            self._indexed(f, list(f.indices)) if plain(f) else self.value(f, order) for f in factors
        ]
        if any(v.scalar for v in values) or not set(bound) <= {a for v in values for a in v.axes}:
            return None
        out = tuple(x for x in order if x in {a for v in values for a in v.axes} - set(bound))
        return _einsum_value(values, out, order)

    def _temp(self, e: sp.Sum) -> str:
        return self._name("sum_" + _stem(e))

    def _name(self, stem: str) -> str:
        names = (stem if k == 0 else f"{stem}_{k}" for k in itertools.count())
        name = next(n for n in names if n not in self.taken)
        self.taken.add(name)
        return name

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
            return f"{align(v, axes).wrap(ATOM)}.expand({shape}).clone()"
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
                index.append(align(self.value(data, others), tuple(others)).code)
            else:
                aligned = align(
                    Value(f"torch.arange({self._size(a)}, device={name}.device)", (a,)),
                    tuple(others),
                )
                index.append(aligned.code)
        sign, coef = ("-", -coef) if coef.could_extract_minus_sign() else ("+", coef)
        value = align(self.value(coef, others), tuple(others))
        self.lines.append(f"{name}[{', '.join(index)}] {sign}= {value.code}")

    def _scatter(self, name: str, e: sp.Sum, axes: tuple) -> None:
        delta, axis, data = scatter_delta(e, axes)
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
