"""The functions of the op language: one row each, everything about a function in one place.

A row gives the name an op writes, the SymPy form the engine differentiates, how the lowering
writes it in torch (tensors) and in python (numbers: sizes and params), its LaTeX, the domain
its inputs are drawn from when a module is checked, and the facts the fuzzer and the reference
interpreter need (kinked, positive-valued, fast-growing), so that no other module keeps a list
of function names of its own. Derivatives are SymPy's (``fdiff``)
or, for the functions SymPy lacks, the ``fdiff`` of the classes below, with the math beside it.
Adding a function to the language is one row of :data:`FUNCTIONS` (and a class here when SymPy
has none). Names not in the table are refused when an op is parsed.

Range is part of a row: ``sigmoid`` lowers to ``torch.sigmoid`` (finite for any input),
``softplus`` to ``relu(x) + log1p(exp(-|x|))`` (no overflow at x = 1e4).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import sympy as sp
from sympy.codegen.cfunctions import expm1, log1p
from sympy.core.cache import cacheit
from sympy.core.logic import fuzzy_and
from sympy.functions.elementary.miscellaneous import MinMaxBase


def _cache_min_max() -> None:
    """Build each Max(a, b) and Min(a, b) once per process, as SymPy builds its functions.

    SymPy caches a function's construction (``Application.__new__`` is ``cacheit``) but not
    Max's and Min's, and theirs compares every pair of arguments: a >= b, a <= b, then
    factor_terms(a - b) against 0, about 2 ms for two tensor reads whose order nothing decides
    (``minimum(z[q, mm, 2], tmp[c, mm])``). Every rewrite that renames an index (xreplace)
    builds the node again: fuzz 660282 built 7,000 Min of 560 distinct argument tuples, 14 of
    its 60 s. The build is a function of its arguments (and of ``evaluate``, whose change
    clears SymPy's cache), so a cached one returns the same node.
    """
    build = MinMaxBase.__dict__["__new__"].__func__
    if not hasattr(build, "cache_info"):  # once, however often this module is reloaded
        MinMaxBase.__new__ = staticmethod(cacheit(build))


_cache_min_max()


def finite_real(a: sp.Expr) -> bool | None:
    """True for a finite real ``a``, False for +-oo, None for an extended-real value that may be
    either: an entry of a tensor that may hold -inf (a masked score, ``where(c, s, -inf)``)."""
    if a.is_extended_real is not True:
        return None
    return a.is_finite


def _correct_exp() -> None:
    """exp(a) is positive and nonzero for a finite a only: exp(-oo) = 0.

    SymPy answers exp(a) > 0 and exp(a) != 0 for every extended-real a, so with a tensor that
    may hold -inf (``v = where(j <= i, x, -inf)``) it folded ``sign(exp(v))`` to 1 and
    ``where(exp(v) > 0, a, b)`` to a: 0 and b where v is -inf (fuzz 841046, silently wrong in
    the forward and the backward). Here an extended-real a of unknown finiteness answers
    neither; a finite one, and every other, as SymPy does."""
    handlers = sp.exp._prop_handler
    if getattr(handlers["extended_positive"], "corrected", False):
        return  # once, however often this module is reloaded
    positive, zero = handlers["extended_positive"], handlers["zero"]

    def extended_positive(self):
        finite = finite_real(self.exp)
        if self.exp.is_extended_real and not finite and self.exp is not sp.S.Infinity:
            return None if finite is None else False  # -oo: exp is 0
        return positive(self)

    def is_zero(self):
        finite = finite_real(self.exp)
        return None if self.exp.is_extended_real and finite is None else zero(self)

    extended_positive.corrected = True
    handlers["extended_positive"], handlers["zero"] = extended_positive, is_zero


_correct_exp()


class _RealFunction(sp.Function):
    """A function SymPy lacks, real wherever its argument is (SymPy then writes no re()/im()).

    ``definition`` is the function in SymPy's own terms, what it evaluates to at a number;
    ``tex`` its name in LaTeX; ``fdiff`` (each class's) its derivative, the math beside it.
    """

    tex: str

    @staticmethod
    def definition(x: sp.Expr) -> sp.Expr:
        raise NotImplementedError

    @classmethod
    def eval(cls, x):
        return cls.definition(x) if x.is_number else None

    def _eval_is_real(self):
        return self.args[0].is_real

    def _eval_is_extended_real(self):
        return self.args[0].is_extended_real

    def _latex(self, printer, exp: str | None = None) -> str:
        power = "" if exp is None else f"^{{{exp}}}"  # tanh(x)**2 as \tanh^{2}(x)
        return rf"{self.tex}{power}\left({printer._print(self.args[0])}\right)"


class _PositiveFunction(_RealFunction):
    """Positive wherever its argument is finite (sigmoid, softplus): SymPy may then divide by
    it and take its log knowing the result is real."""

    def _eval_is_positive(self):
        finite = finite_real(self.args[0])  # sigmoid(-oo) = softplus(-oo) = 0
        return True if finite else None

    def _eval_is_extended_positive(self):
        return self._eval_is_positive()


class sigmoid(_PositiveFunction):  # noqa: N801  (the name an op writes)
    """sigma(x) = 1 / (1 + exp(-x));  sigma'(x) = sigma(x) (1 - sigma(x))."""

    tex = r"\sigma"

    @staticmethod
    def definition(x: sp.Expr) -> sp.Expr:
        return 1 / (1 + sp.exp(-x))

    def fdiff(self, argindex: int = 1) -> sp.Expr:
        s = sigmoid(self.args[0])
        return s * (1 - s)


class softplus(_PositiveFunction):  # noqa: N801
    """softplus(x) = log(1 + exp(x));  softplus'(x) = sigma(x)."""

    tex = r"\operatorname{softplus}"

    @staticmethod
    def definition(x: sp.Expr) -> sp.Expr:
        return sp.log(1 + sp.exp(x))

    def fdiff(self, argindex: int = 1) -> sp.Expr:
        return sigmoid(self.args[0])


class relu(_RealFunction):  # noqa: N801
    """relu(x) = max(x, 0);  relu'(x) = 1[x > 0] (0 at exactly 0, as torch's and the seed's)."""

    tex = r"\operatorname{relu}"

    @staticmethod
    def definition(x: sp.Expr) -> sp.Expr:
        return sp.Max(x, 0)

    def fdiff(self, argindex: int = 1) -> sp.Expr:
        return sp.Heaviside(self.args[0], 0)


class zero_in_floats(sp.Equality):  # noqa: N801
    """``b = 0`` as floating point decides it, never SymPy: softplus(x) is positive, so SymPy
    settles ``Eq(softplus(x), 0)`` as false, yet it is 0 in float64 below x = -745, where a
    mask on it is what keeps ``b**e log b`` from 0 * -inf (a power's partials,
    :class:`derive.symbolic.reverse._power`). Lowered as ``==``."""

    def __new__(cls, lhs: sp.Expr, rhs: sp.Expr = sp.S.Zero, **options) -> sp.Expr:
        return sp.Equality.__new__(cls, lhs, rhs, evaluate=False)


class where(sp.Function):  # noqa: N801
    """where(c, a, b) = a where the condition c holds, else b (torch.where).

    c compares indices (``t2 <= t1``: the causal mask), int64 data (``t[n] >= 0``) or float
    values (``x[n] >= 0``: a step, whose derivative is 0 wherever it is defined); it is
    constant wherever it is differentiated, so d/da = where(c, 1, 0) and d/db = where(c, 0, 1),
    as autograd's where backward selects. A branch may be
    -inf (a masked score: exp(-inf) = 0 and the row's Max skips it).
    """

    @classmethod
    def eval(cls, c, a, b):
        if c is sp.true:
            return a
        if c is sp.false:
            return b
        if a == b:
            return a
        if b == 0 and isinstance(a, (sp.Mul, sp.KroneckerDelta)):
            # where(c, delta(i, e) f, 0) -> delta(i, e) where(c, f, 0): equal at every point (a
            # delta is 0 or 1, the other branch 0), and a delta outside the where is one the
            # sum over i solves (fuzz --windows 15073: kept inside, the second order's
            # delta(b, b2) under a range guard was an identity over (b, b2), a 7-D product)
            deltas = [f for f in sp.Mul.make_args(a) if isinstance(f, sp.KroneckerDelta)]
            if deltas:
                rest = [f for f in sp.Mul.make_args(a) if not isinstance(f, sp.KroneckerDelta)]
                return sp.Mul(*deltas) * cls(c, sp.Mul(*rest), b)
        if isinstance(c, sp.core.relational.Relational):
            # inside a branch its own condition is decided: where(c, f(where(c, g, h)), 0) ->
            # where(c, f(g), 0). A zero-padded sum masked again inside the branch that already
            # selects it was 0 where c fails, and a quotient of it 0 / 0 there: harmless to a
            # where that selects, NaN to a second order that multiplies (fuzz --affine 1147)
            kept, other = decided(a, c, sp.true), decided(b, c, sp.false)
            if kept is not a or other is not b:
                return cls(c, kept, other)
        return None

    def _eval_derivative(self, s):
        c, a, b = self.args
        return where(c, sp.diff(a, s), sp.diff(b, s))

    def _eval_is_real(self):
        # a -inf branch (a masked score) is not real, but the entries the condition keeps are:
        # unknown, never False (SymPy's Max would then refuse the expression as incomparable)
        return True if self.args[1].is_real and self.args[2].is_real else None

    def _eval_is_extended_real(self):
        return fuzzy_and(x.is_extended_real for x in self.args[1:])

    def _eval_is_commutative(self):
        # the value's, not the condition's: SymPy leaves a relation's commutativity unknown,
        # and a where of 1/Sum(..) was then "not commutative", so a - where(..) not real, and
        # comparing it (a maximum's step) raised (fuzz --affine 4855)
        return fuzzy_and(x.is_commutative for x in self.args[1:])

    def _eval_power(self, e):
        # an indicator is idempotent: where(c, 1, 0)**k = where(c, 1, 0) for k = 1, 2, ...
        # (a window's two range conditions, each solved from a delta, meet as a square)
        if e.is_Integer and e > 0 and {self.args[1], self.args[2]} <= {sp.S.Zero, sp.S.One}:
            return self
        return None

    def _latex(self, printer, exp: str | None = None) -> str:
        c, a, b = (printer._print(x) for x in self.args)
        tex = rf"\operatorname{{where}}\left({c}, {a}, {b}\right)"
        return tex if exp is None else rf"\left({tex}\right)^{{{exp}}}"


def decided(e: sp.Expr, c: sp.Basic, value: sp.Basic) -> sp.Expr:
    """``e`` with the condition ``c`` taken as ``value`` wherever it means the same: not under
    a Sum or Max that binds one of its indices (there the same name is another index)."""
    if e == c:
        return value
    if not e.args or not e.has(c):
        return e
    limits = getattr(e, "limits", ())
    if any(lim[0] in c.free_symbols for lim in limits):
        return e
    args = tuple(decided(x, c, value) for x in e.args)
    return e.func(*args) if any(x is not y for x, y in zip(args, e.args)) else e


class clamp(sp.Function):  # noqa: N801  (SymPy's naming, as KroneckerDelta's)
    """clamp(e, lo, hi) = min(max(e, lo), hi): an index held inside [lo, hi].

    Not a function an op writes (no row below): the derivation makes it. A sum over k in
    [lo, hi] that a delta solves at k = e keeps its body where lo <= e <= hi and discards it
    elsewhere, ``where(lo <= e <= hi, f(e), 0)``. Where f is finite only on k's range (a
    quotient, a log, a row of a softmax masked by -inf, all entries masked at a row that does
    not exist), f(e) outside is NaN: harmless to the where that selects it, NaN to a second
    order that multiplies by its 0 adjoint (fuzz --affine 1147). Read there as f(clamp(e, lo,
    hi)), f is taken at a real point of k's range instead: equal where the branch is taken,
    finite where it is not.
    """

    is_integer = True

    @classmethod
    def eval(cls, e, lo, hi):
        if lo == hi:
            return lo
        if e.is_number and lo.is_number and hi.is_number:
            return sp.Min(sp.Max(e, lo), hi)
        return None

    def _latex(self, printer, exp: str | None = None) -> str:
        e, lo, hi = (printer._print(x) for x in self.args)
        tex = rf"\operatorname{{clamp}}\left({e}, {lo}, {hi}\right)"
        return tex if exp is None else rf"\left({tex}\right)^{{{exp}}}"


@dataclass(frozen=True)
class Function:
    """One function of the op language."""

    name: str  # as an op writes it
    make: Callable[..., sp.Expr]  # builds the SymPy form from the parsed arguments
    node: type | None  # the SymPy class the lowering meets (None: it becomes arithmetic)
    torch: str  # torch code, ``{0}`` (and ``{1}``) the arguments' code
    python: str | None  # the same for python numbers (sizes, params); None: tensors only
    weight: int  # per-element cost in multiplies (torch CPU, measured): saved or recomputed
    # where its argument may lie, and a check draws it: real | positive (x > 0) | unit (x > -1);
    # the fuzzer feeds a function of a positive or unit domain only arguments positive by
    # construction
    domain: str = "real"
    arity: int = 1
    # not differentiable everywhere: at 0 (abs, sign, relu), at a tie (maximum, minimum); the
    # reference interpreter measures how near an input comes, a check draws none there
    kinked: bool = False
    # positive for every real argument (exp, sigmoid): the fuzzer's denominators and log arguments
    positive_valued: bool = False
    # exponential growth (exp, sinh): nested twice it overflows float64, so the fuzzer nests none
    grows_fast: bool = False
    # keeps an int argument's dtype in torch (abs, sign, relu, maximum, minimum, where); the
    # rest return floats whatever their argument (torch.exp of an int tensor is a float)
    keeps_ints: bool = False


def _row(name, make, node, torch, python, weight, domain="real", arity=1, **facts) -> Function:
    return Function(name, make, node, torch, python, weight, domain, arity, **facts)


FUNCTIONS: dict[str, Function] = {
    f.name: f
    for f in [
        _row(
            "exp",
            sp.exp,
            sp.exp,
            "torch.exp({0})",
            "math.exp({0})",
            12,
            positive_valued=True,
            grows_fast=True,
        ),
        _row("log", sp.log, sp.log, "torch.log({0})", "math.log({0})", 13, "positive"),
        _row("sqrt", sp.sqrt, None, "torch.sqrt({0})", "math.sqrt({0})", 8, "positive"),
        _row("tanh", sp.tanh, sp.tanh, "torch.tanh({0})", "math.tanh({0})", 22),
        _row("sin", sp.sin, sp.sin, "torch.sin({0})", "math.sin({0})", 14),
        _row("cos", sp.cos, sp.cos, "torch.cos({0})", "math.cos({0})", 14),
        _row("sinh", sp.sinh, sp.sinh, "torch.sinh({0})", "math.sinh({0})", 13, grows_fast=True),
        _row(
            "cosh",
            sp.cosh,
            sp.cosh,
            "torch.cosh({0})",
            "math.cosh({0})",
            13,
            positive_valued=True,
            grows_fast=True,
        ),
        _row("abs", sp.Abs, sp.Abs, "torch.abs({0})", "abs({0})", 1, kinked=True, keeps_ints=True),
        _row(
            "sign",
            sp.sign,
            sp.sign,
            "torch.sign({0})",
            "float(({0} > 0) - ({0} < 0))",
            1,
            kinked=True,
            keeps_ints=True,
        ),
        _row("erf", sp.erf, sp.erf, "torch.erf({0})", "math.erf({0})", 14),
        _row("log1p", log1p, log1p, "torch.log1p({0})", "math.log1p({0})", 9, "unit"),
        _row("expm1", expm1, expm1, "torch.expm1({0})", "math.expm1({0})", 11, grows_fast=True),
        # python numbers: sigma(x) = (1 + tanh(x/2))/2 never overflows
        _row(
            "sigmoid",
            sigmoid,
            sigmoid,
            "torch.sigmoid({0})",
            "(0.5 + 0.5 * math.tanh(0.5 * {0}))",
            5,
            positive_valued=True,
        ),
        _row(
            "softplus",
            softplus,
            softplus,
            # -logsigmoid(-x): the same values as relu(x) + log1p(exp(-|x|)) in every float
            # dtype, one kernel (not six), and autograd's derivative of it is sigmoid(x), 1/2
            # at 0, where relu's and abs's kinks gave 0: torch.func differentiates the backward
            # as code (hessian of x * softplus(x) at 0 was half torch's; found by probing)
            "(-torch.nn.functional.logsigmoid(-{0}))",
            "(max({0}, 0.0) + math.log1p(math.exp(-abs({0}))))",
            25,
            positive_valued=True,
        ),
        _row(
            "relu", relu, relu, "torch.relu({0})", "max({0}, 0.0)", 1, kinked=True, keeps_ints=True
        ),
        _row(
            "maximum",
            sp.Max,
            sp.Max,
            "torch.maximum({0}, {1})",
            "_max({0}, {1})",  # python's max drops a nan (ir.scalars)
            1,
            arity=2,
            kinked=True,
            keeps_ints=True,
        ),
        _row(
            "minimum",
            sp.Min,
            sp.Min,
            "torch.minimum({0}, {1})",
            "_min({0}, {1})",
            1,
            arity=2,
            kinked=True,
            keeps_ints=True,
        ),
        _row(
            "where",
            where,
            where,
            "torch.where({0}, {1}, {2})",
            "({1} if {0} else {2})",
            1,
            arity=3,
            keeps_ints=True,
        ),
    ]
}
ALIASES = {"Abs": "abs"}  # SymPy's spelling, which the first catalogue documented
# inf: only as a branch of where (a masked score), refused anywhere else
CONSTANTS: dict[str, sp.Expr] = {"pi": sp.pi, "e": sp.E, "inf": sp.oo}

# The lowering meets these classes; each maps to its row.
BY_NODE: dict[type, Function] = {f.node: f for f in FUNCTIONS.values() if f.node is not None}


def heaviside_code(arg: str, at_zero: sp.Expr, like: str | None) -> str:
    """Heaviside(x, h), the derivative of relu/max/abs-like kinks, as torch code, or as python
    when ``like`` is None (x a number: the Heaviside of a param, ``minimum(p, scale + p)``'s).

    h = 0: 1[x > 0] (relu's, as torch's);  h = 1/2: (sign(x) + 1)/2 (torch.maximum splits a tie).
    """
    if at_zero not in (0, 1, sp.Rational(1, 2)):
        raise ValueError(f"Heaviside at zero {at_zero}")
    if like is None:  # python: bools are 0 and 1
        if at_zero == sp.Rational(1, 2):
            return f"(({arg} > 0) - ({arg} < 0) + 1) / 2"
        return f"float({arg} {'>' if at_zero == 0 else '>='} 0)"
    if at_zero == sp.Rational(1, 2):
        return f"(torch.sign({arg}) + 1) / 2"
    return f"({arg} {'>' if at_zero == 0 else '>='} 0).to({like}.dtype)"


def known() -> str:
    """The names an op may call, for error messages."""
    return ", ".join(sorted(FUNCTIONS)) + ", Sum, Max, view"


# the SymPy classes of the functions whose torch kernel returns floats (see Function.keeps_ints)
FLOAT_VALUED: tuple[type, ...] = tuple(
    f.node for f in FUNCTIONS.values() if f.node is not None and not f.keeps_ints
)
