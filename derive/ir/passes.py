"""Passes over the kernel IR: statements in, statements out, nothing else changed.

- :func:`common_subexpressions`: a tensor a block computes twice is computed once, into a name
  (``t = torch.square(x)``), read where it was computed before, and freed after its last use.
  Same kernels, same operands, so the same numbers: one pass over the tensor, not two.
- :func:`merged_siblings`: contractions that differ only in which slice of one tensor they
  read, ``q = x @ W[:, 0]``, ``k = x @ W[:, 1]``, ``v = x @ W[:, 2]``, are one contraction of
  the whole tensor, ``s = einsum(x, W)`` with the sliced axis kept, each read as its slice
  ``s[0]``, ``s[1]``, ``s[2]``: one kernel (one matmul of Wqkv) instead of three, each entry
  the same sum of the same products.
- :func:`batched_matmuls`: a contraction that is a batched matrix product, ``sum_k A[b, i, k]
  B[b, k, j]``, as ``A @ B`` (torch.matmul) rather than an einsum: the same bmm, half the calls.
- :func:`released`: each tensor the block computes is freed after the last statement that
  reads it (``del t``), unless the function hands it on (returned, saved): a function's peak
  memory then holds its temporaries no longer than they are needed, as autograd's engine
  frees a node's buffers once its last consumer has run.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Iterator
from typing import NamedTuple

import sympy as sp

from derive.ir import nodes as ir

# new storage, which an update writes in place, or a view: never bound to a shared name
NOT_SHARED = (ir.View, ir.Zeros, ir.Full, ir.Clone, ir.IndexAdd, ir.Select)


def common_subexpressions(
    block: list[ir.Statement], fresh: Callable[[str], str]
) -> list[ir.Statement]:
    """``block`` with each tensor computed more than once bound to a name (``fresh`` gives
    it) just before its first use, and freed after its last (``del t``: the block's peak
    memory holds it no longer than it must); the largest such computation first, so a
    repeated ``a * b + c`` is one temporary, not ``a * b`` and then ``t + c``.

    A computation is shared only where it means the same tensor at each use: no statement
    between its first and its last use writes what it reads (an in-place update, a name
    assigned twice)."""
    block, temps = list(block), []
    while (found := _repeated(block)) is not None:
        node, first = found
        name = ir.Ref(fresh(_stem(node)), axes=node.axes)
        rest = [_replaced(s, node, name) for s in block[first:]]
        block = block[:first] + [ir.Assign((name.name,), node)] + rest
        temps.append(name.name)
    return _freed(block, temps)


def _freed(block: list[ir.Statement], temps: list[str]) -> list[ir.Statement]:
    """``block`` with ``del`` after the last statement that reads each of ``temps``."""
    last: dict[int, list[str]] = {}
    for name in temps:
        k = max(k for k, s in enumerate(block) if name in s.reads)
        last.setdefault(k, []).append(name)
    out = []
    for k, s in enumerate(block):
        out.append(s)
        if k in last:
            out.append(ir.Free(tuple(last[k])))
    return out


def _repeated(block: list[ir.Statement]) -> tuple[ir.Node, int] | None:
    """The largest computation used at least twice where sharing it is safe, and the index of
    the statement that first uses it; None when there is none."""
    uses: dict[ir.Node, list[int]] = {}
    for k, s in enumerate(block):
        for node in _candidates(s):
            uses.setdefault(node, []).append(k)
    found = [(node, at) for node, at in uses.items() if len(at) > 1 and _safe(block, node, at)]
    if not found:
        return None
    node, at = max(found, key=lambda f: (_size(f[0]), -f[1][0]))
    return node, at[0]


def _safe(block: list[ir.Statement], node: ir.Node, at: list[int]) -> bool:
    """Nothing ``node`` reads is written from its first use up to its last."""
    reads = {n.name for n in ir.walk(node) if isinstance(n, ir.Ref)}
    return not any(block[k].writes & reads for k in range(at[0], at[-1]))


def _candidates(s: ir.Statement) -> Iterator[ir.Node]:
    """The tensor computations ``s`` makes below its own value: an assignment's whole value
    (or a view of it) is its target's storage, which an update may write, so never shared."""
    roots = list(s.nodes())
    if isinstance(s, ir.Assign):
        (value,) = roots
        while isinstance(value, ir.View):
            value = value.arg
        roots = list(_operands(value))
    for root in roots:
        yield from _below(root)


def _below(node: ir.Node) -> Iterator[ir.Node]:
    """``node`` and the computations under it worth a name: on tensor data (an index built
    from sizes alone, ``torch.arange(N)``, is cheaper to make again than to keep)."""
    if isinstance(node, ir.Ref) or node.scalar or not any(_data(node)):
        return
    if not isinstance(node, NOT_SHARED):
        yield node
    for child in _operands(node):
        yield from _below(child)


def _operands(node: ir.Node) -> Iterator[ir.Node]:
    """The nodes in ``node``'s fields (a Heaviside's dtype tensor included)."""
    for f in dataclasses.fields(node):
        value = getattr(node, f.name)
        if isinstance(value, ir.Node):
            yield value
        elif isinstance(value, tuple):
            yield from (v for v in value if isinstance(v, ir.Node))


def _size(node: ir.Node) -> int:
    return 1 + sum(_size(c) for c in _operands(node))


def _stem(node: ir.Node) -> str:
    """A temporary's name: the tensors it computes from, ``shared_gain_rstd`` (not ``t_``,
    which names a tangent in ``_jvp``)."""
    return "_".join(["shared", *sorted(set(_data(node)))])


def _data(node: ir.Node) -> Iterator[str]:
    """The tensors ``node`` reads entries of (not those it takes a dtype or device from)."""
    if isinstance(node, ir.Ref):
        yield from () if node.scalar else (node.name,)
        return
    for f in dataclasses.fields(node):
        value = getattr(node, f.name)
        if f.name != "like":
            for v in value if isinstance(value, tuple) else (value,):
                yield from _data(v) if isinstance(v, ir.Node) else ()


def _replaced(x, old: ir.Node, new: ir.Node):
    """``x`` (a statement or a node) with every ``old`` read as ``new``."""
    if x == old:
        return new
    changes = {}
    for f in dataclasses.fields(x):
        value = getattr(x, f.name)
        if isinstance(value, ir.Node):
            changes[f.name] = _replaced(value, old, new)
        elif isinstance(value, tuple) and any(isinstance(v, ir.Node) for v in value):
            changes[f.name] = tuple(
                _replaced(v, old, new) if isinstance(v, ir.Node) else v for v in value
            )
    return dataclasses.replace(x, **changes) if changes else x


# -- sibling contractions ----------------------------------------------------------------------
class _Sibling(NamedTuple):
    """What sibling contractions share: everything but one constant subscript ``at[p]`` of
    their operand ``j``, a slice of ``arg`` (sizes: the length of each sliced axis)."""

    axes: tuple[sp.Symbol, ...]
    letters: tuple[sp.Symbol, ...]
    before: tuple[ir.Node, ...]  # the operands before j, and after it
    after: tuple[ir.Node, ...]
    arg: ir.Node
    at: tuple[int | None, ...]  # the slice's constants, at[p] left out (None)
    p: int
    sizes: tuple[sp.Expr, ...]
    operand_axes: tuple[sp.Symbol, ...]


def merged_siblings(block: list[ir.Statement], fresh: Callable[[str], str]) -> list[ir.Statement]:
    """``block`` with each family of sibling contractions (:class:`_Sibling`) computed once,
    whole, into a name (``fresh`` gives it) just before the first statement that reads one of
    them, each read as its slice of that tensor, and the tensor freed after its last use.

    sum_c x[b, c] W[c, k, m] for k = 0 .. K - 1, each its own einsum, is the slice k of
    S[k, b, m] = sum_c x[b, c] W[c, k, m]: the same products summed over the same c, from one
    kernel that reads x once. Only where the slices are every entry of the axis (nothing is
    computed that no one reads) and nothing the contraction reads is written between its
    first and its last use."""
    block = list(block)
    for key, family in _families(block):
        at = [k for k, s in enumerate(block) if any(_holds(s, n) for n in family.values())]
        merged = _merged(key)
        if not at or not _safe(block, merged, at):
            continue
        whole = ir.Ref(fresh(_stem(merged)), axes=merged.axes)
        rest = block[at[0] :]
        for k, node in family.items():
            rest = [_replaced(s, node, ir.Slice(whole, (k,), axes=node.axes)) for s in rest]
        block = _freed(block[: at[0]] + [ir.Assign((whole.name,), merged)] + rest, [whole.name])
    return block


def _families(block: list[ir.Statement]) -> list[tuple[_Sibling, dict[int, ir.Contract]]]:
    """Each family of siblings in ``block`` (slice constant -> contraction), in order of first
    appearance, that reads every slice of its axis: 0 .. n - 1, n > 1."""
    groups: dict[_Sibling, dict[int, ir.Contract]] = {}
    for s in block:
        for root in s.nodes():
            for node in ir.walk(root):
                if isinstance(node, ir.Contract):
                    for key, k in _sibling_keys(node):
                        groups.setdefault(key, {}).setdefault(k, node)
    return [(key, f) for key, f in groups.items() if set(f) == _every(key) and len(f) > 1]


def _sibling_keys(node: ir.Contract) -> Iterator[tuple[_Sibling, int]]:
    """For each operand of ``node`` read as a constant slice of a tensor whose sliced axes'
    lengths are known, and each constant of it: the siblings' key, and that constant."""
    for j, op in enumerate(node.operands):
        if isinstance(op, ir.Slice) and len(op.sizes) == len(op.at):
            for p, k in enumerate(op.at):
                if k is not None:
                    at = op.at[:p] + (None,) + op.at[p + 1 :]
                    before, after = node.operands[:j], node.operands[j + 1 :]
                    key = (node.axes, node.letters, before, after, op.arg, at, p)
                    yield _Sibling(*key, op.sizes, op.axes), k


def _every(key: _Sibling) -> set[int]:
    """Every entry of the sliced axis (none where its length is not a number)."""
    n = key.sizes[key.p]
    return set(range(int(n))) if n.is_Integer else set()


def _merged(key: _Sibling) -> ir.Contract:
    """The siblings' contraction over the whole sliced axis, kept as the result's first axis
    (so sibling k is ``whole[k]``)."""
    s = _new_axis(key)
    kept = sum(1 for x in key.at[: key.p] if x is None)  # the operand's axes before the new one
    axes = key.operand_axes[:kept] + (s,) + key.operand_axes[kept:]
    at = key.at
    while at and at[-1] is None:
        at = at[:-1]
    if at:
        operand = ir.Slice(key.arg, at, key.sizes[: len(at)], axes=axes)
    else:
        operand = ir.relabel(key.arg, axes)
    operands = key.before + (operand,) + key.after
    return ir.Contract(operands, key.letters + (s,), axes=(s,) + key.axes)


def _new_axis(key: _Sibling) -> sp.Symbol:
    """An index no axis of the contraction uses: it labels the sliced axis."""
    taken = {a for op in key.before + key.after for a in op.axes}
    taken |= set(key.axes) | set(key.letters) | set(key.operand_axes)
    return next(s for k in range(len(taken) + 1) if (s := sp.Symbol(f"slice{k}")) not in taken)


def _holds(s: ir.Statement, node: ir.Node) -> bool:
    """``s`` computes ``node`` somewhere in its trees."""
    return any(n == node for root in s.nodes() for n in ir.walk(root))


# -- contractions as matmuls -------------------------------------------------------------------
def batched_matmuls(block: list[ir.Statement]) -> list[ir.Statement]:
    """``block`` with each two-operand contraction that is a batched matrix product printed as
    one (:func:`_as_matmul`): torch.matmul reaches the same bmm as torch.einsum through half its
    calls (einsum permutes, unsqueezes and views each operand and its result in python-visible
    aten calls; at makemore's sizes those calls are the time)."""
    return [_rebuilt(s, _as_matmul) for s in block]


def _as_matmul(node: ir.Node) -> ir.Node:
    """sum_k A[.., i, k] B[.., k, j] over batch axes both keep -> ``A @ B``: the operands
    permuted to (batch, i, k) and (batch, k, j), the result (batch, i, j) permuted to the
    contraction's order (views). Only one axis summed, one of each side's own axes, and no
    operand broadcast (a size-1 axis einsum would stretch); anything else stays an einsum."""
    if not isinstance(node, ir.Contract) or len(node.operands) != 2:
        return node
    a, b = node.operands
    if any(isinstance(v, ir.Broadcast) or len(set(v.axes)) != len(v.axes) for v in (a, b)):
        return node
    bound = [x for x in dict.fromkeys(a.axes + b.axes) if x not in node.axes]
    batch = tuple(x for x in node.axes if x in a.axes and x in b.axes)
    left = [x for x in a.axes if x not in batch and x not in bound]
    right = [x for x in b.axes if x not in batch and x not in bound]
    if len(bound) != 1 or bound[0] not in a.axes or bound[0] not in b.axes:
        return node
    if len(left) != 1 or len(right) != 1 or len(node.axes) != len(batch) + 2:
        return node
    (k,) = bound
    (i,), (j,) = left, right
    if node.axes.index(i) > node.axes.index(j):  # (A B)^T = B^T A^T: no transpose of the result
        (a, i), (b, j) = (b, j), (a, i)
    mm = ir.Matmul(_permuted(a, batch + (i, k)), _permuted(b, batch + (k, j)), axes=batch + (i, j))
    return _permuted(mm, node.axes)


def _permuted(v: ir.Node, axes: tuple[sp.Symbol, ...]) -> ir.Node:
    """``v`` with its axes in the order ``axes`` lists them (itself if they are; a permute of
    a permute is one)."""
    if isinstance(v, ir.Permute) and set(v.arg.axes) == set(axes):
        v = v.arg
    if v.axes == axes:
        return v
    return ir.Permute(v, tuple(v.axes.index(x) for x in axes), axes=axes)


def _rebuilt(x, rule: Callable[[ir.Node], ir.Node]):
    """``x`` (a statement or a node) with ``rule`` applied to every node, children first."""
    changes = {}
    for f in dataclasses.fields(x):
        value = getattr(x, f.name)
        if isinstance(value, ir.Node):
            changes[f.name] = _rebuilt(value, rule)
        elif isinstance(value, tuple) and any(isinstance(v, ir.Node) for v in value):
            changes[f.name] = tuple(
                _rebuilt(v, rule) if isinstance(v, ir.Node) else v for v in value
            )
    changed = any(changes[name] is not getattr(x, name) for name in changes)
    x = dataclasses.replace(x, **changes) if changed else x
    return rule(x) if isinstance(x, ir.Node) else x


def released(block: list[ir.Statement], keep: Collection[str]) -> list[ir.Statement]:
    """``block`` with ``del`` after the last statement that reads each name it assigns,
    except the names in ``keep`` (what the function returns or saves, what code after the
    block reads) and those a ``del`` frees already (:func:`common_subexpressions`'). A name
    no statement reads is left as it is, and so is a view of a tensor the block did not make
    (``Wh = Wqkv.reshape(..)``: its storage is the caller's, freed by no ``del`` here). Only
    a name is dropped: a view of it, or a saved tuple holding it, keeps its storage alive, so
    freeing early never frees what is used."""
    freed = {n for s in block if isinstance(s, ir.Free) for n in s.names}
    made = {n for s in block for n in s.writes}
    assigned = dict.fromkeys(
        n
        for s in block
        if isinstance(s, ir.Assign) and not _views_outside(s.value, made)
        for n in s.targets
    )
    names = [n for n in assigned if n not in keep and n not in freed]
    return _freed(block, [n for n in names if any(n in s.reads for s in block)])


# the nodes that print as a view of their argument: no new storage
VIEWS = (
    ir.Permute,
    ir.Broadcast,
    ir.Slice,
    ir.Reshape,
    ir.Expand,
    ir.Unsqueeze,
    ir.Squeeze,
    ir.Narrow,
    ir.Unfold,
)


def _views_outside(node: ir.Node, made: Collection[str]) -> bool:
    """A view (a reshape, a slice), through any chain of views, of a named tensor not in
    ``made``."""
    while isinstance(node, VIEWS):
        node = node.arg
    return isinstance(node, ir.Ref) and node.name not in made
