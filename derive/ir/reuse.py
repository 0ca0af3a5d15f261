"""A kernel writes its result into an operand that nothing reads after it: ``_into(torch.mul,
x * x, g)`` is ``x * x * g`` with the product's buffer taken for the second product.

Each element-wise kernel torch runs eagerly returns a new tensor. Where the result is large,
that is memory the allocator gets from the operating system, which hands it over a page at a
time as it is first written: GELU's backward at (4096, 1024), eight kernels into eight new
tensors, spends most of its time there (docs/benchmarks.md, "Kernels into their operands").
Inside one expression, an operand that another kernel just made is read by this kernel alone:
its buffer is spare once read, and torch's element-wise kernels take it as ``out=`` (a full
overlap of output and input is allowed; each entry is read before it is written). The entries
are the same numbers: the same kernel, only where it writes differs.

The rule, over any block: a node that torch computes into new memory (:func:`made_here`:
arithmetic, a function of the registry, addcmul, a matrix product) read by an element-wise
kernel (``+ - * /``, a negation, a unary function, addcmul, an add with alpha) is that
kernel's buffer; the kernel is printed ``_into(kernel, *operands, into=k)``. Where a sum or a
product has its new operand on the right, the operands swap (both are exact in floating point:
a + b == b + a, a * b == b * a); ``c - t`` for a python number c is ``-t + c``, both exact.

Whether the buffer is taken is decided when the function runs, by the module's ``_into``: only
eagerly, on plain tensors, with autograd recording nothing (grad mode off, as inside an
autograd.Function), and only where the result has the buffer's shape and dtype (an operand that
broadcasts to more, or another float dtype, and it returns a new tensor as written). Traced by
torch.compile, under a torch.func transform, a dispatch mode or autograd's legacy vmap, the
kernel runs as written: Inductor reuses buffers itself, a transform's wrapped tensor may not
take a write, and the legacy vmap has no batching rule for ``out=``.
A name bound by a statement is a buffer only where it is such a tensor too: assigned once, to
a value torch computes into new memory (never a view: ``Wh = Wqkv.reshape(..)`` is the
caller's), read once by the last statement that reads it, and freed after it (``del``: nothing hands
it on); every statement before that reads it binds new memory (a kernel's result, a
reduction, a product), never a view of it, which the write would change under its reader.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Collection
from typing import NamedTuple

from derive.ir import nodes as ir
from derive.ir.printer import ADD_SCALED, ADDCMUL, INTO
from derive.ir.rewrite import flat_statements, rebuilt

# torch's unary functions of the registry that take out= (torch.relu does not)
UNARY = frozenset(
    "exp log sqrt rsqrt reciprocal tanh sin cos sinh cosh abs sign erf log1p expm1 sigmoid".split()
)
_UNARY_FORM = re.compile(r"torch\.(\w+)\(\{0\}\)")
_KERNELS = {"+": "torch.add", "-": "torch.sub", "*": "torch.mul", "/": "torch.div"}
# addcmul's and add-with-alpha's forms, by the kernel each names in _into, with its tensors' slots
_FUSED = {
    "torch.addcmul({0}, {1}, {2})": ("torch.addcmul", 3),
    ADDCMUL + "({0}, {1}, {2}, {3})": (ADDCMUL, 3),
    ADD_SCALED + "({0}, {1}, {2})": (ADD_SCALED, 2),
}
# calls that return new memory whatever their operands (besides _UNARY_FORM's and _FUSED's)
_NEW = ("torch.pow(", "torch.where(", "torch.maximum(", "torch.minimum(", INTO + "(")


def into_operands(block: list[ir.Statement], integers: Collection[str]) -> list[ir.Statement]:
    """``block`` with each element-wise kernel whose operand another kernel just made
    computed into that operand's buffer where it may be (see the module docstring).
    ``integers``: the int tensors (int inputs, argmaxes), whose arithmetic (an index's) is
    left as written, as ``_into`` would leave it: its buffers are floats only."""
    spare = _spare_names(block)
    ints = set(integers)
    for s in flat_statements(block):
        if isinstance(s, ir.Assign) and len(s.targets) == 1 and _integer(s.value, ints):
            ints.add(s.targets[0])

    def statement(s: ir.Statement) -> ir.Statement:
        if isinstance(s, ir.Guarded):
            return dataclasses.replace(s, body=tuple(statement(inner) for inner in s.body))
        if not isinstance(s, ir.Assign):
            return s
        spare_here = _Spare(frozenset(n for n, reader in spare.items() if reader is s), ints)
        return rebuilt(s, lambda node: node if _integer(node, ints) else _rule(node, spare_here))

    return [statement(s) for s in block]


def _integer(node: ir.Node, ints: Collection[str]) -> bool:
    """Whether ``node`` is surely an int tensor: integer arithmetic (no true division, no
    function) of int tensors (``ints``), aranges and python numbers."""
    if node.scalar or isinstance(node, ir.Arange):  # an arange's device tensor is not read
        return not node.scalar
    if isinstance(node, ir.Ref):
        return node.name in ints
    if isinstance(node, ir.Apply) or (isinstance(node, ir.Binary) and node.op == "/"):
        return False
    if not isinstance(node, (ir.Map, ir.View)):
        return False
    tensors = [c for c in node.children() if not c.scalar]
    return bool(tensors) and all(_integer(c, ints) for c in tensors)


def _spare_names(block: list[ir.Statement]) -> dict[str, ir.Statement]:
    """Each name whose tensor may be a buffer (see the module docstring), with the one
    statement that reads it."""
    flat = list(flat_statements(block))
    freed = {n for s in flat if isinstance(s, ir.Free) for n in s.names}
    writes = Counter(n for s in flat for n in s.writes)
    fresh = {
        s.targets[0]
        for s in flat
        if isinstance(s, ir.Assign) and len(s.targets) == 1 and made_here(s.value)
    }
    spare = {}
    for name in fresh & freed:
        readers = [s for s in flat if not isinstance(s, ir.Free) and name in s.reads]
        if writes[name] != 1 or not readers or not isinstance(readers[-1], ir.Assign):
            continue
        last = readers[-1]
        read = sum(isinstance(n, ir.Ref) and n.name == name for n in ir.walk(last.value))
        if read == 1 and all(_new(s) for s in readers[:-1]):
            spare[name] = last
    return spare


def _new(s: ir.Statement) -> bool:
    """Whether ``s`` binds new memory, never a view of what it reads (which a write into
    that tensor would change under it): a kernel's result, a reduction, a product."""
    if not isinstance(s, ir.Assign):
        return False
    return made_here(s.value) or isinstance(s.value, (ir.Reduce, ir.Stack))


def made_here(node: ir.Node, names: frozenset[str] = frozenset()) -> bool:
    """Whether ``node`` is a tensor torch computes into new memory that nothing else holds:
    not a view, not a python number, not a name but one of ``names`` (spare ones)."""
    if node.scalar:
        return False
    if isinstance(node, ir.Ref):
        return node.name in names
    if isinstance(node, ir.Binary):
        return node.op in _KERNELS or node.op == "**"
    if isinstance(node, ir.Paren):
        return made_here(node.arg, names)
    if isinstance(node, ir.Apply):
        called = _UNARY_FORM.fullmatch(node.form)
        return (
            (called is not None and called[1] in UNARY)
            or node.form in _FUSED
            or node.form.startswith(_NEW)
        )
    return isinstance(node, (ir.Neg, ir.Where, ir.Matmul, ir.Addmm, ir.Softmax))


class _Spare(NamedTuple):
    """What one statement may write into: the names it reads last (``names``), and the int
    tensors (``ints``), never a buffer (``_into`` takes floats only)."""

    names: frozenset[str]
    ints: Collection[str]


def _buffer(operand: ir.Node, node: ir.Node, spare: _Spare) -> bool:
    """Whether ``operand`` may hold ``node``'s result: made here, a float, over every axis of
    it (one over fewer is broadcast, smaller: ``grad_out / N * probs`` has no buffer; one with
    an axis of size 1 that a reduction kept is left to ``_into``'s check of the shapes)."""
    if not made_here(operand, spare.names) or _integer(operand, spare.ints):
        return False
    return set(operand.axes) >= set(node.axes)


def _rule(node: ir.Node, spare: _Spare) -> ir.Node:
    """``node`` computed into a spare operand's buffer, where one is (``spare``: what this
    statement may write into)."""
    if node.scalar:
        return node
    if isinstance(node, ir.Binary) and node.op in _KERNELS:
        return _binary(node, spare)
    if isinstance(node, ir.Neg) and _buffer(node.arg, node, spare):
        return _into("torch.neg", (node.arg,), 0, node)
    if isinstance(node, ir.Apply):
        called = _UNARY_FORM.fullmatch(node.form)
        if called is not None and called[1] in UNARY and _buffer(node.args[0], node, spare):
            return _into(f"torch.{called[1]}", node.args, 0, node)
        if node.form in _FUSED:
            kernel, tensors = _FUSED[node.form]
            spares = [k for k in range(tensors) if _buffer(node.args[k], node, spare)]
            if spares:
                return _into(kernel, node.args, spares[0], node)
    return node


def _binary(node: ir.Binary, spare: _Spare) -> ir.Node:
    """``a op b`` into a new operand's buffer: the left one, else the right one (swapped for
    + and *, ``torch.sub(a, b, out=b)`` for -, ``-b + a`` where a is a number)."""
    kernel, left, right = _KERNELS[node.op], node.left, node.right
    if _buffer(left, node, spare):
        return _into(kernel, (left, right), 0, node)
    if not _buffer(right, node, spare):
        return node
    if node.op in "+*":
        return _into(kernel, (right, left), 0, node)
    if not left.scalar:  # a tensor minus (over) a new one: torch.sub(a, b, out=b)
        return _into(kernel, (left, right), 1, node)
    if node.op == "-":  # c - t: torch.sub takes no number first
        negated = _into("torch.neg", (right,), 0, right)
        return _into("torch.add", (negated, left), 0, node)
    return node  # c / t: torch.div takes no number first, and 1/t * c rounds twice


def _into(kernel: str, args: tuple[ir.Node, ...], k: int, like: ir.Node) -> ir.Apply:
    # an argument is computed before the call: a group needs no parentheses of its own there
    args = tuple(a.arg if isinstance(a, ir.Paren) else a for a in args)
    slots = ", ".join(f"{{{j}}}" for j in range(len(args)))
    tail = f", into={k}" if k else ""
    return ir.Apply(f"{INTO}({kernel}, {slots}{tail})", tuple(args), axes=like.axes)
