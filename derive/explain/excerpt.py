"""The torch statements a generated module runs for one gradient, cut out of its source.

Read from the emitted text, never from the lowering: whatever the generator emits is what is
shown. For a variable such as ``dlogits`` the excerpt is every statement of the backward that
writes it (``dlogits = ...``, ``dlogits[...] -= ...``, ``dC.index_add_(...)``) plus, before them,
the temporaries those statements read (``sum_grad_out = grad_out.sum(0)``), transitively. Other
gradients, saved tensors, sizes and ``grad_out`` are inputs of the excerpt, not part of it.
"""

from __future__ import annotations

import ast
import textwrap
from collections.abc import Iterable

BACKWARD_FUNCTIONS = ("backward_all", "backward")  # stepwise modules compute in backward_all


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


def _reads(stmt: ast.stmt) -> set[str]:
    return {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name)}


def _backward(source: str) -> tuple[list[ast.stmt], set[str]]:
    """The backward's statements (no docstring) and the names unpacked from its arguments."""
    functions = {f.name: f for f in ast.parse(source).body if isinstance(f, ast.FunctionDef)}
    name = next((n for n in BACKWARD_FUNCTIONS if n in functions), None)
    if name is None:
        return [], set()
    fn = functions[name]
    body = fn.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    args = {a.arg for a in fn.args.args}
    unpacked = {
        n
        for s in body
        if isinstance(s, ast.Assign) and isinstance(s.value, ast.Name) and s.value.id in args
        for n in _writes(s)
    }
    return body, args | unpacked


def _segment(source: str, stmt: ast.stmt) -> str:
    return textwrap.dedent(ast.get_source_segment(source, stmt, padded=True))


def excerpts(source: str, variables: Iterable[str], opaque: Iterable[str]) -> dict[str, str]:
    """``{variable: its statements}`` for each variable the backward writes.

    ``opaque`` names are never followed into (sizes, params, grad_out, other gradients); nor
    are the backward's arguments and what it unpacks from them (the saved tensors).
    """
    body, given = _backward(source)
    writes = [_writes(s) for s in body]
    opaque = set(opaque) | given
    out = {}
    for var in variables:
        picked = {i for i, w in enumerate(writes) if var in w}
        todo = sorted(picked)
        while todo:
            i = todo.pop()
            for name in sorted(_reads(body[i]) - opaque - {var}):
                found = [j for j in range(i) if name in writes[j] and j not in picked]
                picked.update(found)
                todo.extend(found)
        if picked:
            out[var] = "\n".join(_segment(source, body[i]) for i in sorted(picked))
    return out
