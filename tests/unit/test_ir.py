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
from derive.ir.printer import LEGACY_VMAP, PLAIN, Line, TorchPrinter, called_helpers

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
        # floats add and multiply in the order written: a right operand keeps its parentheses
        (ir.Binary("+", x, ir.Binary("+", y, z)), "x + (y + z)"),
        (ir.Binary("+", x, _sub(y, z)), "x + (y - z)"),
        (ir.Binary("+", _sub(x, y), z), "x - y + z"),
        (ir.Binary("*", ir.Binary("*", x, y), z), "x * y * z"),
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
        (ir.Reduce("mean", _sub(x, y), (0,), axes=(j,)), "_sum_leading(x - y, 1, mean=True)"),
        (ir.Reduce("mean", _sub(x, y), (1,), axes=(i,)), "(x - y).mean(1)"),
        (
            ir.Contract((x, ir.Ref("w", axes=(j, k))), (i, j, k), axes=(i, k)),
            'torch.einsum("ab,bc->ac", x, w)',
        ),
        (ir.Matmul(x, ir.Ref("w", axes=(j, k)), axes=(i, k)), "x @ w"),
        # @ is read left to right at *'s precedence: a product on its right keeps parentheses
        # (fuzz 620155: t @ v @ m read as (t @ v) @ m, a vector between two matrices)
        (ir.Matmul(x, ir.Matmul(y, z)), "x @ (y @ z)"),
        (ir.Matmul(ir.Matmul(x, y), z), "x @ y @ z"),
        (ir.Matmul(x, ir.Binary("*", y, z)), "x @ (y * z)"),
        (ir.Binary("*", x, ir.Matmul(y, z)), "x * (y @ z)"),
        (ir.Binary("*", ir.Matmul(x, y), z), "x @ y * z"),
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
    upd = ir.IndexPut("dx", (ir.Ref("t", axes=(i,)),), ir.Ref("g", axes=(i,)))
    assert (upd.writes, upd.reads) == ({"dx"}, {"dx", "t", "g"})
    both = ir.Assign(("m", "am"), ir.Reduce("max", x, (1,), axes=(i,)))
    assert (both.writes, both.reads) == ({"m", "am"}, {"x"})
    tie = ir.Heaviside(x, sp.Rational(1, 2), like, axes=(i, j))  # (sign(x) + 1) / 2: no dtype read
    assert ir.Assign(("h",), tie).reads == {"x"}
    assert ir.Assign(("h",), ir.Heaviside(x, 0, like, axes=(i, j))).reads == {"x", "grad_out"}
    printed = TorchPrinter().line(both)
    assert printed == "m, am = x.max(1)" and statement(printed).writes == {"m", "am"}


OPS = Path(__file__).resolve().parents[2] / "ops"
NOT_NAMES = {"torch", "math", "float", "int", "tuple", "max", "min", "abs"}  # modules and builtins


def _syntax(line: str) -> tuple[set[str], set[str]]:
    """What ``line``'s syntax tree writes (assignment targets, an in-place call's object) and
    every name it mentions: the oracle, read off the text as emission no longer does."""
    (stmt,) = ast.parse(line.strip()).body
    mentioned = {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name)} - NOT_NAMES
    return _written(stmt), mentioned


def _written(stmt: ast.stmt) -> set[str]:
    if isinstance(stmt, ast.If):  # a guard (``if needs[0]: ...``) writes what its body does
        return set().union(*(_written(s) for s in stmt.body))
    targets = stmt.targets if isinstance(stmt, ast.Assign) else []
    if isinstance(stmt, ast.AugAssign):
        targets = [stmt.target]
    call = stmt.value if isinstance(stmt, ast.Expr) else None
    if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute):
        if call.func.attr.endswith("_"):  # x.scatter_add_(...): writes x
            targets = [call.func.value]
    writes = set()
    for t in targets:
        while isinstance(t, (ast.Subscript, ast.Attribute)):
            t = t.value
        names = t.elts if isinstance(t, ast.Tuple) else [t]
        writes |= {n.id for n in names if isinstance(n, ast.Name)}
    return writes


@pytest.mark.parametrize("name", sorted(p.stem for p in OPS.glob("*.py")))
def test_statements_agree_with_their_syntax_tree(name: str) -> None:
    """What each line of a module says it writes and reads, a lowered statement
    (:class:`Line`) or a line emission wrote itself (a check, a size binding, a reshape:
    :class:`Code`), is what its text writes and reads: emission decides which bindings and
    helpers a module keeps from those names, never parsing the text, so they must be honest."""
    data = emit(load_op(OPS / f"{name}.py"), "generated").data
    lines = data.check_lines + data.range_checks + data.forward_lines + data.backward_lines
    lines += [data.output] + (data.jvp.check_lines + data.jvp.lines if data.jvp else [])
    assert any(isinstance(line, Line) for line in lines)
    for line in lines:
        writes, mentioned = _syntax(line)
        got = statement(line)
        # a module helper a lowered statement calls (_sum_leading) is said by the IR it was
        # printed from, not by the variables it reads; _legacy_vmap is the module's context
        # around its functions (its contractions, flattens), which no line names, and _plain
        # what the helpers ask, not the lines
        assert got.reads | (called_helpers([line]) - {LEGACY_VMAP, PLAIN}) == mentioned, line
        assert got.writes == writes, line
