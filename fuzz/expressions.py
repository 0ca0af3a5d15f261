"""Random expressions over the indices in scope, and expressions positive by construction.

Domains are kept by construction, not by the inputs: log, sqrt, log1p, negative and fractional
powers and denominators only ever see an expression positive for every real input (``exp(g)``,
``g**2 + 1/2``, ``cosh(g)``, a Sum of positives, ...). Fast-growing functions (exp, cosh, sinh,
expm1) are never nested, so float64 values stay moderate for inputs in [-1.5, 1.5]. Which
function is which is the registry's to say (:mod:`fuzz.functions`).
"""

from __future__ import annotations

from fuzz.affine import Affine
from fuzz.leaves import PARAM_NAMES, Expr

FLOAT_CONDITION = 0.06  # an expression node that is a where() on float values
SYMBOLIC_POWER = 0.3  # --powers: a power with a param exponent, or a param raised to a tensor
EQUALITY = 0.4  # an index condition that is == or != (drawn from the equality stream)


class Expressions(Affine):
    """Expression nodes: functions, arithmetic, powers, inline sums, element-wise extremes,
    index comparisons (where(i <= j, a, b))."""

    def expr(self, scope: dict, depth: int, need: frozenset = frozenset()) -> Expr:
        """A real expression over the indices in scope that uses every index in ``need``."""
        return self.cover(self._expr(scope, depth, need), scope, need, positive=False)

    def _expr(self, scope: dict, depth: int, need: frozenset) -> Expr:
        if depth > 0 and self.later.random() < FLOAT_CONDITION:
            return self.thresholded(scope, depth - 1, need)
        if depth <= 0 or self.rng.random() < 0.2:
            return self.leaf(scope, need)
        r, d = self.rng.random(), depth - 1
        if r < 0.3:
            return self.unary(scope, d, need)
        if r < 0.6:
            a, b = self._expr(scope, d, need), self._expr(scope, d, need)
            op = self.rng.choice(["+", "-", "*", "*"])
            return Expr(f"{a.wrap()} {op} {b.wrap()}", a.used | b.used, False)
        if r < 0.7:
            a, p = self._expr(scope, d, need), self.positive(scope, d, need)
            return Expr(f"{a.wrap()} / {p.wrap()}", a.used | p.used, False)
        if r < 0.78:
            if self.exponents is not None and self.exponents.random() < SYMBOLIC_POWER:
                return self.symbolic_power(scope, d, need)
            if self.rng.random() < 0.5:
                a = self._expr(scope, d, need)
                return Expr(f"{a.wrap()}**{self.rng.choice([2, 3])}", a.used, False)
            p = self.positive(scope, d, need)
            power = self.rng.choice(["(-1)", "(-1/2)", "(1/2)", "(3/2)", "(-2)"])
            return Expr(f"{p.wrap()}**{power}", p.used, False)
        if r < 0.82 and len(scope) >= 2:
            return self.masked(scope, d, need)
        if r < 0.9 or not self.extremes:
            return self.inline_sum(scope, d, need, positive=False)
        a, b = self._expr(scope, d, need), self._expr(scope, d, need)
        f = self.rng.choice(self.extremes)
        return Expr(f"{f}({a.text}, {b.text})", a.used | b.used)

    def symbolic_power(self, scope: dict, depth: int, need: frozenset) -> Expr:
        """``relu(a)**alpha`` or ``alpha**a``, alpha a param: an exponent that is not a number,
        which SymPy differentiates as ``b**e (e' log b + e b'/b)``, 0 * inf at b = 0 (half of
        a relu's entries) where torch's pow backward is finite. ``--powers`` only: drawn in
        place of a numeric power, it changes the op of the seed."""
        alpha = self.exponent_param()
        a = self._expr(scope, depth, need)
        if self.exponents.random() < 0.6:
            return Expr(f"relu({a.text})**{alpha}", a.used, False)
        return Expr(f"{alpha}**({a.text})", a.used, False)

    def exponent_param(self) -> str:
        """A param of the op (a new one while there are fewer than two): exponents of 1.5 and
        up have a finite derivative at a base of 0, and a second one at 2 and up."""
        if self.params and (len(self.params) >= 2 or self.exponents.random() < 0.4):
            return self.exponents.choice(sorted(self.params))
        p = self.name(PARAM_NAMES)
        self.params[p] = self.exponents.choice([1.5, 2.0, 3.0])
        return p

    def masked(self, scope: dict, depth: int, need: frozenset) -> Expr:
        """where(i <= j, a, b) over two indices in scope (a causal mask), b often 0."""
        i, j = self.rng.sample(sorted(scope), 2)
        op = self.rng.choice(["<=", "<", ">=", ">"])
        if self.equality.random() < EQUALITY:
            op = self.equality.choice(["==", "!="])
        a = self.cover(self._expr(scope, depth, need), scope, need | {i, j}, positive=False)
        b = self._expr(scope, depth, need) if self.rng.random() < 0.4 else Expr("0")
        return Expr(f"where({i} {op} {j}, {a.text}, {b.text})", a.used | b.used)

    def thresholded(self, scope: dict, depth: int, need: frozenset) -> Expr:
        """where(a > b, x, y) on float values: a threshold in the data (a leaky relu, a cut-off)."""
        a = self._expr(scope, depth, need)
        b = self._expr(scope, depth, frozenset()) if self.later.random() < 0.5 else Expr("0")
        x = self._expr(scope, depth, need)
        y = self._expr(scope, depth, need) if self.later.random() < 0.6 else Expr("0")
        op = self.later.choice([">", ">=", "<", "<="])
        used = a.used | b.used | x.used | y.used
        return Expr(f"where({a.text} {op} {b.text}, {x.text}, {y.text})", used)

    def tame(self) -> str:
        """A function defined for any real argument that does not grow fast."""
        names = [f for f in self.functions if f not in self.positive_only | self.fast_growing]
        return self.rng.choice(names)

    def unary(self, scope: dict, depth: int, need: frozenset) -> Expr:
        names = [f for f in self.functions if not (self.growing and f in self.fast_growing)]
        f = self.rng.choice(names)
        self.growing += f in self.fast_growing
        if f in self.positive_only:
            a = self.positive(scope, depth, need)
        else:
            a = self._expr(scope, depth, need)
        self.growing -= f in self.fast_growing
        return Expr(f"{f}({a.text})", a.used)

    def positive(self, scope: dict, depth: int, need: frozenset) -> Expr:
        """An expression that is positive (and away from 0) for every real input."""
        return self.cover(self._positive(scope, depth, need), scope, need, positive=True)

    def _positive(self, scope: dict, depth: int, need: frozenset) -> Expr:
        r, d = self.rng.random(), depth - 1
        if depth <= 0 or r < 0.1:
            if self.rng.random() < 0.5 or not self.sizes:
                return Expr(self.rng.choice(["2", "1/2", "3"]), atom=False)
            return Expr(self.rng.choice(self.sizes))
        if r < 0.45:
            options = [f for f in self.positive_valued if f in self.functions]
            f = self.rng.choice(
                [o for o in options if not (self.growing and o in self.fast_growing)] or ["exp"]
            )
            if f in self.fast_growing and self.growing:
                a = self.leaf(scope, need)
                return Expr(f"{a.wrap()}**2 + 1", a.used, False)
            self.growing += f in self.fast_growing
            a = self._expr(scope, d, need)
            self.growing -= f in self.fast_growing
            return Expr(f"{f}({a.text})", a.used)
        if r < 0.6:
            a = self._expr(scope, d, need)
            c = self.rng.choice(["1", "1/2", "2"])
            return Expr(f"{a.wrap()}**2 + {c}", a.used, False)
        if r < 0.75:
            return self.inline_sum(scope, d, need, positive=True)
        if r < 0.9:
            a, b = self._positive(scope, d, need), self._positive(scope, d, need)
            op = self.rng.choice(["+", "*", "/"])
            return Expr(f"{a.wrap()} {op} {b.wrap()}", a.used | b.used, False)
        if "sqrt" in self.functions:
            a = self._positive(scope, d, need)
            return Expr(f"sqrt({a.text})", a.used)
        a = self._expr(scope, d, need)
        return Expr(f"Abs({a.text}) + 1", a.used, False)

    def inline_sum(self, scope: dict, depth: int, need: frozenset, positive: bool) -> Expr:
        bound = {
            self.index(scope): self.reduction_size() for _ in range(self.rng.choice([1, 1, 2]))
        }
        inner_scope = {**scope, **bound}
        if positive:
            body = self.positive(inner_scope, depth, need | frozenset(bound))
        else:
            body = self.expr(inner_scope, depth, need | frozenset(bound))
        return Expr(f"Sum({body.text}, {', '.join(bound)})", body.used - frozenset(bound))

    def reduction_size(self) -> str:
        dims = [d for t in self.floats() for d in t.dims]
        return self.rng.choice(dims) if dims and self.rng.random() < 0.8 else self.size()

    def cover(self, e: Expr, scope: dict, need: frozenset, positive: bool) -> Expr:
        """Make ``e`` use every index in ``need``: times exp(leaf) if positive, else + or *."""
        missing = set(need) - e.used
        if not missing:
            return e
        leaf = self.leaf_using(missing, scope)
        if positive:
            return Expr(f"{e.wrap()} * exp({leaf.text})", e.used | leaf.used, False)
        op = self.rng.choice(["+", "*", "-"])
        return Expr(f"{e.wrap()} {op} {leaf.wrap()}", e.used | leaf.used, False)
