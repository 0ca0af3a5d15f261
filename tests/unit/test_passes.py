"""The kernel IR's passes, one behaviour per test: statements in, the exact statements out."""

from __future__ import annotations

import itertools

import sympy as sp

from derive.ir import nodes as ir
from derive.ir.passes import common_subexpressions
from derive.ir.printer import TorchPrinter

i, j = sp.symbols("i j", integer=True)
x, y, g = (ir.Ref(n, axes=(i, j)) for n in "xyg")
square = ir.Apply("torch.square({0})", (x,), axes=(i, j))


def _mul(a, b):
    return ir.Binary("*", a, b, axes=(i, j))


def _printed(block: list[ir.Statement]) -> list[str]:
    names = (f"t{k}" for k in itertools.count())
    return [TorchPrinter().doprint(s) for s in common_subexpressions(block, lambda _: next(names))]


def test_a_tensor_computed_twice_is_computed_once() -> None:
    # torch.square(x) * g + torch.square(x) * y: one square, read twice
    block = [ir.Assign(("d",), ir.Binary("+", _mul(square, g), _mul(square, y), axes=(i, j)))]
    assert _printed(block) == ["t0 = torch.square(x)", "d = t0 * g + t0 * y", "del t0"]


def test_the_largest_repeat_first_and_across_statements() -> None:
    both = _mul(square, g)
    block = [
        ir.Assign(("a",), ir.Binary("+", both, y, axes=(i, j))),
        ir.Assign(("b",), ir.Binary("-", both, x, axes=(i, j))),
    ]
    assert _printed(block) == ["t0 = torch.square(x) * g", "a = t0 + y", "b = t0 - x", "del t0"]


def test_an_assignment_s_whole_value_is_never_shared() -> None:
    """``a = x * g`` then ``a[...] += ...``: a name bound to it would see the update."""
    block = [ir.Assign(("a",), _mul(x, g)), ir.Assign(("b",), ir.Neg(_mul(x, g), axes=(i, j)))]
    assert _printed(block) == ["a = x * g", "b = -x * g"]


def test_nothing_is_shared_across_a_write_of_what_it_reads() -> None:
    update = ir.Update("x", (ir.Ref("t", axes=(i,)),), "+", ir.Ref("v", axes=(i,)))
    block = [ir.Assign(("a",), ir.Neg(square)), update, ir.Assign(("b",), ir.Neg(square))]
    assert _printed(block) == ["a = -torch.square(x)", "x[t] += v", "b = -torch.square(x)"]


def test_views_and_python_numbers_stay_inline() -> None:
    view = ir.Permute(x, (1, 0), axes=(j, i))
    n = ir.Binary("*", ir.Ref("N", scalar=True), ir.Number(2))
    block = [ir.Assign(("a",), ir.Binary("*", view, n)), ir.Assign(("b",), ir.Binary("/", view, n))]
    assert _printed(block) == ["a = x.T * N * 2", "b = x.T / (N * 2)"]
