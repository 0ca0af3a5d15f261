"""Printing the engine's expressions for people: LaTeX and the terminal's unicode pretty form.

SymPy's own printers read ``grad_out`` as ``grad`` with subscript ``out``, print a Kronecker
delta against a data index as ``\\delta_{c targets_n}``, stack a multi-index sum's bounds as
inequalities, set fractions in script size under mathtext, and know nothing of ``ReduceMax``.
These subclasses change exactly that; everything else is SymPy's:

    grad_out[n, c]                -> \\mathrm{grad\\_out}_{n,c}   (the names of the code)
    KroneckerDelta(c, targets[n]) -> \\delta_{c,\\mathrm{targets}_{n}}
    Sum(f, (n, 0, N - 1))         -> \\sum_{n} f     (every sum runs over a whole axis)
    Max(f, c)                     -> \\max_{c} f   (Max(f, p, q): \\max_{p, q} f)
    Mod(a, W), floor(a/W)         -> a mod W, SymPy's floor brackets
    -a + b                        -> b - a           (positive terms first)
    a / b                         -> \\dfrac{a}{b}    (display size, as LaTeX sets it)

Every string this module makes must parse with mathtext: the tests check each one.
"""

from __future__ import annotations

import re

import sympy as sp
from sympy.printing.latex import LatexPrinter, greek_letters_set, translate
from sympy.printing.precedence import PRECEDENCE
from sympy.printing.pretty.pretty import PrettyPrinter
from sympy.printing.pretty.stringpict import prettyForm, stringPict

from derive.language import ReduceMax

# A name that is a Greek letter's (alpha .. omega), or its first three or more letters and so of
# no other letter (eps, lam, sig), prints as the letter: the seeds name a param after the letter
# they write (eps -> \epsilon). Two-letter names (mu, nu, pi, xi) must be whole.
_GREEK = tuple(sorted(greek_letters_set))


def greek(name: str) -> str | None:
    """The LaTeX letter ``name`` spells or abbreviates, or None."""
    found = [g for g in _GREEK if g == name or (len(name) >= 3 and g.startswith(name))]
    return translate(found[0]) if len(found) == 1 else None


_NUMBERED = re.compile(r"^([A-Za-z]+?)(\d+)$")  # n1 -> n_1: a second index over the same axis


def name_latex(name: str, tensor: bool = False) -> str:
    """A name: one letter italic, words upright, underscores kept; index n1 -> n_1, tensor W1."""
    letter = greek(name)
    if letter:
        return letter
    m = _NUMBERED.match(name)
    if len(name) == 1 or (tensor and m and len(m.group(1)) == 1):
        return name  # x, W1 (a tensor's digits are part of its name)
    if m and not tensor:
        return f"{name_latex(m.group(1))}_{{{m.group(2)}}}"
    return r"\mathrm{" + name.replace("_", r"\_") + "}"


def _positive_first(terms: list[sp.Expr]) -> list[sp.Expr]:
    # probs - delta rather than -delta + probs: stable, so SymPy's order holds otherwise
    return sorted(terms, key=lambda t: bool(t.could_extract_minus_sign()))


def _whole_axis(lo: sp.Expr, hi: sp.Expr) -> bool:
    size = hi + 1
    return lo == 0 and all(isinstance(f, sp.Symbol) for f in sp.Mul.make_args(size))


class Latex(LatexPrinter):
    """SymPy's LaTeX printer with the op language's names, deltas, sums and maxima."""

    def __init__(self) -> None:
        super().__init__({"mul_symbol": r"\,", "fold_frac_powers": True})

    def doprint(self, expr: sp.Expr) -> str:
        # display-size fractions: mathtext sets \frac in script size, unreadable for a 1/N
        return super().doprint(expr).replace(r"\frac{", r"\dfrac{")

    def _print_Symbol(self, expr: sp.Symbol, style: str = "plain") -> str:
        return name_latex(expr.name)

    def _print_IndexedBase(self, expr: sp.IndexedBase) -> str:
        return name_latex(expr.label.name, tensor=True)

    def _print_KroneckerDelta(self, expr: sp.KroneckerDelta, exp: str | None = None) -> str:
        a, b = (self._print(arg) for arg in expr.args)
        tex = rf"\delta_{{{a},{b}}}"
        return tex if exp is None else rf"\left({tex}\right)^{{{exp}}}"

    def _print_Mod(self, expr: sp.Mod, exp: str | None = None) -> str:
        # a digit of an argmax over several indices, a mod W: mathtext has no \bmod
        a, m = (self.parenthesize(x, PRECEDENCE["Mul"], strict=True) for x in expr.args)
        tex = rf"{a} \; \mathrm{{mod}} \; {m}"
        return tex if exp is None else rf"\left({tex}\right)^{{{exp}}}"

    def _print_Sum(self, expr: sp.Sum) -> str:
        heads = []
        for var, lo, hi in reversed(expr.limits):  # the outermost sum first
            whole = _whole_axis(lo, hi)
            k, lo, hi = (self._print(x) for x in (var, lo, hi))
            heads.append(rf"\sum_{{{k}}}" if whole else rf"\sum_{{{k}={lo}}}^{{{hi}}}")
        return " ".join(heads) + r" \; " + self._body(expr.function)

    def _print_ReduceMax(self, expr: ReduceMax) -> str:
        indices = ", ".join(self._print(lim[0]) for lim in expr.limits)
        return rf"\max_{{{indices}}} \; {self._body(expr.function)}"

    def _body(self, body: sp.Expr) -> str:
        # a negative body in parentheses: sum_k (-f), not a sum_k - f that reads as a difference
        if body.could_extract_minus_sign():
            return rf"\left({self._print(body)}\right)"
        return self.parenthesize(body, PRECEDENCE["Mul"], strict=True)

    def _as_ordered_terms(self, expr: sp.Expr, order: str | None = None) -> list[sp.Expr]:
        return _positive_first(super()._as_ordered_terms(expr, order))


class Pretty(PrettyPrinter):
    """SymPy's unicode pretty printer, keeping ``grad_out`` and showing ``max`` over an index."""

    def __init__(self, width: int) -> None:
        super().__init__({"use_unicode": True, "num_columns": width})

    def _print_Symbol(self, e: sp.Symbol, bold_name: bool = False) -> prettyForm:
        # the names of the code (SymPy would print grad_out as grad with subscript "out")
        return prettyForm(e.name)

    def _print_ReduceMax(self, e: ReduceMax) -> prettyForm:
        head = stringPict("max")
        indices = ", ".join(str(lim[0]) for lim in e.limits)
        head = prettyForm(*head.below(indices))
        body = self._print(e.function)
        if isinstance(e.function, sp.Add):
            body = prettyForm(*body.parens())
        return prettyForm(*head.right(" ", body))

    def _as_ordered_terms(self, expr: sp.Expr, order: str | None = None) -> list[sp.Expr]:
        return _positive_first(super()._as_ordered_terms(expr, order))


def latex(expr: sp.Expr) -> str:
    """One expression as LaTeX (mathtext-compatible)."""
    return Latex().doprint(expr)


def equation_latex(lhs: sp.Expr, rhs: sp.Expr) -> str:
    """``lhs = rhs`` as LaTeX."""
    return f"{latex(lhs)} = {latex(rhs)}"


def equation_pretty(lhs: sp.Expr, rhs: sp.Expr, width: int = 100) -> str:
    """``lhs = rhs`` in SymPy's 2-D unicode form, wrapped at ``width`` columns."""
    return Pretty(width).doprint(sp.Eq(lhs, rhs, evaluate=False))
