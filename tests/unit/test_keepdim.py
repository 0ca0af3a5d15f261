"""The keepdim pass: a reduction read only broadcast back over the axes it reduced keeps them.

Each test builds the statements, runs :func:`derive.ir.keepdim.kept_dims` and reads the
printed lines; the last checks the printed code's numbers against the unkept form's in torch.
"""

from __future__ import annotations

import sympy as sp
import torch

from derive.ir import nodes as ir
from derive.ir.keepdim import kept_dims
from derive.ir.printer import TorchPrinter

n, c = sp.symbols("n c", integer=True)
x = ir.Ref("x", axes=(n, c))


def _row(kind: str, arg: ir.Node = x) -> ir.Reduce:
    return ir.Reduce(kind, arg, (1,), axes=(n,))


def _back(name: str) -> ir.Broadcast:
    """``name[:, None]``: a row statistic read against its rows."""
    return ir.Broadcast(ir.Ref(name, axes=(n,)), (True, False), axes=(n, c))


def _printed(block: list[ir.Statement], keep: set[str] = frozenset()) -> list[str]:
    return [TorchPrinter().doprint(s) for s in kept_dims(block, keep)]


def test_a_statistic_read_against_its_rows_keeps_its_axis() -> None:
    block = [
        ir.Assign(("m",), _row("amax")),
        ir.Assign(("d",), ir.Binary("-", x, _back("m"), axes=(n, c))),
    ]
    assert _printed(block) == ["m = x.amax(1, keepdim=True)", "d = x - m"]


def test_a_kept_reduction_of_a_read_back_reads_it_as_it_is() -> None:
    """log-sum-exp: the sum of exp(x - m[:, None]) is itself kept, and so is its read of m."""
    shifted = ir.Apply("torch.exp({0})", (ir.Binary("-", x, _back("m"), axes=(n, c)),), axes=(n, c))
    block = [
        ir.Assign(("m",), _row("amax")),
        ir.Assign(("s",), _row("sum", shifted)),
        ir.Assign(("d",), ir.Binary("-", x, _back("s"), axes=(n, c))),
        ir.Assign(("e",), ir.Binary("-", x, _back("m"), axes=(n, c))),
    ]
    assert _printed(block) == [
        "m = x.amax(1, keepdim=True)",
        "s = torch.exp(x - m).sum(1, keepdim=True)",
        "d = x - s",
        "e = x - m",
    ]


def test_element_wise_values_of_kept_names_are_kept_and_numbers_ride_along() -> None:
    # s = x.sum(1); r = rsqrt(s); d = (r * 2)[:, None] * x
    r = ir.Apply("torch.rsqrt({0})", (ir.Ref("s", axes=(n,)),), axes=(n,))
    scaled = ir.Binary("*", ir.Ref("r", axes=(n,)), ir.Number(2), axes=(n,))
    read = ir.Broadcast(scaled, (True, False), axes=(n, c))
    block = [
        ir.Assign(("s",), _row("sum")),
        ir.Assign(("r",), r),
        ir.Assign(("d",), ir.Binary("*", read, x, axes=(n, c))),
    ]
    assert _printed(block) == [
        "s = x.sum(1, keepdim=True)",
        "r = torch.rsqrt(s)",
        "d = r * 2 * x",
    ]


def test_a_bare_read_anywhere_keeps_the_plain_reduction() -> None:
    """``m`` also read as (n,) (here summed again): keeping its axis would change that read,
    and so the name ``r`` computed from it stays plain as well."""
    block = [
        ir.Assign(("m",), _row("mean")),
        ir.Assign(("r",), ir.Neg(ir.Ref("m", axes=(n,)), axes=(n,))),
        ir.Assign(("d",), ir.Binary("-", x, _back("r"), axes=(n, c))),
        ir.Assign(("t",), ir.Reduce("sum", ir.Ref("m", axes=(n,)), (0,))),
    ]
    assert _printed(block) == ["m = x.mean(1)", "r = -m", "d = x - r[:, None]", "t = m.sum(0)"]


def test_what_the_function_hands_on_keeps_its_shape() -> None:
    block = [
        ir.Assign(("m",), _row("sum")),
        ir.Assign(("d",), ir.Binary("-", x, _back("m"), axes=(n, c))),
    ]
    assert _printed(block, keep={"m"}) == ["m = x.sum(1)", "d = x - m[:, None]"]


def test_a_broadcast_onto_other_axes_is_not_a_read_back() -> None:
    """m over (n,) read as (n, 1, 1) against a 3-axis tensor: keepdim would give (n, 1)."""
    k = sp.Symbol("k", integer=True)
    wide = ir.Broadcast(ir.Ref("m", axes=(n,)), (True, False, False), axes=(n, c, k))
    y = ir.Ref("y", axes=(n, c, k))
    block = [ir.Assign(("m",), _row("sum")), ir.Assign(("d",), ir.Binary("*", y, wide))]
    assert _printed(block) == ["m = x.sum(1)", "d = y * m[:, None, None]"]


def test_a_column_sum_stays_the_blocked_helper() -> None:
    block = [
        ir.Assign(("s",), ir.Reduce("sum", x, (0,), axes=(c,))),
        ir.Assign(("d",), ir.Binary("-", x, ir.Ref("s", axes=(c,)), axes=(n, c))),
    ]
    assert _printed(block) == ["s = _sum_leading(x, 1)", "d = x - s"]


def test_the_kept_code_computes_the_same_numbers() -> None:
    """softmax's forward as the pass prints it, run against the same code unkept: the same
    kernels, so the same bits (float32, rows of one to a thousand)."""
    maxes = _row("amax")
    counts = ir.Apply(
        "torch.exp({0})", (ir.Binary("-", x, _back("maxes"), axes=(n, c)),), axes=(n, c)
    )
    sums = _row("sum", ir.Ref("counts", axes=(n, c)))
    recip = ir.Apply("torch.reciprocal({0})", (ir.Ref("sums", axes=(n,)),), axes=(n,))
    out = ir.Binary(
        "*", ir.Broadcast(recip, (True, False), axes=(n, c)), ir.Ref("counts", axes=(n, c))
    )
    block = [
        ir.Assign(("maxes",), maxes),
        ir.Assign(("counts",), counts),
        ir.Assign(("sums",), sums),
        ir.Assign(("out",), out),
    ]
    kept, plain = _printed(block, keep={"out"}), [TorchPrinter().doprint(s) for s in block]
    assert kept != plain
    g = torch.Generator().manual_seed(0)
    for cols in (1, 7, 1000):
        scope = {"torch": torch, "x": torch.randn(5, cols, generator=g) * 30}
        results = []
        for lines in (kept, plain):
            run = dict(scope)
            exec("\n".join(lines), run)  # noqa: S102 - the printed statements themselves
            results.append(run["out"])
        assert torch.equal(results[0], results[1])
