"""The axis-order pass: a temporary stored in the order that leaves its reads fewest permutes.

Each test builds statements, runs :func:`derive.ir.orders.natural_orders` and reads the printed
lines; every rewrite is also run in torch against the block as it was, on random tensors: a
new order moves only views, so every name the caller sees holds the same numbers.
"""

from __future__ import annotations

import sympy as sp
import torch

from derive.ir import nodes as ir
from derive.ir.orders import natural_orders, transposed
from derive.ir.printer import TorchPrinter

b, h, t, s, d = sp.symbols("b h t s d", integer=True)
SIZES = {b: 2, h: 3, t: 4, s: 5, d: 6}


def _ref(name: str, *axes: sp.Symbol) -> ir.Ref:
    return ir.Ref(name, axes=axes)


def _perm(v: ir.Node, *axes: sp.Symbol) -> ir.Node:
    return ir.Permute(v, tuple(v.axes.index(a) for a in axes), axes=axes)


def _lines(block: list[ir.Statement]) -> list[str]:
    return [TorchPrinter().doprint(st) for st in block]


def _run(block: list[ir.Statement], inputs: dict[str, tuple[sp.Symbol, ...]]) -> dict:
    """The block's names after running its printed lines on seeded random inputs."""
    gen = torch.Generator().manual_seed(0)
    env: dict = {"torch": torch}
    for name, axes in inputs.items():
        env[name] = torch.randn(*(SIZES[a] for a in axes), generator=gen, dtype=torch.float64)
    exec("\n".join(_lines(block)), env)  # noqa: S102 - the lines this test printed
    return env


def _same(before: list[ir.Statement], after: list[ir.Statement], inputs: dict, names) -> None:
    old, new = _run(before, inputs), _run(after, inputs)
    for name in names:
        torch.testing.assert_close(new[name], old[name], rtol=0, atol=1e-12)


def _attention_like() -> tuple[list[ir.Statement], dict]:
    """attention's backward before the pass: a matmul's result permuted to (b, t, h, s), read
    permuted back beside probs (b, h, t, s), and a product of both read by two matmuls."""
    g, v, probs, k = _ref("g", b, h, t, d), _ref("v", b, h, s, d), _ref("p", b, h, t, s), None
    k = _ref("k", b, h, s, d)
    mm = ir.Matmul(g, _perm(v, b, h, d, s), axes=(b, h, t, s))
    gv = _ref("gv", b, t, h, s)
    row = ir.Reduce(
        "sum", ir.Binary("*", probs, _perm(gv, b, h, t, s), axes=(b, h, t, s)), (3,), axes=(b, h, t)
    )
    back = ir.Broadcast(_ref("r", b, t, h), (True, True, True, False), axes=(b, t, h, s))
    diff = ir.Binary("-", gv, back, axes=(b, t, h, s))
    prod = ir.Binary("*", diff, _perm(probs, b, t, h, s), axes=(b, t, h, s))
    tt = _ref("tt", b, t, h, s)
    block = [
        ir.Assign(("gv",), _perm(mm, b, t, h, s)),
        ir.Assign(("r",), _perm(row, b, t, h)),
        ir.Assign(("tt",), prod),
        ir.Assign(("dq",), ir.Matmul(_perm(tt, b, h, t, s), k, axes=(b, h, t, d))),
        ir.Assign(
            ("dk",), ir.Matmul(_perm(tt, b, h, s, t), _ref("q", b, h, t, d), axes=(b, h, s, d))
        ),
    ]
    inputs = {
        "g": (b, h, t, d),
        "v": (b, h, s, d),
        "p": (b, h, t, s),
        "k": (b, h, s, d),
        "q": (b, h, t, d),
    }
    return block, inputs


def test_temporaries_take_the_order_their_reads_want() -> None:
    block, inputs = _attention_like()
    out = natural_orders(block, {"dq", "dk"})
    assert _lines(out) == [
        "gv = g @ v.permute(0, 1, 3, 2)",
        "r = (p * gv).sum(3)",
        "tt = (gv - r[:, :, :, None]) * p",
        "dq = tt @ k",
        "dk = tt.permute(0, 1, 3, 2) @ q",
    ]
    _same(block, out, inputs, ["dq", "dk"])


def test_a_name_handed_on_keeps_its_order() -> None:
    block, inputs = _attention_like()
    out = natural_orders(block, {"dq", "dk", "gv"})
    assert _lines(out)[0] == "gv = (g @ v.permute(0, 1, 3, 2)).permute(0, 2, 1, 3)"
    _same(block, out, inputs, ["dq", "dk", "gv"])


def test_a_new_order_that_a_flatten_would_copy_is_not_kept() -> None:
    """``a`` is read flattened over (t, h), neighbours in its order: stored in the matmul's
    order (b, h, t, s) that flatten would copy, so the permute stays where it is."""
    mm = ir.Matmul(_ref("g", b, h, t, d), _ref("w", b, h, d, s), axes=(b, h, t, s))
    a = _ref("a", b, t, h, s)
    flat = ir.Flatten(a, 1, 2, axes=(b, t, s))
    block = [
        ir.Assign(("a",), _perm(mm, b, t, h, s)),
        ir.Assign(("o",), ir.Binary("*", flat, ir.Number(2), axes=(b, t, s))),
    ]
    assert natural_orders(block, {"o"}) == block


def test_a_length_read_off_a_reordered_name_follows_its_axis() -> None:
    mm = ir.Matmul(_ref("g", b, h, t, d), _ref("w", b, h, d, s), axes=(b, h, t, s))
    a = _ref("a", b, t, h, s)
    block = [
        ir.Assign(("a",), _perm(mm, b, t, h, s)),
        ir.Assign(("o",), ir.Binary("*", _perm(a, b, h, t, s), ir.SizeOf(a, 1), axes=(b, h, t, s))),
    ]
    out = natural_orders(block, {"o"})
    assert _lines(out) == ["a = g @ w", "o = a * a.shape[2]"]
    inputs = {"g": (b, h, t, d), "w": (b, h, d, s)}
    _same(block, out, inputs, ["o"])


def test_an_element_wise_value_takes_the_order_into_its_operands() -> None:
    """x (b, t) * y[:, None]... put in another order: each operand is aligned anew, a
    broadcast one by its labels, a python number as it is."""
    x, y = _ref("x", b, t, s), _ref("y", t)
    node = ir.Binary(
        "*",
        ir.Binary("+", x, ir.Number(3), axes=(b, t, s)),
        ir.Broadcast(y, (True, False), axes=(b, t, s)),
        axes=(b, t, s),
    )
    new = transposed(node, (s, b, t))
    assert TorchPrinter().doprint(new) == "(x.permute(2, 0, 1) + 3) * y"
    env = {"torch": torch, "x": torch.randn(2, 4, 5), "y": torch.randn(4)}
    old = eval(TorchPrinter().doprint(node), env)  # noqa: S307 - printed here
    torch.testing.assert_close(eval(TorchPrinter().doprint(new), env), old.permute(2, 0, 1))


def test_a_broadcast_value_keeps_its_order() -> None:
    """``a = y[:, None] * 2`` holds (T, 1); put in the order (s, t) it would be ``y * 2``,
    (T,), one dimension fewer than a read by position (a length, a flatten) expects."""
    y = _ref("y", t)
    a = ir.Binary("*", ir.Broadcast(y, (True, False), axes=(t, s)), ir.Number(2), axes=(t, s))
    read = _perm(_ref("a", t, s), s, t)
    block = [
        ir.Assign(("a",), a),
        ir.Assign(("o",), ir.Binary("+", read, _ref("z", s, t), axes=(s, t))),
    ]
    assert natural_orders(block, {"o"}) == block
