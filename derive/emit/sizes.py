"""A size expression as Python code: the forward's checks and bindings print sizes this way."""

from __future__ import annotations

import sympy as sp
from sympy.printing.precedence import PRECEDENCE
from sympy.printing.str import StrPrinter


def floor_parts(f: sp.floor) -> tuple[sp.Expr, sp.Expr]:
    """``floor(a/b)`` as ``(a, b)``: the code's ``(a) // b``, and b, which must be positive."""
    return sp.fraction(sp.together(f.args[0]))


class _SizePrinter(StrPrinter):
    """Python for a size of ints: floor(a/b) as ``(a) // b``, in parentheses wherever it is
    a factor, negated or a power's base: ``//`` binds as ``*`` does, left to right, so
    ``2*floor(T/p)`` printed ``2*(T) // p`` was ``(2*T) // p`` (and ``-floor(-T/p)``,
    ``(-(-T)) // p``): a wrong size, found by probing."""

    def _print_floor(self, e: sp.floor) -> str:
        num, den = floor_parts(e)
        return f"({self._print(num)}) // {self.parenthesize(den, PRECEDENCE['Mul'])}"

    def _print_Mul(self, expr: sp.Mul) -> str:
        if not any(isinstance(f, sp.floor) for f in expr.args):
            return super()._print_Mul(expr)
        c, rest = expr.as_coeff_Mul()
        body = "*".join(self.parenthesize(f, PRECEDENCE["Mul"]) for f in sp.Mul.make_args(rest))
        if c == 1 or c == -1:
            return ("-" if c == -1 else "") + body
        coef = str(c) if c.is_Integer else self.parenthesize(c, PRECEDENCE["Mul"])
        return f"{coef}*{body}"  # -2*x is (-2)*x in python too

    def parenthesize(self, item: sp.Basic, level: int, strict: bool = False) -> str:
        if isinstance(item, sp.floor) and level >= PRECEDENCE["Mul"]:
            return f"({self._print(item)})"
        return super().parenthesize(item, level, strict)


def size_code(size: sp.Expr | str) -> str:
    """A size expression as a Python value over the int sizes bound by name: floor(a/b) as
    ``(a) // b`` (``(T + 2*P - K) // S + 1``), and a constant that is no rational number as
    its float (``R + sqrt(2)`` -> ``R + 1.4142135623730951``), since ``sqrt``, ``pi`` and ``E``
    are no names in the module. A constant only enters checks (a sign, a bound), for which a
    double's 16 digits are exact enough. Code already (``x.shape[1]``) stays as it is."""
    if isinstance(size, str):
        return size
    constants = sp.sympify(size).replace(
        lambda e: e.is_number and not e.is_Rational, lambda e: sp.Float(e.evalf(17), 17)
    )
    return _SizePrinter().doprint(constants)
