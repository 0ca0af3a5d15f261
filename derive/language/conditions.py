"""Comparisons as the op language means them: relations of *values*, never of expressions.

Python's ``==`` and ``!=`` between two SymPy objects answer a structural question (are these the
same expression?), at once and as a python bool: ``c != t[n]`` is ``True`` because the symbol
``c`` is not the expression ``t[n]``, so ``where(c != t[n], x[n, c], 0)`` read as ``x[n, c]``.
The ordering operators (``<=``, ``>``, ...) already build relations that SymPy keeps. So before
SymPy sees a definition, every comparison in its text is written as a call that builds the
relation of values,

    a == b  ->  Eq(a, b)        a != b  ->  Ne(a, b)        a <= b  ->  Le(a, b)   (and <, >, >=)

which SymPy decides only when the values settle it (``Eq(2, 3)`` is false, ``Eq(c, c)`` true)
and keeps otherwise. What a condition cannot mean here is refused: a chained comparison
(``0 <= t[n] < C`` is python's ``and`` of two, and ``and`` is no SymPy operator) and the
boolean operators ``and``/``or``/``not`` (nest where() instead).
"""

from __future__ import annotations

import ast

import sympy as sp

from derive.language.graph import LangError

# the names the rewritten text calls; no op can spell them (names starting "_" are refused)
RELATIONS = {
    ast.Eq: ("_rel_eq", sp.Eq),
    ast.NotEq: ("_rel_ne", sp.Ne),
    ast.Lt: ("_rel_lt", sp.Lt),
    ast.LtE: ("_rel_le", sp.Le),
    ast.Gt: ("_rel_gt", sp.Gt),
    ast.GtE: ("_rel_ge", sp.Ge),
}
_SPELLED = {sp.Eq: "==", sp.Ne: "!=", sp.Lt: "<", sp.Le: "<=", sp.Gt: ">", sp.Ge: ">="}


def _deciding(build: type) -> object:
    """``build``, refusing a comparison with inf that SymPy decides only because it takes the
    other side finite: inputs are finite reals to the engine, so ``x[n] > -inf`` is True and
    ``where(x[n] > -inf, x[n], 0)`` was read as ``x[n]``, where the text meant to catch an
    inf (found by probing). A definition that may hold -inf (``where(c, s, -inf)``) is an
    extended real, and its comparisons stay; so do those true of infinities too (``v <= inf``).
    Likewise a value tested for equality with itself, ``x[n] != x[n]``: a NaN test, decided
    False (``x < x`` is false for every value, NaN too, as SymPy decides it)."""

    def relation(a: object, b: object) -> sp.Basic:
        r = build(a, b)
        if not isinstance(r, sp.logic.boolalg.BooleanAtom):
            return r
        left, right = sp.sympify(a), sp.sympify(b)
        if left == right and not left.is_number and build in (sp.Eq, sp.Ne):
            raise LangError(
                f"'{left} {_SPELLED[build]} {right}' compares a value with itself: SymPy decides "
                f"it {r} (inputs are finite reals), so it cannot test a caller's NaN"
            )
        for k, (inf, other) in enumerate(((left, right), (right, left))):
            if inf not in (sp.oo, -sp.oo) or other.is_number:
                continue
            extended = sp.Dummy("v", extended_real=True)
            if build(*((inf, extended) if k == 0 else (extended, inf))) == r:
                continue  # true (or false) of every extended real: inf too
            spelled = {sp.oo: sp.Symbol("inf"), -sp.oo: -sp.Symbol("inf")}
            left, right = left.xreplace(spelled), right.xreplace(spelled)
            raise LangError(
                f"'{left} {_SPELLED[build]} {right}' compares with inf a value the engine takes "
                f"as finite (inputs are finite reals: SymPy decides it {r}), so it cannot catch "
                "a caller's inf; compare with a finite bound, or write the inf as a where() "
                "branch"
            )
        return r

    return relation


NAMESPACE = {name: _deciding(build) for name, build in RELATIONS.values()}


class _Relations(ast.NodeTransformer):
    """Comparisons as calls, each where it may stand: the condition of a where()."""

    def __init__(self) -> None:
        self.condition = False  # visiting a where()'s first argument

    def visit_Call(self, node: ast.Call) -> ast.AST:
        if not (isinstance(node.func, ast.Name) and node.func.id == "where" and node.args):
            return self.generic_visit(node)
        joined = _bitwise(node.args[0])
        if joined:  # (a < b) & (c < d): not a comparison outside where(), as it would read
            raise LangError(
                f"'{joined}' in '{ast.unparse(node.args[0])}': nest where() to combine "
                "conditions (where(a < b, where(c < d, x, y), y))"
            )
        self.condition = isinstance(node.args[0], ast.Compare)
        first = self.visit(node.args[0])
        self.condition = False
        rest = [self.visit(a) for a in node.args[1:]]
        return ast.copy_location(ast.Call(node.func, [first, *rest], node.keywords), node)

    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        if not self.condition:  # x * (c != 0): SymPy has no arithmetic of truth values
            raise LangError(
                f"comparison '{ast.unparse(node)}' outside a where() condition: write "
                f"where({ast.unparse(node)}, 1, 0) for its indicator"
            )
        self.condition = False  # its sides are values again: where(a < (b > c), ...) is refused
        if len(node.ops) != 1:
            raise LangError(
                f"chained comparison '{ast.unparse(node)}': write one comparison per where() "
                "and nest them (where(a < b, where(b < c, x, y), y))"
            )
        name, _ = RELATIONS[type(node.ops[0])] if type(node.ops[0]) in RELATIONS else (None, None)
        if name is None:
            raise LangError(f"comparison '{ast.unparse(node)}': use ==, !=, <, <=, > or >=")
        args = [self.visit(node.left), self.visit(node.comparators[0])]
        return ast.copy_location(ast.Call(ast.Name(name, ast.Load()), args, []), node)

    def visit_BoolOp(self, node: ast.BoolOp) -> ast.AST:
        word = "and" if isinstance(node.op, ast.And) else "or"
        raise LangError(f"'{word}' in '{ast.unparse(node)}': nest where() to combine conditions")

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
        if isinstance(node.op, ast.Not):
            raise LangError(f"'not' in '{ast.unparse(node)}': swap where()'s branches instead")
        return self.generic_visit(node)

    def visit_IfExp(self, node: ast.IfExp) -> ast.AST:
        raise LangError(f"'{ast.unparse(node)}': write a condition as where(c, a, b)")


def relations_as_calls(text: str) -> str:
    """``text`` with every comparison written as a relation-building call (see the module).

    Text that is not a python expression is returned unchanged: the parser reports it."""
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError:
        return text
    has = any(isinstance(n, (ast.Compare, ast.BoolOp, ast.IfExp)) for n in ast.walk(tree))
    has = has or any(
        isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not) for n in ast.walk(tree)
    )
    if not has:
        return text  # nothing to rewrite: the text goes to SymPy exactly as written
    return ast.unparse(_Relations().visit(tree))


def _bitwise(node: ast.AST) -> str:
    """The bitwise operator joining (or negating) a condition: ``&``, ``|``, ``^``, ``~``."""
    ops = {ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^", ast.Invert: "~"}
    if isinstance(node, (ast.BinOp, ast.UnaryOp)):
        return ops.get(type(node.op), "")
    return ""
