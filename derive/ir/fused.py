"""Fused kernels: element-wise work and the reduction it feeds, as the one torch kernel for both.

A softmax written out, ``m = max_d a``, ``e = exp(a - m)``, ``s = sum_d e``, ``p = e / s``,
is four kernels and four passes over the tensor; ``torch.softmax(a, d)`` is one, and it is the
same function: for any m constant along d,

    exp(a_d - m) / sum_d' exp(a_d' - m) = exp(a_d) / sum_d' exp(a_d') = softmax_d(a),

and the kernel subtracts the row's maximum itself, so no m (or one that is not the maximum)
loses nothing: its result is finite wherever the row holds a finite entry. The rule reads the
statements, never an op's name: wherever a block assigns ``p = reciprocal(s) * e`` (or ``e /
s``, in either order) with ``s`` the sum of ``e`` over one axis, ``e = exp(a - m)`` or
``exp(a)`` with ``m`` broadcast along that axis, and nothing else reads ``e`` or ``s``, ``p``
is ``torch.softmax(a, d)`` and ``e`` and ``s`` go (``m`` too, where nothing else reads it).
A masked row (``where(j <= i, s, -inf)``, attention's) is as it was: the kernel's exp of -inf
is 0. In the catalogue: softmax's forward and attention's probabilities.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection

from derive.ir import nodes as ir
from derive.ir.rewrite import unfreed

EXP = "torch.exp({0})"
RECIPROCAL = "torch.reciprocal({0})"


def softmaxes(block: list[ir.Statement], keep: Collection[str]) -> list[ir.Statement]:
    """``block`` with each softmax written out (see the module docstring) computed by
    ``torch.softmax``; ``keep``: the names the function hands on (never removed)."""
    while (found := _softmax(block, frozenset(keep))) is not None:
        block = found
    return block


def _softmax(block: list[ir.Statement], keep: frozenset[str]) -> list[ir.Statement] | None:
    """``block`` with its first softmax written out fused, or None where it has none."""
    values = _assigned_once(block, keep)
    reads = _reads(block)
    for k, s in enumerate(block):
        if not (isinstance(s, ir.Assign) and len(s.targets) == 1):
            continue
        parts = _quotient(s.value)
        if parts is None:
            continue
        counts, sums = parts
        e, total = values.get(counts.name), values.get(sums.arg.name)
        if e is None or total is None or reads[counts.name] != 2 or reads[sums.arg.name] != 1:
            continue
        if not (
            isinstance(total, ir.Reduce)
            and total.kind == "sum"
            and not total.keepdim
            and len(total.dims) == 1
            and total.arg == counts
        ):
            continue
        d = total.dims[0]
        if sums.kept != tuple(j != d for j in range(len(counts.axes))):
            continue
        arg = _exponent(e, d, counts.axes)
        if arg is None:
            continue
        start = next(j for j, t in enumerate(block) if counts.name in t.writes)
        if any(block[j].writes & ir.refs(arg) for j in range(start + 1, k)):
            continue  # what the exponent reads changes before the quotient
        fused = ir.Assign(s.targets, ir.Softmax(arg, d, axes=counts.axes))
        gone = {counts.name, sums.arg.name}
        out = [fused if j == k else t for j, t in enumerate(block) if not _assigns(t, gone)]
        for name in gone | ir.refs(arg):
            out = unfreed(out, name)  # freed again after their last read (passes.released)
        return _dead(out, _shifts(e), keep)
    return None


def _quotient(v: ir.Node) -> tuple[ir.Ref, ir.Broadcast] | None:
    """``(e, s)`` where ``v`` is ``e * reciprocal(s)``, ``reciprocal(s) * e`` or ``e / s``,
    with ``s`` a name broadcast to ``e``'s axes: ``(Ref e, Broadcast of Ref s)``."""
    if not isinstance(v, ir.Binary):
        return None
    if v.op == "/":
        pairs = [(v.left, v.right)]
    elif v.op == "*":
        pairs = [(v.left, _reciprocal(v.right)), (v.right, _reciprocal(v.left))]
    else:
        return None
    for e, s in pairs:
        if (
            isinstance(e, ir.Ref)
            and not e.scalar
            and isinstance(s, ir.Broadcast)
            and isinstance(s.arg, ir.Ref)
            and s.axes == e.axes == v.axes
        ):
            return e, s
    return None


def _reciprocal(v: ir.Node) -> ir.Node | None:
    """``s`` broadcast where ``v`` is its reciprocal, broadcast before or after."""
    if isinstance(v, ir.Apply) and v.form == RECIPROCAL:
        inner = v.args[0]
        return inner if isinstance(inner, ir.Broadcast) else None
    if isinstance(v, ir.Broadcast) and isinstance(v.arg, ir.Apply) and v.arg.form == RECIPROCAL:
        return ir.Broadcast(v.arg.args[0], v.kept, axes=v.axes)
    return None


def _exponent(e: ir.Node, d: int, axes: tuple) -> ir.Node | None:
    """``a`` where ``e`` is ``exp(a - m)`` with ``m`` constant along axis ``d``, or ``exp(a)``;
    ``a`` over ``axes``, as ``e`` is."""
    if not (isinstance(e, ir.Apply) and e.form == EXP and e.axes == axes):
        return None
    (x,) = e.args
    if isinstance(x, ir.Binary) and x.op == "-" and _constant_along(x.right, d):
        x = x.left
    return x if x.axes == axes else None


def _constant_along(m: ir.Node, d: int) -> bool:
    """``m`` is the same at every position of axis ``d``: a broadcast over it, or a number."""
    if isinstance(m, ir.Number) or m.scalar:
        return True
    return isinstance(m, ir.Broadcast) and not m.kept[d]  # its axes are the exponent's


def _shifts(e: ir.Node) -> set[str]:
    """The names the exponent of ``e`` subtracted (``m`` of ``exp(a - m)``)."""
    (x,) = e.args
    if isinstance(x, ir.Binary) and x.op == "-":
        return set(ir.refs(x.right))
    return set()


def _dead(block: list[ir.Statement], names: set[str], keep: frozenset[str]) -> list[ir.Statement]:
    """``block`` without the single-target assignments of ``names`` no statement reads any
    more (the row maximum a softmax no longer subtracts), unless handed on."""
    reads = _reads(block)
    values = _assigned_once(block, keep)
    gone = {n for n in names if n in values and reads[n] == 0}
    out = [t for t in block if not _assigns(t, gone)]
    for name in gone:
        out = unfreed(out, name)
    return out


def _assigned_once(block: list[ir.Statement], keep: frozenset[str]) -> dict[str, ir.Node]:
    """The names a single-target assignment writes, written nowhere else and not handed on."""
    writes = Counter(n for s in block for n in s.writes)
    return {
        s.targets[0]: s.value
        for s in block
        if isinstance(s, ir.Assign)
        and len(s.targets) == 1
        and writes[s.targets[0]] == 1
        and s.targets[0] not in keep
    }


def _reads(block: list[ir.Statement]) -> Counter[str]:
    """How many times each name is read, counted per reference (a ``del`` is no read)."""
    count: Counter[str] = Counter()
    for s in block:
        if isinstance(s, ir.Free):
            continue
        for root in s.nodes():
            count.update(n.name for n in ir.walk(root) if isinstance(n, ir.Ref))
    return count


def _assigns(s: ir.Statement, names: set[str]) -> bool:
    return isinstance(s, ir.Assign) and len(s.targets) == 1 and s.targets[0] in names
