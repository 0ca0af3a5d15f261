"""Layouts: which named tensors to store in their own axes' order, where a matmul would copy.

A tensor's axes (its labels, the IR's logical order) need not be the order of its entries in
memory. A matmul's result permuted to the contraction's order is a view: ``s = (x @ W)
.unflatten(..).permute(2, 0, 3, 1, 4)`` holds (slice, b, h, t, d) in the memory order (b, t,
slice, h, d) of the matmul it views, and an element-wise result takes the layout of its
operands (torch's TensorIterator orders its output's strides as its inputs' are). Every
batched matmul that reads such a tensor (``q @ k.T`` over the batch axes (b, h)) must first
fold its batch axes into one, which a layout where b and h are not neighbours cannot do
without a copy: attention's q, k and v were copied by each matmul that read them, in the
forward and again in the backward.

:func:`contiguous_layouts` models the layout of every name a block assigns (:func:`order`:
the positions of its axes from the outermost to the innermost in memory), counts the
matmul operands that would be copied, and stores a permuted view contiguous
(``.contiguous()``: one copy) where that saves two copies or more. A name the function hands
on (saved for the backward) counts as read once more by a matmul that would copy it: the
next function's matmuls assume a saved tensor is laid out in its axes' order, as the one
the lowering wrote. Only copies are moved: every entry is the same number.
"""

from __future__ import annotations

from collections.abc import Collection

from derive.ir import nodes as ir

Order = tuple[int, ...]  # the positions of a tensor's axes, outermost first in memory

# nodes whose result is new storage in their own axes' order (not a reduction or a cumsum:
# torch lays their results out as their argument is)
_FRESH = (ir.Matmul, ir.Addmm, ir.Contract, ir.Stack, ir.Conv, ir.ConvWeight, ir.Contiguous)


def contiguous_layouts(
    block: list[ir.Statement], keep: Collection[str] | None
) -> list[ir.Statement]:
    """``block`` with each name bound to a permuted view stored contiguous where that saves
    two copies or more (see the module docstring); ``keep``: the names handed on (None:
    unknown, none counted)."""
    kept = frozenset(keep or ())
    block = list(block)
    count = copies(block, kept)
    for k, s in enumerate(block):
        if not _candidate(s):
            continue
        trial = list(block)
        trial[k] = ir.Assign(s.targets, ir.Contiguous(s.value, axes=s.value.axes))
        fewer = copies(trial, kept)
        if count - fewer >= 2:
            block, count = trial, fewer
    return block


def _candidate(s: ir.Statement) -> bool:
    """An assignment of a permuted view of a tensor (not of an input's own storage)."""
    if not (isinstance(s, ir.Assign) and len(s.targets) == 1):
        return False
    v = s.value
    if not isinstance(v, ir.Permute):
        return False
    while isinstance(v, (ir.Permute, ir.Unflatten)):
        v = v.arg
    return isinstance(v, _FRESH)


def copies(block: list[ir.Statement], kept: frozenset[str]) -> int:
    """How many matmul operands of ``block`` would be copied, plus the names handed on that
    are not stored in their axes' order."""
    orders: dict[str, Order | None] = {}
    count = 0
    for s in block:
        for root in s.nodes():
            for node in ir.walk(root):
                if isinstance(node, (ir.Matmul, ir.Addmm)):
                    sides = (node.left, node.right)
                    count += sum(_copied(v, _lead(node, v), orders) for v in sides)
        if isinstance(s, ir.Assign) and len(s.targets) == 1:
            orders[s.targets[0]] = order(s.value, orders)
        elif isinstance(s, ir.Assign):
            for name in s.targets:
                orders[name] = None
        else:
            for name in s.writes:
                orders.pop(name, None)
    for name in kept:
        o = orders.get(name)
        if o is not None and o != tuple(range(len(o))):
            count += 1
    return count


def order(node: ir.Node, orders: dict[str, Order | None]) -> Order | None:
    """The positions of ``node``'s axes from the outermost to the innermost in memory
    (``orders``: the names assigned so far); None where it is not known (a broadcast, a
    reshape, a tensor read unlabelled: taken as its own order by a reader). An input, or a
    tensor another function made, is taken to be stored in its axes' order."""
    o = _order(node, orders)
    return o if o is not None and sorted(o) == list(range(len(node.axes))) else None


def _order(node: ir.Node, orders: dict[str, Order | None]) -> Order | None:
    n = len(node.axes)
    if n == 0:
        return None  # a python number, or a tensor read without its labels
    if isinstance(node, ir.Ref):
        return orders.get(node.name, tuple(range(n)))
    if isinstance(node, _FRESH):
        return tuple(range(n))
    if isinstance(node, ir.Permute):
        inner = order(node.arg, orders)
        return None if inner is None else tuple(node.perm.index(q) for q in inner)
    if isinstance(node, ir.Unflatten):
        inner = order(node.arg, orders)
        if inner is None:
            return None
        grow = len(node.sizes) - 1
        out: list[int] = []
        for q in inner:
            if q == node.dim:
                out.extend(range(q, q + grow + 1))
            else:
                out.append(q + grow if q > node.dim else q)
        return tuple(out)
    if isinstance(node, ir.Slice):
        inner = order(node.arg, orders)
        if inner is None:
            return None
        gone = {q for q, k in enumerate(node.at) if k is not None}
        return tuple(q - sum(1 for g in gone if g < q) for q in inner if q not in gone)
    if isinstance(node, ir.Flatten):
        inner = order(node.arg, orders)
        end = _end(node)
        if inner is None or not neighbours(inner, range(node.start, end + 1)):
            return tuple(range(n))  # a copy, contiguous
        gone = end - node.start
        return tuple(q - gone if q > end else q for q in inner if not node.start < q <= end)
    if isinstance(node, ir.Clone):  # .clone() keeps a dense tensor's strides
        return order(node.arg, orders)
    if isinstance(node, ir.Map):
        for c in node.children():  # the first operand over every axis sets the layout
            if len(c.axes) == n and not isinstance(c, ir.Broadcast) and not c.scalar:
                return order(c, orders)
        return tuple(range(n))
    return None


def _copied(v: ir.Node, lead: int, orders: dict[str, Order | None]) -> bool:
    """Whether torch.matmul copies the operand ``v`` before its kernel: a flatten of axes
    not neighbours in memory, ``lead`` leading axes (a batch, or a 2-D product's rows) it
    cannot fold into one, or a matrix whose rows and columns both stride."""
    w = v
    while isinstance(w, ir.View):
        if isinstance(w, ir.Flatten):
            inner = order(w.arg, orders)
            if inner is not None and not neighbours(inner, range(w.start, _end(w) + 1)):
                return True  # the flatten copies (and what it returns is contiguous)
        w = w.arg
    o = order(v, orders)
    if o is None or len(o) < 2:
        return False
    r = len(o)
    if lead > 1 and not neighbours(o, range(lead)):
        return True
    return lead < r - 1 and o[-1] not in (r - 1, r - 2)


def _lead(node: ir.Matmul | ir.Addmm, side: ir.Node) -> int:
    """The leading axes torch.matmul folds into one: under a 2-D right side, all of the left
    side's but its last (its rows), else the batch axes (all but the matrix's two)."""
    if isinstance(node, ir.Matmul) and side is node.left and len(node.right.axes) == 2:
        return len(side.axes) - 1
    return max(len(side.axes) - 2, 0)


def _end(v: ir.Flatten) -> int:
    return len(v.arg.axes) - 1 if v.end == -1 else v.end


def neighbours(o: Order, group: range) -> bool:
    """The positions ``group`` follow one another in memory, in their own order."""
    positions = list(group)
    if len(positions) < 2:
        return True
    at = o.index(positions[0])
    return list(o[at : at + len(positions)]) == positions
