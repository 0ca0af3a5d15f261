"""Axis orders: which order each temporary's axes are stored in, so that its reads permute least.

A temporary takes its axes in the order the lowering met its indices: attention's backward
wrote the product of grad_out's projection and v over (b, t, h, s), a matmul's result permuted
(``(g @ v.T).permute(0, 2, 1, 3)``), and then reads it permuted back for the product with
``probs``, which is over (b, h, t, s). Every ``permute`` is a view, no copy, but it is an aten
call on every run, and at makemore's sizes the calls are the step (issue 27).

Which order a tensor's axes are *labelled* in changes no entry: ``N = old.permute(p)`` holds
the same numbers, and ``old`` is ``N.permute(p^-1)``. :func:`natural_orders` tries, for each
temporary, the orders that would make one of its permutes go (the one its value ends in, or
one a read applies to it), and keeps the one that leaves the block with the fewest
``Permute`` nodes: its value is rewritten in the new order (a permute of a permute is one or
none; an element-wise value takes the order into its operands, which are aligned to it by
their labels), and every read of the name ``old`` becomes ``N.permute(p^-1)``, composed with
the permute around it. An element-wise result is laid out in memory as its operands are
(torch's TensorIterator sorts its output's strides by theirs), so only views move: a rewrite
that makes a matmul copy an operand (:func:`derive.ir.layout.copies`), puts a permute under a
reshape or flatten (which copies a permuted view) or under a sum (``_sum_leading`` blocks only
a contiguous tensor), is not kept; costs compare in that order, permutes last. A value that
holds fewer dimensions than labels (a broadcast's size-1 axis dropped) keeps its order.

Names handed on (saved for the backward, returned) keep their order: the code that reads
them next assumes it, as :mod:`derive.ir.layout` says.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterator

import sympy as sp

from derive.ir import nodes as ir
from derive.ir.layout import Order, copies, neighbours, order
from derive.ir.passes import aligned
from derive.ir.rewrite import assigned_once, composed, mapped_operands

Perm = tuple[int, ...]

# element-wise nodes whose operands are aligned to the node's axes by their labels (trailing
# axes, size-1 axes from a Broadcast): a new order of the node is a new order of each operand
_ALIGNED = (ir.Binary, ir.Neg, ir.Paren, ir.Where, ir.Apply)
MAX_SWEEPS = 4  # an order kept can make another name's worth changing: a few passes over all


def natural_orders(block: list[ir.Statement], keep: Collection[str]) -> list[ir.Statement]:
    """``block`` with the temporaries' axes stored in the orders that leave the fewest
    permutes, no more matmul copies, and no permute a reshape would copy (see the module
    docstring); ``keep``: the names handed on, left in their order."""
    if any(not isinstance(s, (ir.Assign, ir.Free)) for s in block):
        return block  # an in-place update reads its target by position: left as lowered
    names = [
        n
        for n, v in assigned_once(block, keep).items()
        if len(v.axes) > 1
        and len(set(v.axes)) == len(v.axes)
        and rank(v) == len(v.axes)
        and not isinstance(v, ir.Contiguous)
        and _labelled(block, n, len(v.axes))
    ]
    if not names:
        return block
    best = _cost(block)
    for _ in range(MAX_SWEEPS):
        changed = False
        for name in names:
            for p in _candidates(block, name):
                trial = _reordered(block, name, p)
                if trial is None:
                    continue
                cost = _cost(trial)
                if cost < best:
                    block, best, changed = trial, cost, True
        if not changed:
            break
    return block


def _cost(block: list[ir.Statement]) -> tuple[int, int, int]:
    """(matmul copies, other reshapes that copy or reductions of a permuted view, permutes):
    the first two may not grow."""
    orders: dict[str, Order | None] = {}
    permutes = reshaped = 0
    for s in block:
        for root in s.nodes():
            for n in ir.walk(root):
                permutes += isinstance(n, ir.Permute)
                reshaped += _copied_reshape(n, orders)
        if isinstance(s, ir.Assign):
            for name in s.targets:
                orders[name] = order(s.value, orders) if len(s.targets) == 1 else None
    return copies(block, frozenset()), reshaped, permutes


def _copied_reshape(n: ir.Node, orders: dict[str, Order | None]) -> bool:
    """A flatten of axes not neighbours in memory, or a reshape of a tensor not stored in
    its axes' order (torch copies it), or a sum of a permuted view."""
    if isinstance(n, ir.Flatten):
        inner = order(n.arg, orders)
        end = len(n.arg.axes) - 1 if n.end == -1 else n.end
        return inner is not None and not neighbours(inner, range(n.start, end + 1))
    if isinstance(n, ir.Reshape):
        inner = order(n.arg, orders)
        return inner is not None and inner != tuple(range(len(inner)))
    # a sum over leading axes of a permuted view loses _sum_leading's blocks (it needs a
    # contiguous tensor): counted with the copies, so a new order never adds one
    return isinstance(n, ir.Reduce) and isinstance(n.arg, ir.Permute)


def _candidates(block: list[ir.Statement], name: str) -> Iterator[Perm]:
    """Orders that make one permute of ``name`` go: the one its value ends in, and each one
    a read applies to it (``p``: the new tensor is the old one ``.permute(p)``)."""
    seen: set[Perm] = set()
    for s in block:
        for root in s.nodes():
            if isinstance(s, ir.Assign) and s.targets == (name,):
                # the order of what its value permutes: the value itself, or an operand
                # over all of its axes
                axes = root.axes
                inner = [root] if isinstance(root, ir.Permute) else []
                if isinstance(root, _ALIGNED):
                    inner += [v for v in ir.Node.children(root) if isinstance(v, ir.Permute)]
                for v in inner:
                    if len(v.arg.axes) == len(axes) and set(v.arg.axes) == set(axes):
                        p = tuple(axes.index(a) for a in v.arg.axes)
                        if p not in seen:
                            seen.add(p)
                            yield p
                continue
            for parent in ir.walk(root):
                if isinstance(parent, ir.Permute) and _is_read(parent.arg, name):
                    p = parent.perm
                    if p not in seen:
                        seen.add(p)
                        yield p


def _labelled(block: list[ir.Statement], name: str, rank: int) -> bool:
    """Every read of ``name`` labels each of its axes (a view's alias may read its tensor
    unlabelled: which axis is which is then not known here), or asks only an axis's length."""
    stack = [root for s in block for root in s.nodes()]
    while stack:
        n = stack.pop()
        if isinstance(n, ir.SizeOf) and _is_read(n.arg, name):
            continue
        if _is_read(n, name) and len(n.axes) != rank:
            return False
        stack.extend(n.children())
    return True


def _is_read(node: ir.Node, name: str) -> bool:
    return isinstance(node, ir.Ref) and node.name == name and not node.scalar


def _reordered(block: list[ir.Statement], name: str, p: Perm) -> list[ir.Statement] | None:
    """``block`` with ``name`` stored as its old value ``.permute(p)`` (None: its value
    cannot be put in that order here)."""
    back = _inverse(p)
    out: list[ir.Statement] = []
    for s in block:
        if isinstance(s, ir.Assign) and s.targets == (name,):
            value = transposed(s.value, tuple(s.value.axes[k] for k in p))
            if value is None or rank(value) != len(value.axes):
                return None  # a size-1 axis of a broadcast operand left leading is dropped
            s = ir.Assign(s.targets, value)
        elif isinstance(s, ir.Assign) and name in s.reads:
            s = ir.Assign(s.targets, _reads_permuted(s.value, name, p, back))
        out.append(s)
    return out


def _reads_permuted(node: ir.Node, name: str, p: Perm, back: Perm) -> ir.Node:
    """``node`` with each read of ``name`` (stored anew as the old ``.permute(p)``) read as
    the new tensor ``.permute(back)``: the same entries, the same labels. A ``like`` field
    reads only a dtype and a device, and is left as it is."""
    if _is_read(node, name):
        new = ir.Ref(name, axes=tuple(node.axes[k] for k in p))
        return ir.Permute(new, back, axes=node.axes)
    if isinstance(node, ir.SizeOf) and _is_read(node.arg, name):
        # the length of one of its axes: that axis's place in the new order
        return dataclasses.replace(node, dim=back[node.dim])
    changes = {}
    for f in dataclasses.fields(node):
        value = getattr(node, f.name)
        if f.name == "like":
            continue
        if isinstance(value, ir.Node):
            new_value = _reads_permuted(value, name, p, back)
            if new_value is not value:
                changes[f.name] = new_value
        elif isinstance(value, tuple) and any(isinstance(v, ir.Node) for v in value):
            new_tuple = tuple(
                _reads_permuted(v, name, p, back) if isinstance(v, ir.Node) else v for v in value
            )
            if any(a is not b for a, b in zip(new_tuple, value, strict=True)):
                changes[f.name] = new_tuple
    if not changes:
        return node
    node = dataclasses.replace(node, **changes)
    if isinstance(node, ir.Permute) and isinstance(node.arg, ir.Permute):
        return composed(node)
    if isinstance(node, ir.Reduce) and isinstance(node.arg, ir.Permute) and not node.keepdim:
        return _unpermuted_sum(node)
    return node


def _unpermuted_sum(node: ir.Reduce) -> ir.Reduce:
    """``x.permute(p).sum(dims)`` as ``x.sum(dims')`` where the axes kept stay in their order
    either way (dbh summed over (b, t) of the stacked gradients, stored (b, t, s, h, d)): no
    permuted view under the sum, whose blocked column sums need a contiguous tensor."""
    perm = node.arg.perm
    dims = tuple(sorted(perm[d] for d in node.dims))
    kept = [perm[k] for k in range(len(perm)) if k not in node.dims]
    if kept != sorted(kept):
        return node
    return dataclasses.replace(node, arg=node.arg.arg, dims=dims)


def transposed(node: ir.Node, axes: tuple[sp.Symbol, ...]) -> ir.Node | None:
    """``node``'s tensor with its axes in the order ``axes`` lists them: a permute of a
    permute composed into one (or none), an element-wise node's operands each put in the
    order (recursively), a stack's parts too (attention's dq, dk and dv stacked at (b, t, s,
    h, d), as dx's and dWqkv's matmuls read them, where stacked at (b, s, h, t, d) each read
    copied it), anything else permuted as a view; None where ``node`` has fewer
    dimensions than labels (a broadcast: which axis is which is then not a permute's)."""
    if node.axes == axes:
        return node
    if isinstance(node, _ALIGNED) and not node.scalar and _operands_aligned(node):
        changes = mapped_operands(node, lambda v: _operand(v, axes))
        if any(v is None or (isinstance(v, tuple) and None in v) for v in changes.values()):
            return None
        return dataclasses.replace(node, axes=axes, **changes)
    if isinstance(node, ir.Stack):  # its parts in the order, stacked where the order puts it
        new = node.axes[node.dim]
        parts = tuple(transposed(v, tuple(a for a in axes if a != new)) for v in node.parts)
        if any(v is None for v in parts):
            return None
        return dataclasses.replace(node, parts=parts, dim=axes.index(new), axes=axes)
    if rank(node) != len(node.axes):
        return None
    permuted = ir.Permute(node, tuple(node.axes.index(a) for a in axes), axes=axes)
    return composed(permuted) if isinstance(node, ir.Permute) else permuted


def rank(node: ir.Node) -> int:
    """How many dimensions ``node``'s tensor has: its labels', but for a broadcast
    (``y[:, None]`` of a y over (t,) labelled (b, t, s) is 2-D) and element-wise work
    on broadcasts, which has its widest operand's."""
    if node.scalar:
        return 0
    if isinstance(node, ir.Broadcast):
        return len(node.kept) + rank(node.arg) - sum(node.kept)
    if isinstance(node, _ALIGNED):  # not an argument read for its dtype alone (torch.tensor)
        ranks = (rank(v) for v in ir.Node.children(node) if set(v.axes) <= set(node.axes))
        return max(ranks, default=0)
    return len(node.axes)


def _operands_aligned(node: ir.Node) -> bool:
    """Each tensor operand of ``node`` is read as :func:`aligned` puts it against the node's
    axes (so that the same rule puts it against the new order)."""
    for v in ir.Node.children(node):
        if v.scalar or not v.axes:
            continue
        base = v.arg if isinstance(v, ir.Broadcast) else v
        if not set(base.axes) <= set(node.axes) or aligned(base, node.axes) != v:
            return False
    return True


def _operand(v: ir.Node, axes: tuple[sp.Symbol, ...]) -> ir.Node | None:
    """An operand of an element-wise node, aligned to its new ``axes`` (None: it cannot be)."""
    if v.scalar or not v.axes:
        return v
    base = v.arg if isinstance(v, ir.Broadcast) else v
    inner = transposed(base, tuple(a for a in axes if a in base.axes))
    return None if inner is None else aligned(inner, axes)


def _inverse(p: Perm) -> Perm:
    out = [0] * len(p)
    for k, q in enumerate(p):
        out[q] = k
    return tuple(out)
