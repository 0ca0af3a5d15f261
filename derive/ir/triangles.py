"""A comparison of two index ranges as a triangle of ones, and a where() on it as a fill.

A condition between two indices, ``t2 <= t1`` (a causal mask), is lowered as two aranges
compared, ``torch.arange(T) <= torch.arange(T)[:, None]``: four aten calls for a boolean
matrix whose entries are known from the shapes alone. Over a matrix M[i, j] (i the rows, j the
columns), with j compared to i,

    j <= i + k  is  tril(k),    j < i + k  is  tril(k - 1),
    j >= i + k  is  triu(k),    j > i + k  is  triu(k + 1),

so the mask is ``torch.ones(I, J, dtype=torch.bool).tril(k)``, two calls, exact for every
I and J (the comparisons are of integers). Its complement is the other triangle, so a
where() with a number on one side, ``torch.where(mask, a, -inf)`` (a ``scalar_tensor`` and a
``where``), is ``a.masked_fill(complement, -inf)``, one call and the same values in a's
dtype, where a is over every axis of the result (masked_fill never broadcasts a). Attention's
forward: six calls to three a layer.
"""

from __future__ import annotations

from typing import NamedTuple

from derive.ir import nodes as ir
from derive.ir.rewrite import rebuilt

# the comparison with its sides swapped: i <= j is j >= i
_SWAPPED = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}


class _Triangle(NamedTuple):
    rows: ir.Node
    cols: ir.Node
    like: ir.Ref
    k: int
    upper: bool

    def complement(self) -> _Triangle:
        # not tril(k) is triu(k + 1); not triu(k) is tril(k - 1)
        return self._replace(k=self.k + 1 if not self.upper else self.k - 1, upper=not self.upper)

    def node(self, axes: tuple) -> ir.Triangle:
        return ir.Triangle(self.rows, self.cols, self.like, self.k, self.upper, axes=axes)


def triangles(block: list[ir.Statement]) -> list[ir.Statement]:
    """``block`` with each comparison of two index ranges a triangle of ones, and each
    where() of one against a number a ``masked_fill`` (see the module docstring)."""

    def rule(node: ir.Node) -> ir.Node:
        if isinstance(node, ir.Where):
            return _filled(node) or node
        triangle = _triangle(node)
        return triangle.node(node.axes) if triangle is not None else node

    return [rebuilt(s, rule, enter=lambda n: not isinstance(n, ir.Triangle)) for s in block]


def _filled(node: ir.Where) -> ir.Node | None:
    """``a.masked_fill(not c, b)`` for where(c, a, b) with b a number (or the mirror), c a
    triangle and a over every axis of the result."""
    cond = node.cond
    triangle = (
        _from_node(cond) if isinstance(cond, ir.Triangle) else _triangle(cond)
    )  # children are rebuilt first: the condition may be a Triangle already
    if triangle is None:
        return None
    for keep, fill, where in ((node.a, node.b, triangle.complement()), (node.b, node.a, triangle)):
        if isinstance(fill, ir.Number) and not keep.scalar and keep.axes == node.axes:
            return ir.MaskedFill(keep, where.node(cond.axes), fill, axes=node.axes)
    return None


def _from_node(t: ir.Triangle) -> _Triangle:
    return _Triangle(t.rows, t.cols, t.like, t.k, t.upper)


def _triangle(node: ir.Node) -> _Triangle | None:
    """The triangle a comparison of a column index with a row index is (None: it is not one)."""
    if not (isinstance(node, ir.Binary) and node.op in _SWAPPED and len(node.axes) == 2):
        return None
    row_axis, col_axis = node.axes
    left, right = _side(node.left, row_axis, col_axis), _side(node.right, row_axis, col_axis)
    if left is None or right is None or left[0] == right[0]:
        return None
    op = node.op if left[0] == "col" else _SWAPPED[node.op]
    (_, col, col_offset), (_, row, row_offset) = (
        (left, right) if left[0] == "col" else (right, left)
    )
    if row.like != col.like:
        return None
    k = row_offset - col_offset  # j + c OP i + r is j OP i + (r - c)
    if op in ("<=", "<"):
        return _Triangle(row.size, col.size, row.like, k if op == "<=" else k - 1, False)
    return _Triangle(row.size, col.size, row.like, k if op == ">=" else k + 1, True)


def _side(node: ir.Node, row_axis, col_axis) -> tuple[str, ir.Arange, int] | None:
    """("row" or "col", the arange, its integer offset) where ``node`` is an index range of
    the matrix's rows (broadcast down a column) or of its columns, plus a whole number."""
    node, offset = _offset(node)
    kind = "col"
    if isinstance(node, ir.Broadcast):
        if node.kept not in ((True, False), (False, True)):
            return None
        kind = "row" if node.kept == (True, False) else "col"
        node, inner = _offset(node.arg)
        offset = None if offset is None or inner is None else offset + inner
    if not isinstance(node, ir.Arange) or offset is None:
        return None
    return (
        (kind, node, offset) if node.axes == ((row_axis if kind == "row" else col_axis),) else None
    )


def _offset(node: ir.Node) -> tuple[ir.Node, int | None]:
    """``(a, c)`` where ``node`` is a + c or a - c with c a whole number; ``(node, 0)`` else."""
    if isinstance(node, ir.Binary) and node.op in "+-" and isinstance(node.right, ir.Number):
        value = node.right.value
        if not value.is_Integer:
            return node, None
        return node.left, int(value) if node.op == "+" else -int(value)
    return node, 0
