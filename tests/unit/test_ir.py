"""The kernel IR: each node printed as its exact torch string (precedence included, as SymPy's
printer tests check theirs), the printer strict, and every lowered statement's own account of
what it writes and reads the same as its syntax tree's."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import sympy as sp

from derive.emit.generate import emit, load_op
from derive.emit.statements import statement
from derive.ir import nodes as ir
from derive.ir.printer import Line, TorchPrinter

i, j, k = sp.symbols("i j k", integer=True)
x, y, z = (ir.Ref(n, axes=(i, j)) for n in "xyz")
N = ir.Ref("N", scalar=True)
like = ir.Ref("grad_out")


def _sub(a, b):
    return ir.Binary("-", a, b, axes=(i, j))


@pytest.mark.parametrize(
    ("node", "code"),
    [
        # a - (b - c) keeps its parentheses, (a - b) - c needs none
        (_sub(x, _sub(y, z)), "x - (y - z)"),
        (_sub(_sub(x, y), z), "x - y - z"),
        (ir.Binary("*", _sub(x, y), z), "(x - y) * z"),
        (ir.Binary("/", x, ir.Binary("*", y, z)), "x / (y * z)"),
        (ir.Neg(ir.Binary("*", x, y)), "-x * y"),
        # python numbers as SymPy writes them, tensors as black hugs them
        (ir.Binary("**", N, ir.Number(2)), "N ** 2"),
        (ir.Binary("**", x, ir.Number(3)), "x**3"),
        (ir.Binary("*", x, ir.Paren(ir.Neg(ir.Binary("/", ir.Number(2), N)))), "x * (-2 / N)"),
        (ir.Number(sp.Rational(1, 3)), "1 / 3"),
        (ir.Number(-sp.oo), 'float("-inf")'),
        (ir.Permute(x, (1, 0), axes=(j, i)), "x.T"),
        (ir.Permute(ir.Ref("w", axes=(i, j, k)), (2, 0, 1)), "w.permute(2, 0, 1)"),
        (ir.Broadcast(ir.Ref("v", axes=(i,)), (True, False), axes=(i, j)), "v[:, None]"),
        (ir.Reduce("sum", x, (0, 1)), "x.sum((0, 1))"),
        (ir.Reduce("mean", _sub(x, y), (0,), axes=(j,)), "(x - y).mean(0)"),
        (
            ir.Contract((x, ir.Ref("w", axes=(j, k))), (i, j, k), axes=(i, k)),
            'torch.einsum("ab,bc->ac", x, w)',
        ),
        (ir.Matmul(x, ir.Ref("w", axes=(j, k)), axes=(i, k)), "x @ w"),
        (ir.Cast(ir.Binary("==", x, y), like), "(x == y).to(grad_out.dtype)"),
        (ir.Indicator(ir.Binary("<=", x, y), None, None, like), "(x <= y).to(grad_out.dtype)"),
        (ir.Zeros((), like), "grad_out.new_zeros(())"),
        (
            ir.Full((N,), ir.Number(1), like),
            "torch.full((N,), 1, dtype=grad_out.dtype, device=grad_out.device)",
        ),  # noqa: E501
    ],
)
def test_printed(node: ir.Node, code: str) -> None:
    assert TorchPrinter().doprint(node) == code


def test_precedence_is_kept_where_it_is_claimed() -> None:
    """An indicator without an offset is a product: a denominator takes it in parentheses."""
    mask = ir.Indicator(ir.Binary("<=", x, y), None, None, like)
    assert TorchPrinter().doprint(ir.Binary("/", z, mask)) == "z / ((x <= y).to(grad_out.dtype))"


def test_printer_is_strict() -> None:
    class Unknown(ir.Node):
        pass

    with pytest.raises(TypeError, match="Unknown"):
        TorchPrinter().doprint(Unknown())


def test_statements_say_what_they_write_and_read() -> None:
    upd = ir.Update("dx", (ir.Ref("t", axes=(i,)),), "-", ir.Ref("g", axes=(i,)))
    assert (upd.writes, upd.reads) == ({"dx"}, {"dx", "t", "g"})
    both = ir.Assign(("m", "am"), ir.Reduce("max", x, (1,), axes=(i,)))
    assert (both.writes, both.reads) == ({"m", "am"}, {"x"})
    tie = ir.Heaviside(x, sp.Rational(1, 2), like, axes=(i, j))  # (sign(x) + 1) / 2: no dtype read
    assert ir.Assign(("h",), tie).reads == {"x"}
    assert ir.Assign(("h",), ir.Heaviside(x, 0, like, axes=(i, j))).reads == {"x", "grad_out"}
    printed = TorchPrinter().line(both)
    assert printed == "m, am = x.max(1)" and statement(printed).writes == {"m", "am"}


OPS = Path(__file__).resolve().parents[2] / "ops"
NOT_NAMES = {"torch", "math", "float", "max", "min", "abs"}  # modules and builtins


@pytest.mark.parametrize("name", ["cross_entropy", "embedding", "layernorm", "linear"])
def test_statements_agree_with_their_syntax_tree(name: str) -> None:
    """What a lowered statement says it writes and reads is what its text writes and reads:
    the IR is an honest account, and emission need not parse text to learn it."""
    data = emit(load_op(OPS / f"{name}.py"), "generated").data
    lines = [line for line in data.forward_lines + data.backward_lines if isinstance(line, Line)]
    assert lines
    for line in lines:
        tree = ast.parse(line)
        mentioned = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} - NOT_NAMES
        assert line.statement.reads | line.statement.writes == mentioned, line
        assert statement(line).writes == statement(str(line)).writes, line
