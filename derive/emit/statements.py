"""The generated backward's statements as data: each statement's code and the names it writes
and reads, taken from the kernel-IR statement the lowering printed it from.

In: the lowered lines of one backward (:class:`~derive.ir.printer.Line`, each keeping its
:class:`~derive.ir.nodes.Statement`); out: :class:`Statement` records, which
:mod:`derive.explain.excerpt` follows (a gradient's statements and the temporaries they read)
without reading the module's text back. The few lines emission writes itself (size bindings,
the batch shape's reshapes) are plain text, read off their syntax tree.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from derive.ir.printer import Line


@dataclass(frozen=True)
class Statement:
    code: str  # one python statement, as lowered (black formats it with the module)
    writes: frozenset[str]  # the variables it assigns or updates in place
    reads: frozenset[str]  # every variable it mentions (its targets too)


def statement(code: str) -> Statement:
    """``code`` (one statement) with what it writes and reads."""
    if isinstance(code, Line):
        s = code.statement
        return Statement(code.strip(), s.writes, s.reads | s.writes)
    return _parsed(code)


def _root(node: ast.AST) -> str | None:
    """The variable an assignment target or in-place call writes: ``x`` of ``x[i].y``."""
    while isinstance(node, (ast.Subscript, ast.Attribute, ast.Starred)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _writes(stmt: ast.stmt) -> set[str]:
    targets: list[ast.AST] = []
    if isinstance(stmt, ast.Assign):
        targets = list(stmt.targets)
    elif isinstance(stmt, (ast.AugAssign, ast.AnnAssign)):
        targets = [stmt.target]
    elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        func = stmt.value.func  # x.index_add_(...): a trailing underscore writes in place
        if isinstance(func, ast.Attribute) and func.attr.endswith("_"):
            targets = [func.value]
    flat: list[ast.AST] = []
    while targets:
        node = targets.pop()
        if isinstance(node, (ast.Tuple, ast.List)):
            targets.extend(node.elts)
        else:
            flat.append(node)
    return {name for name in map(_root, flat) if name is not None}


def _parsed(code: str) -> Statement:
    """A line emission wrote as text: what it writes and reads, off its syntax tree."""
    (stmt,) = ast.parse(code.strip()).body
    reads = {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name)}
    return Statement(code.strip(), frozenset(_writes(stmt)), frozenset(reads))
