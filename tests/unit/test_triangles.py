"""Comparisons of two index ranges as triangles of ones, and where() on them as masked_fill.

Every comparison, offset and orientation is printed both ways and run in torch: the triangle
must hold the entries the aranges compared do, on square and rectangular matrices; a where()
with a number on one side must give the values torch.where gives, NaN and inf included.
"""

from __future__ import annotations

import itertools

import pytest
import sympy as sp
import torch

from derive.ir import nodes as ir
from derive.ir.printer import TorchPrinter
from derive.ir.triangles import triangles

i, j, b = sp.symbols("i j b", integer=True)
LIKE = ir.Ref("x", axes=(b, i, j))
ROWS, COLS = ir.Ref("I", axes=(), scalar=True), ir.Ref("J", axes=(), scalar=True)


def _row(offset: int) -> ir.Node:
    node: ir.Node = ir.Arange(ROWS, LIKE, axes=(i,))
    if offset:
        node = ir.Binary("+", node, ir.Number(sp.Integer(offset)), axes=(i,))
    return ir.Broadcast(node, (True, False), axes=(i, j))


def _col(offset: int) -> ir.Node:
    node: ir.Node = ir.Arange(COLS, LIKE, axes=(j,))
    return ir.Binary("-", node, ir.Number(sp.Integer(-offset)), axes=(j,)) if offset else node


def _run(node: ir.Node, env: dict) -> torch.Tensor:
    return eval(TorchPrinter().doprint(node), {"torch": torch, **env})  # noqa: S307 - printed here


@pytest.mark.parametrize("op", ["<", "<=", ">", ">="])
def test_every_comparison_of_a_row_and_a_column_index_is_its_triangle(op: str) -> None:
    for (rows, cols), r, c, col_left in itertools.product(
        [(5, 5), (3, 6), (6, 3), (1, 4)], [-2, 0, 1], [0, 3], [True, False]
    ):
        env = {"x": torch.zeros(2, rows, cols), "I": rows, "J": cols}
        left, right = (_col(c), _row(r)) if col_left else (_row(r), _col(c))
        cond = ir.Binary(op, left, right, axes=(i, j))
        (after,) = triangles([ir.Assign(("m",), cond)])
        assert isinstance(after.value, ir.Triangle), (op, r, c, col_left)
        want, got = _run(cond, env), _run(after.value, env)
        assert got.dtype == torch.bool and torch.equal(got, want), (op, rows, cols, r, c, col_left)


@pytest.mark.parametrize("fill_first", [False, True])
def test_a_where_of_a_triangle_against_a_number_is_a_fill_with_where_s_values(fill_first) -> None:
    x = torch.randn(2, 4, 4, dtype=torch.float64)
    x[0, 1, 2], x[1, 3, 0], x[1, 0, 0] = float("nan"), float("inf"), float("-inf")
    env = {"x": x, "I": 4, "J": 4}
    cond = ir.Binary("<=", _col(0), _row(0), axes=(i, j))
    value, number = ir.Ref("x", axes=(b, i, j)), ir.Number(-sp.oo)
    sides = (number, value) if fill_first else (value, number)
    where = ir.Where(cond, *sides, axes=(b, i, j))
    (after,) = triangles([ir.Assign(("s",), where)])
    assert isinstance(after.value, ir.MaskedFill)
    torch.testing.assert_close(_run(after.value, env), _run(where, env), equal_nan=True)


def test_a_value_that_broadcasts_or_a_comparison_of_other_axes_stays_a_where() -> None:
    cond = ir.Binary("<=", _col(0), _row(0), axes=(i, j))
    short = ir.Where(cond, ir.Ref("y", axes=(j,)), ir.Number(0), axes=(i, j))  # y broadcasts
    assert isinstance(triangles([ir.Assign(("s",), short)])[0].value, ir.Where)
    same = ir.Binary("<=", _col(0), ir.Arange(COLS, LIKE, axes=(j,)), axes=(i, j))  # j <= j
    assert triangles([ir.Assign(("m",), same)]) == [ir.Assign(("m",), same)]
    data = ir.Binary("<=", _col(0), ir.Ref("t", axes=(i, j)), axes=(i, j))  # a tensor, not i
    assert triangles([ir.Assign(("m",), data)]) == [ir.Assign(("m",), data)]
