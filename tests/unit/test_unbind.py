"""One ``unbind`` for the run of statements that names every slice of an axis.

Each test builds statements, runs :func:`derive.ir.unbind.unbound` and reads the printed
lines; a rewrite is run in torch against the block as it was: the names hold the same views.
"""

from __future__ import annotations

import sympy as sp
import torch

from derive.ir import nodes as ir
from derive.ir.printer import TorchPrinter
from derive.ir.unbind import unbound

s, b, t = sp.symbols("s b t", integer=True)
WHOLE = ir.Ref("whole", axes=(b, s, t))


def _part(name: str, k: int, n: int = 3, at: int = 1) -> ir.Assign:
    spots = [None, None, None]
    spots[at] = k
    sizes = (sp.Integer(2), sp.Integer(n), sp.Integer(4))
    return ir.Assign((name,), ir.Slice(WHOLE, tuple(spots), sizes, axes=(b, t)))


def _lines(block: list[ir.Statement]) -> list[str]:
    return [TorchPrinter().doprint(st) for st in block]


def test_every_slice_in_order_is_one_unbind_with_the_same_views() -> None:
    block = [_part("q", 0), _part("k", 1), _part("v", 2), ir.Free(("whole",))]
    after = unbound(block)
    assert _lines(after) == ["q, k, v = whole.unbind(1)", "del whole"]
    env_old = {"whole": torch.randn(2, 3, 4, dtype=torch.float64)}
    env_new = dict(env_old)
    exec("\n".join(_lines(block)), env_old)  # noqa: S102 - lines this test printed
    exec("\n".join(_lines(after)), env_new)  # noqa: S102
    for name in "qkv":
        assert env_new[name].data_ptr() == env_old[name].data_ptr()
        assert env_new[name].stride() == env_old[name].stride()
        assert torch.equal(env_new[name], env_old[name])


def test_a_part_of_the_axis_out_of_order_or_read_between_stays_as_it_is() -> None:
    some = [_part("q", 0), _part("k", 1)]  # the axis has 3 entries
    assert unbound(some) == some
    swapped = [_part("q", 1), _part("k", 0), _part("v", 2)]
    assert unbound(swapped) == swapped
    reads = ir.Assign(("k",), ir.Binary("*", ir.Ref("q", axes=(b, t)), ir.Number(2), axes=(b, t)))
    between = [_part("q", 0), reads, _part("v", 2)]
    assert unbound(between) == between
    other = [_part("q", 0), _part("k", 1, at=2), _part("v", 2)]  # another axis
    assert unbound(other) == other


def test_a_slice_whose_axis_length_is_unknown_stays_as_it_is() -> None:
    n = sp.Symbol("N", integer=True, positive=True)
    block = [_part("q", 0, n=3), _part("k", 1, n=3), _part("v", 2, n=3)]
    unknown = [
        ir.Assign(st.targets, ir.Slice(WHOLE, st.value.at, (2, n, 4), axes=(b, t)))  # type: ignore[attr-defined]
        for st in block
    ]
    assert unbound(unknown) == unknown
