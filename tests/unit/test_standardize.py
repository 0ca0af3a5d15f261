"""A standardization over trailing axes as ``torch.native_layer_norm``, and nothing else as it.

Each test builds the statements the lowering makes of a standardization written out (as
layernorm's forward does), runs :func:`derive.ir.standardize.standardized` and reads the
printed lines; a rewrite is run in torch against the block as it was: every name the function
hands on holds the same numbers, to rounding.
"""

from __future__ import annotations

import sympy as sp
import torch

from derive.ir import nodes as ir
from derive.ir.printer import TorchPrinter
from derive.ir.standardize import standardized

n, c = sp.symbols("n c", integer=True)
ROWS, ROW = (n, c), (n,)
X = ir.Ref("x", axes=ROWS)
EPS = ir.Ref("eps", axes=(), scalar=True)


def _ref(name: str, axes: tuple = ROWS) -> ir.Ref:
    return ir.Ref(name, axes=axes)


def _row(node: ir.Node) -> ir.Broadcast:
    return ir.Broadcast(node, (True, False), axes=ROWS)


def _written(diff_of: ir.Node = X, divided: bool = False) -> list[ir.Statement]:
    """mean, diff, var, rstd (or the root), xhat: layernorm's forward as lowered."""
    var = ir.Reduce("mean", ir.Binary("*", _ref("diff"), _ref("diff"), axes=ROWS), (1,), axes=ROW)
    total = ir.Binary("+", EPS, _ref("var", ROW), axes=ROW)
    form = "torch.sqrt({0})" if divided else "torch.rsqrt({0})"
    scale = ir.Apply(form, (total,), axes=ROW)
    xhat = (
        ir.Binary("/", _ref("diff"), _row(_ref("rstd", ROW)), axes=ROWS)
        if divided
        else ir.Binary("*", _row(_ref("rstd", ROW)), _ref("diff"), axes=ROWS)
    )
    return [
        ir.Assign(("mean",), ir.Reduce("mean", X, (1,), axes=ROW)),
        ir.Assign(("diff",), ir.Binary("-", diff_of, _row(_ref("mean", ROW)), axes=ROWS)),
        ir.Assign(("var",), var),
        ir.Assign(("rstd",), scale),
        ir.Assign(("xhat",), xhat),
    ]


def _lines(block: list[ir.Statement]) -> list[str]:
    return [TorchPrinter().doprint(st) for st in block]


def _run(block: list[ir.Statement], x: torch.Tensor) -> dict:
    env = {"torch": torch, "x": x, "eps": 1e-5}
    exec("\n".join(_lines(block)), env)  # noqa: S102 - lines this test printed
    return env


def test_layernorms_statements_are_one_kernel_with_the_saved_rstd_squeezed() -> None:
    block = _written()
    after = standardized(block, {"xhat", "rstd"}, lambda stem: stem)
    assert _lines(after) == [
        "xhat, xhat_mean, xhat_rstd = torch.native_layer_norm(x, x.shape[-1:], None, None, eps)",
        "rstd = xhat_rstd.squeeze(1)",
    ]
    x = torch.randn(7, 5, dtype=torch.float64) * 3 + 2
    old, new = _run(block, x), _run(after, x)
    for name in ("xhat", "rstd"):
        assert new[name].shape == old[name].shape
        torch.testing.assert_close(new[name], old[name], rtol=1e-14, atol=1e-14)


def test_a_quotient_by_the_root_is_the_same_kernel() -> None:
    after = standardized(_written(divided=True), {"xhat"}, lambda stem: stem)
    assert len(after) == 1 and isinstance(after[0].value, ir.Standardize)


def test_a_difference_read_again_or_handed_on_keeps_the_statements() -> None:
    block = _written()
    assert standardized(block, {"xhat", "diff"}, lambda stem: stem) == block
    again = ir.Assign(("twice",), ir.Binary("*", _ref("diff"), ir.Number(2), axes=ROWS))
    assert standardized([*block, again], {"xhat", "twice"}, lambda stem: stem) == [*block, again]


def test_a_mean_of_another_tensor_or_over_a_leading_axis_is_no_standardization() -> None:
    other = _written(diff_of=_ref("y"))  # x - mean(x) is not y - mean(x)
    assert standardized(other, {"xhat"}, lambda stem: stem) == other
    lead = ir.Broadcast(_ref("mean", (c,)), (False, True), axes=ROWS)  # a batch norm's axis
    block = [
        ir.Assign(("mean",), ir.Reduce("mean", X, (0,), axes=(c,))),
        ir.Assign(("diff",), ir.Binary("-", X, lead, axes=ROWS)),
        ir.Assign(("xhat",), ir.Binary("*", _ref("diff"), _ref("diff"), axes=ROWS)),
    ]
    assert standardized(block, {"xhat"}, lambda stem: stem) == block
