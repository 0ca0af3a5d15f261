"""Passes over the kernel IR: statements in, statements out, nothing else changed.

- :func:`~derive.ir.sharing.common_subexpressions` (its own module): a tensor a block computes
  twice is computed once, into a name, and freed after its last use.
- :func:`merged_siblings`: contractions that differ only in which slice of one tensor they
  read, ``q = x @ W[:, 0]``, ``k = x @ W[:, 1]``, ``v = x @ W[:, 2]``, are one contraction of
  the whole tensor, ``s = einsum(x, W)`` with the sliced axis kept, each read as its slice
  ``s[0]``, ``s[1]``, ``s[2]``: one kernel (one matmul of Wqkv) instead of three, each entry
  the same sum of the same products.
- :func:`stacked_siblings`: contractions that differ in one operand B_k, stacked or added,
  are one contraction of the stack of the B_k (attention's dx and dWqkv over dq, dk, dv).
- :func:`batched_matmuls`: a contraction that is a (batched) matrix product, its groups of
  axes flattened into one, as ``A @ B`` (torch.matmul), a product over the same axes summed as
  ``(a * b).sum(k)``, rather than an einsum: the same kernels, a half to a quarter the calls.
- :func:`released`: each tensor the block computes is freed after the last statement that
  reads it (``del t``), unless the function hands it on (returned, saved): a function's peak
  memory then holds its temporaries no longer than they are needed, as autograd's engine
  frees a node's buffers once its last consumer has run.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator
from typing import NamedTuple

import sympy as sp

from derive.ir import nodes as ir
from derive.ir.rewrite import data, freed, rebuilt, replaced, safe, stem, unfreed, unused_axis


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
        if not at or not safe(block, merged, at):
            continue
        whole = ir.Ref(fresh(stem(merged)), axes=merged.axes)
        rest = block[at[0] :]
        n = (key.sizes[key.p],)  # the sliced axis's length: merged_maps reads every slice
        for k, node in family.items():
            rest = [replaced(s, node, ir.Slice(whole, (k,), n, axes=node.axes)) for s in rest]
        block = freed(block[: at[0]] + [ir.Assign((whole.name,), merged)] + rest, [whole.name])
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
    return unused_axis(taken)


def _holds(s: ir.Statement, node: ir.Node) -> bool:
    """``s`` computes ``node`` somewhere in its trees."""
    return any(n == node for root in s.nodes() for n in ir.walk(root))


# -- stacks of sibling contractions -----------------------------------------------------------
class _Part(NamedTuple):
    """One term of a sum, or one part of a stack: ``value`` (a contraction or a sum, bound to
    the single-use name ``name`` at statement ``at``), scaled by a python number (``op``,
    ``scale``; None: not scaled)."""

    name: str
    at: int
    value: ir.Node
    op: str | None
    scale: ir.Node | None


def stacked_siblings(block: list[ir.Statement], fresh: Callable[[str], str]) -> list[ir.Statement]:
    """``block`` with each family of contractions that differ in one operand, B_k, and are
    stacked or added, contracted once over the stack of the B_k (bound to a name ``fresh``
    gives, shared by every family that stacks the same B_k alike):

    - stack_k(c_k sum_K A B_k) = sum_K A stack_k(c_k B_k), and likewise a stack of sums;
    - sum_k c_k sum_K W[.., k, ..] B_k = sum_{K, k} W stack_k(c_k B_k), every k of W's axis.

    Attention's dx and dWqkv read q's, k's and v's gradients, each through its slice of Wqkv:
    two matmuls over the stacked gradients instead of six (autograd's dqkv). Each entry sums
    the same products, in another order, the scale c_k applied before the sum (c sum = sum
    c): equal up to rounding. Only contractions bound to a name read once, with nothing they
    read written before they are read; a stack is shared only where nothing it reads is
    written between it and the family that reads it again."""
    block, stacks, names = list(block), {}, []
    k, parts = 0, _single_use(block, kinds=_SIBLINGS)
    while k < len(block):
        found = _first_family(block, k, parts)
        if found is None:
            k += 1
            continue
        node, members, rewrite = found
        if rewrite.key in stacks and not _still(block, stacks[rewrite.key], rewrite.value, k):
            del stacks[rewrite.key]  # what it stacked was written since: a stack of its own
        if rewrite.key not in stacks:
            name = fresh("stacked_" + next(data(rewrite.value)))  # its first tensor
            stacks[rewrite.key] = name
            names.append(name)
            block.insert(k, ir.Assign((name,), rewrite.value))
            k += 1
        whole = rewrite.over(ir.Ref(stacks[rewrite.key], axes=rewrite.value.axes))
        block[k] = replaced(block[k], node, whole)
        dropped = {m.at for m in members}
        block = [s for j, s in enumerate(block) if j not in dropped]
        k -= sum(1 for j in dropped if j < k)
        parts = _single_use(block, kinds=_SIBLINGS)  # positions moved, a stack's name is read
    return freed(block, names)


def _still(block: list[ir.Statement], name: str, value: ir.Node, k: int) -> bool:
    """The stack bound to ``name`` still holds ``value`` at statement ``k``."""
    at = next(j for j, s in enumerate(block) if isinstance(s, ir.Assign) and s.targets == (name,))
    return safe(block, value, [at, k])


def _first_family(
    block: list[ir.Statement], k: int, parts: dict[str, tuple[int, ir.Node]]
) -> tuple | None:
    """The first family of siblings statement ``k`` reads whole: (its node, its members, its
    rewrite), where every member's contraction may move to statement ``k`` (nothing it reads
    is written between); ``parts`` is ``block``'s :func:`_single_use`."""
    for root in block[k].nodes():
        for node in ir.walk(root):
            rewrite = _family(node, parts)
            if rewrite is None:
                continue
            members = _members(node, parts)
            if all(safe(block, m.value, [m.at, k]) for m in members):
                return node, members, rewrite
    return None


def _members(node: ir.Node, parts: dict) -> list[_Part]:
    nodes = node.parts if isinstance(node, ir.Stack) else _terms(node)
    return [_part(p, parts) for p in nodes]


def _single_use(
    block: list[ir.Statement], frees: bool = False, kinds: tuple = (ir.Contract, ir.Reduce)
) -> dict[str, tuple[int, ir.Node]]:
    """Names bound to a contraction or a sum (a node of ``kinds``) and read exactly once, never
    updated, and never freed (with ``frees``: freed, or not)."""
    reads: dict[str, int] = {}
    for s in block:
        if frees and isinstance(s, ir.Free):
            continue
        for root in s.nodes():
            for n in ir.walk(root):
                if isinstance(n, ir.Ref):
                    reads[n.name] = reads.get(n.name, 0) + 1
    other = {
        n
        for s in block
        if not isinstance(s, ir.Assign) and not (frees and isinstance(s, ir.Free))
        for n in s.reads | s.writes
    }
    return {
        s.targets[0]: (k, s.value)
        for k, s in enumerate(block)
        if isinstance(s, ir.Assign)
        and len(s.targets) == 1
        and isinstance(s.value, kinds)
        and reads.get(s.targets[0]) == 1
        and s.targets[0] not in other
    }


def _part(node: ir.Node, parts: dict[str, tuple[int, ir.Node]]) -> _Part | None:
    """``node`` as a single-use name, maybe times or over a python number."""
    op, scale = None, None
    if isinstance(node, ir.Binary) and node.op in "*/" and node.right.scalar:
        node, op, scale = node.left, node.op, node.right
    if not isinstance(node, ir.Ref) or node.name not in parts:
        return None
    at, value = parts[node.name]
    if node.axes != value.axes:  # read under other labels: its operands' would not match
        return None
    return _Part(node.name, at, _as_contract(value), op, scale)


# what a family's members may be: a matmul is a contraction the lowering printed as one already
_SIBLINGS = (ir.Contract, ir.Reduce, ir.Matmul)


def _as_contract(v: ir.Node) -> ir.Node:
    """A matmul as the contraction it is (its operands unpermuted: a contraction reads each
    by its axes' labels, in any order); any other node as it is. An LSTM's dx, ``sum_g
    dgate_g @ Wx[:, g].T``, four matmuls over slices of Wx, is then one family: one matmul
    of the stacked gate gradients, as for the Contracts of attention's q, k and v."""
    if not isinstance(v, ir.Matmul):
        return v
    left, right = (x.arg if isinstance(x, ir.Permute) else x for x in (v.left, v.right))
    summed = tuple(a for a in dict.fromkeys(left.axes + right.axes) if a not in v.axes)
    return ir.Contract((left, right), v.axes + summed, axes=v.axes)


def _terms(node: ir.Node) -> list[ir.Node]:
    """The terms of a chain of ``+``."""
    if isinstance(node, ir.Binary) and node.op == "+":
        return _terms(node.left) + _terms(node.right)
    return [node]


class _Stacked(NamedTuple):
    """A family's rewrite: the stack of its B_k (``value``, its axes in B's stored order with
    the new axis at ``dim``), the key under which families share it, and the family's value
    over that stack once the stack has a name (``over``)."""

    value: ir.Stack
    key: tuple
    over: Callable[[ir.Ref], ir.Node]


def _family(node: ir.Node, parts: dict) -> _Stacked | None:
    """``node``'s rewrite where it is a stack or a sum of siblings (see
    :func:`stacked_siblings`); None otherwise."""
    if isinstance(node, ir.Stack):
        members = [_part(p, parts) for p in node.parts]
    elif isinstance(node, ir.Binary) and node.op == "+":
        members = [_part(p, parts) for p in _terms(node)]
    else:
        return None
    if len(members) < 2 or any(m is None for m in members):
        return None
    if len({m.name for m in members}) != len(members):
        return None
    if isinstance(node, ir.Stack):
        return _stacked_parts(node, members)
    return _summed_slices(node, members)


def _stacked_parts(node: ir.Stack, members: list[_Part]) -> _Stacked | None:
    """stack_k(c_k sum_K A B_k) -> sum_K A stack_k(c_k B_k); stack_k(c_k sum B_k) ->
    sum stack_k(c_k B_k)."""
    new = node.axes[node.dim]
    values = [m.value for m in members]
    first = values[0]
    if all(isinstance(v, ir.Reduce) for v in values):
        if any((v.kind, v.dims) != ("sum", first.dims) for v in values):
            return None
        stack = _stack_of([v.arg for v in values], members, new, set(first.axes))
        if stack is None or new in first.arg.axes:
            return None

        def over(t: ir.Ref) -> ir.Node:
            bound = [x for x in t.axes if x not in node.axes]
            dims = tuple(t.axes.index(x) for x in bound)
            kept = tuple(x for x in t.axes if x not in bound)
            return _permuted(ir.Reduce("sum", t, dims, axes=kept), node.axes)

        return _Stacked(stack[0], stack[1], over)
    j = _one_apart(values)
    if j is None or any(new in v.axes or new in v.letters for v in values):
        return None
    stack = _stack_of([v.operands[j] for v in values], members, new, set(first.axes))
    if stack is None:
        return None

    def over_contraction(t: ir.Ref) -> ir.Node:
        operands = first.operands[:j] + (t,) + first.operands[j + 1 :]
        return ir.Contract(operands, first.letters + (new,), axes=node.axes)

    return _Stacked(stack[0], stack[1], over_contraction)


def _one_apart(values: list[ir.Node]) -> int | None:
    """The one operand position where the contractions ``values`` differ (same axes, the
    other operands equal); None otherwise."""
    first = values[0]
    if not all(isinstance(v, ir.Contract) for v in values):
        return None
    if any((v.axes, len(v.operands)) != (first.axes, len(first.operands)) for v in values):
        return None
    differ = [j for j in range(len(first.operands)) if len({v.operands[j] for v in values}) > 1]
    return differ[0] if len(differ) == 1 else None


def _summed_slices(node: ir.Node, members: list[_Part]) -> _Stacked | None:
    """sum_k c_k sum_K W[.., k, ..] B_k -> sum_{K, k} W stack_k(c_k B_k), every k."""
    values = [m.value for m in members]
    if not all(isinstance(v, ir.Contract) and v.axes == node.axes for v in values):
        return None
    first = values[0]
    if any(len(v.operands) != len(first.operands) for v in values):
        return None
    for w in range(len(first.operands)):
        keys = [_slice_key(v, w) for v in values]
        if any(k is None for k in keys) or len({k[0] for k in keys}) != 1:
            continue
        key = keys[0][0]
        order = sorted(range(len(values)), key=lambda m: keys[m][1])
        if [keys[m][1] for m in order] != sorted(_every(key)):
            continue
        j = _differing_position([v.operands[:w] + v.operands[w + 1 :] for v in values])
        if j is None:
            continue
        j += j >= w
        whole = _merged(key).operands[0]
        new = whole.axes[sum(1 for x in key.at[: key.p] if x is None)]
        if new in first.letters:
            return None
        bound = {x for v in first.operands for x in v.axes} - set(first.axes)
        members = [members[m] for m in order]
        stack = _stack_of([values[m].operands[j] for m in order], members, new, bound)
        if stack is None:
            return None

        def over(t: ir.Ref, w=w, j=j, whole=whole, new=new) -> ir.Node:
            operands = list(first.operands)
            operands[w], operands[j] = whole, t
            return ir.Contract(tuple(operands), first.letters + (new,), axes=node.axes)

        return _Stacked(stack[0], stack[1], over)
    return None


def _slice_key(v: ir.Contract, w: int) -> tuple[_Sibling, int] | None:
    """``v``'s operand ``w`` read as a slice of a tensor at one constant of known range: the
    key its siblings share (the contraction's other operands left out), and the constant."""
    op = v.operands[w]
    if not isinstance(op, ir.Slice) or len(op.sizes) != len(op.at):
        return None
    constants = [p for p, k in enumerate(op.at) if k is not None]
    if len(constants) != 1:
        return None
    (p,) = constants
    at = op.at[:p] + (None,) + op.at[p + 1 :]
    return _Sibling(v.axes, (), (), (), op.arg, at, p, op.sizes, op.axes), op.at[p]


def _differing_position(rest: list[tuple]) -> int | None:
    differ = [j for j in range(len(rest[0])) if len({r[j] for r in rest}) > 1]
    return differ[0] if len(differ) == 1 else None


def _stack_of(
    operands: list[ir.Node], members: list[_Part], new: sp.Symbol, before: set
) -> tuple[ir.Stack, tuple] | None:
    """The stack of the tensors ``operands`` read (each a name, or a permute of one), each
    scaled as its member is, in the first one's stored layout (the others read permuted to
    it) with the axis ``new`` before the first axis in ``before``; and its key (the names,
    scales and that position). None where an operand is no plain name or they differ in
    their axes."""
    names, layouts, labels = [], [], None
    for v in operands:
        perm = v.perm if isinstance(v, ir.Permute) else tuple(range(len(v.axes)))
        base = v.arg if isinstance(v, ir.Permute) else v
        if not isinstance(base, ir.Ref) or base.scalar or len(base.axes) != len(v.axes):
            return None
        stored = [None] * len(perm)
        for m, q in enumerate(perm):
            stored[q] = v.axes[m]
        if labels is not None and set(stored) != set(labels):
            return None
        labels = labels or tuple(stored)
        names.append(base.name)
        layouts.append(tuple(stored))
    if new in labels:
        return None
    dim = next((q for q, x in enumerate(labels) if x in before), len(labels))
    parts = []
    for name, stored, m in zip(names, layouts, members, strict=True):
        # one stored in another order is read permuted (torch.stack copies each part anyway)
        part: ir.Node = _permuted(ir.Ref(name, axes=stored), labels)
        if m.op is not None:
            part = ir.Binary(m.op, part, m.scale, axes=labels)
        parts.append(part)
    axes = labels[:dim] + (new,) + labels[dim:]
    key = (tuple((n, m.op, m.scale) for n, m in zip(names, members, strict=True)), dim)
    return ir.Stack(tuple(parts), dim, axes=axes), key


# -- contractions as matmuls -------------------------------------------------------------------
def batched_matmuls(block: list[ir.Statement]) -> list[ir.Statement]:
    """``block`` with each contraction that is a (batched) matrix product printed as one
    (:func:`_as_matmul`), and each that multiplies tensors over the same axes and sums some of
    them as that product summed (:func:`_as_dot`): torch.einsum reaches the same kernels
    through twice to four times the calls (it permutes, unsqueezes and views each operand and
    its result in python-visible aten calls; at makemore's sizes those calls are the time)."""
    block = _biases_inlined(block)
    return [rebuilt(rebuilt(s, _as_addmm), _as_product) for s in block]


def _biases_inlined(block: list[ir.Statement]) -> list[ir.Statement]:
    """``block`` with each contraction bound to a name read once, as a term of a sum that
    :func:`_as_addmm` makes one addmm, read in place (its statement dropped): the lowering
    names a sum inside an expression (so that siblings can be stacked), which would hide the
    bias from the product it rides in."""
    block = list(block)
    parts = _single_use(block, frees=True)  # anew only when a statement was dropped
    k = 0
    while k < len(block):
        found = None
        for root in block[k].nodes():
            for node in ir.walk(root):
                if isinstance(node, ir.Binary) and node.op == "+":
                    found = found or _inlined_bias(block, k, node, parts)
        if found is None:
            k += 1
            continue
        node, new, at = found
        block[k] = statement = replaced(block[k], node, new)
        name = block[at].targets[0]
        del block[at]
        block = unfreed(block, name)
        parts = _single_use(block, frees=True)
        k = next(j for j, s in enumerate(block) if s is statement)
    return block


def _inlined_bias(
    block: list[ir.Statement], k: int, node: ir.Binary, parts: dict[str, tuple[int, ir.Node]]
) -> tuple[ir.Node, ir.Node, int] | None:
    """(``node``, its addmm, the statement to drop) where a side of ``node`` names a
    single-use contraction that may move to statement ``k``; None otherwise."""
    for side in (node.left, node.right):
        if not isinstance(side, ir.Ref) or side.name not in parts:
            continue
        at, value = parts[side.name]
        if not isinstance(value, ir.Contract) or value.axes != side.axes:
            continue
        if not safe(block, value, [at, k]):
            continue
        inlined = replaced(node, side, value)
        new = _as_addmm(inlined)
        if new is not inlined:
            return node, new, at
    return None


def _plain(node: ir.Contract) -> bool:
    """Operands einsum would read as they are: no axis twice in one, none broadcast (a size-1
    axis einsum would stretch), no python number."""
    return not any(
        isinstance(v, ir.Broadcast) or v.scalar or len(set(v.axes)) != len(v.axes)
        for v in node.operands
    )


def _as_addmm(node: ir.Node) -> ir.Node:
    """r[J..] + sum_K A[I.., K..] B[K.., J..] -> ``torch.addmm(r, A, B)``, each group of axes
    flattened into one and the result's unflattened (views): the bias is added in the
    matmul's own pass over its output (the GEMM's beta = 1) instead of a pass of its own.
    Only a product with no batch axis (addmm's operands are matrices) and a bias over exactly
    the kept axes of one side (a vector along the result's columns, however the contraction's
    axes are ordered: a merged q/k/v projection's bias over (slice, head, d))."""
    if not (isinstance(node, ir.Binary) and node.op == "+"):
        return node
    for c, r in ((node.right, node.left), (node.left, node.right)):
        if not isinstance(c, ir.Contract) or c.axes != node.axes or r.scalar:
            continue
        if len(c.operands) != 2 or not _plain(c):
            continue
        bias = r.arg if isinstance(r, ir.Broadcast) else r
        value = _addmm(c, bias)
        if value is not None:
            return value
    return node


def _addmm(c: ir.Contract, bias: ir.Node) -> ir.Node | None:
    """``c`` plus ``bias`` as one addmm (see :func:`_as_addmm`); None where it is none."""
    a, b = c.operands
    bound = tuple(x for x in dict.fromkeys(a.axes + b.axes) if x not in c.axes)
    if not bound or any(x not in a.axes or x not in b.axes for x in bound):
        return None
    if any(x in a.axes and x in b.axes for x in c.axes):
        return None  # a batch axis: addmm's operands are matrices
    for s in (_Sides(a, tuple(x for x in c.axes if x in a.axes), b, ()), None):
        if s is None:
            s = _Sides(b, tuple(x for x in c.axes if x in b.axes), a, ())
        s = s._replace(j=tuple(x for x in c.axes if x in s.b.axes))
        if not s.i or not s.j or set(bias.axes) != set(s.j) or len(bias.axes) != len(s.j):
            continue
        left = _permuted(s.a, s.i + bound)
        left = _flattened(_flattened(left, len(s.i), len(bound)), 0, len(s.i))
        right = _permuted(s.b, bound + s.j)
        right = _flattened(_flattened(right, 0, len(bound)), 1, len(s.j))
        vector = _flattened(_permuted(bias, s.j), 0, len(s.j))
        out: ir.Node | None = ir.Addmm(vector, left, right, axes=s.i[:1] + s.j[:1])
        out = _unflattened(_unflattened(out, 1, s.b, s.j), 0, s.a, s.i)
        if out is not None:
            return _permuted(out, c.axes)
    return None


def _as_product(node: ir.Node) -> ir.Node:
    """A contraction of plain operands (no axis twice in one, none broadcast: a size-1 axis
    einsum would stretch) as a dot product or a matmul, where it is one; else itself."""
    if not isinstance(node, ir.Contract) or any(
        isinstance(v, ir.Broadcast) or v.scalar or len(set(v.axes)) != len(v.axes)
        for v in node.operands
    ):
        return node
    for rule in (_as_dot, _as_matmul):
        value = rule(node)
        if value is not None:
            return value
    return node


def _as_dot(node: ir.Contract) -> ir.Node | None:
    """sum_k a[.., k] b[.., k] c[k] -> ``(a * b * c).sum(k)``: two operands or more over every
    axis of the contraction (the others over some of them) meet in no outer product, so the
    product is no larger than they are; einsum would run it as a bmm of 1 x K by K x 1
    matrices, among permutes and views of each operand."""
    every = tuple(dict.fromkeys(a for v in node.operands for a in v.axes))
    full = [v for v in node.operands if set(v.axes) == set(every)]
    bound = tuple(a for a in every if a not in node.axes)
    if len(full) < 2 or not bound:
        return None
    axes = full[0].axes
    product = node.operands[0] if node.operands[0] is full[0] else aligned(node.operands[0], axes)
    for v in node.operands[1:]:
        product = ir.Binary("*", product, v if v is full[0] else aligned(v, axes), axes=axes)
    dims = tuple(axes.index(a) for a in bound)
    summed = ir.Reduce("sum", product, dims, axes=tuple(a for a in axes if a not in bound))
    return _permuted(summed, node.axes)


def aligned(v: ir.Node, axes: tuple[sp.Symbol, ...]) -> ir.Node:
    """``v`` permuted to ``axes``'s order, size-1 axes where it has none of them (leading
    ones left to broadcasting), so that it broadcasts against a tensor over ``axes``."""
    v = _permuted(v, tuple(a for a in axes if a in v.axes))
    kept = [a in v.axes for a in axes]
    while kept and not kept[0]:
        kept.pop(0)
    while kept and kept[-1]:
        kept.pop()
    return ir.Broadcast(v, tuple(kept), axes=axes) if kept else v


class _Sides(NamedTuple):
    """A matmul's operands and their axes: ``a`` over (batch, i.., k..), ``b`` over (batch,
    k.., j..)."""

    a: ir.Node
    i: tuple[sp.Symbol, ...]
    b: ir.Node
    j: tuple[sp.Symbol, ...]


def _as_matmul(node: ir.Contract) -> ir.Node | None:
    """sum_K A[B.., I.., K..] B[B.., K.., J..] -> ``A @ B`` over batch axes both keep: each
    group of axes flattened into one (K: the summed axes, in one order on both sides), the
    result's groups unflattened and permuted to the contraction's order (views). Without
    batch axes, A's own axes stay leading axes of the matmul (torch.matmul folds them into
    one mm), so only B's may need their lengths (read off the tensor B reads, ``W.shape[2]``);
    a group whose lengths no named tensor shows stays an einsum. Sides are swapped, (A B)^T =
    B^T A^T, where that keeps the last axis last, needs fewer unflattens or permutes less."""
    if len(node.operands) != 2:
        return None
    a, b = node.operands
    bound = tuple(x for x in dict.fromkeys(a.axes + b.axes) if x not in node.axes)
    if not bound or any(x not in a.axes or x not in b.axes for x in bound):
        return None
    batch = tuple(x for x in node.axes if x in a.axes and x in b.axes)
    i = tuple(x for x in node.axes if x in a.axes and x not in batch)
    j = tuple(x for x in node.axes if x in b.axes and x not in batch)
    if (batch and not (i and j)) or not (i or j):
        return None  # a batched matrix-vector product, or a dot product: einsum's
    options = [_Sides(a, i, b, j), _Sides(b, j, a, i)]
    built = [(m, _cost(m, node.axes)) for s in options if (m := _matmul(s, batch, bound))]
    if not built:
        return None
    mm = min(built, key=lambda mc: mc[1])[0]
    return _permuted(mm, node.axes)


def _cost(v: ir.Node, axes: tuple[sp.Symbol, ...]) -> tuple[int, int, int]:
    """Whether the product's last (contiguous) axis is another than the contraction's (its
    readers would then stride through it, or copy it), then its unflattens, then how many of
    its axes the permute to the contraction's order moves."""
    moved = sum(x != y for x, y in zip(v.axes, axes, strict=True))
    return int(v.axes[-1] != axes[-1]), sum(isinstance(x, ir.Unflatten) for x in ir.walk(v)), moved


def _matmul(s: _Sides, batch: tuple, bound: tuple) -> ir.Node | None:
    """``s.a @ s.b`` with its groups flattened and unflattened (None: a length unknown).

    Several batch axes stay as they are (a 4-D ``@``): flattening them into one for a
    ``torch.bmm`` saves torch.matmul's internal expands and reshapes but adds python calls
    (flatten, unflatten, shape reads), which cost more (docs/benchmarks.md, issue 27)."""
    nb = len(batch)
    left = _permuted(s.a, batch + s.i + bound)
    right = _permuted(s.b, batch + bound + s.j)
    if batch:
        left = _flattened(left, nb, len(s.i))
    left = _flattened(left, len(left.axes) - len(bound), len(bound))
    right = _flattened(_flattened(right, nb, len(bound)), nb + 1, len(s.j))
    i = s.i[:1] if batch else s.i
    out: ir.Node = ir.Matmul(left, right, axes=batch + i + s.j[:1])
    out = _unflattened(out, len(batch + i), s.b, s.j)
    if out is not None and batch:
        out = _unflattened(out, nb, s.a, s.i)
    return out


def _flattened(v: ir.Node, start: int, n: int) -> ir.Node:
    """``v`` with its axes ``start`` .. ``start + n - 1`` flattened into one, labelled by the
    first of them."""
    if n < 2:
        return v
    axes = v.axes[: start + 1] + v.axes[start + n :]
    end = -1 if start + n == len(v.axes) else start + n - 1
    return ir.Flatten(v, start, end, axes=axes)


def _unflattened(v: ir.Node | None, dim: int, source: ir.Node, group: tuple) -> ir.Node | None:
    """``v``'s axis ``dim`` split back into the axes ``group`` of ``source`` (their lengths
    read off the tensor ``source`` views; one unknown as -1); None where two are unknown."""
    if v is None or len(group) < 2:
        return v
    sizes = [_length(source, source.axes.index(x)) for x in group]
    if sum(n is None for n in sizes) > 1:
        return None
    sizes = [ir.Number(-1) if n is None else n for n in sizes]
    axes = v.axes[:dim] + group + v.axes[dim + 1 :]
    return ir.Unflatten(v, dim, tuple(sizes), axes=axes)


def _length(v: ir.Node, dim: int) -> ir.Node | None:
    """The length of ``v``'s axis ``dim`` as a python number read off a named tensor it
    views (a permute or a slice of it); None where there is none."""
    if isinstance(v, ir.Ref):
        return None if v.scalar else ir.SizeOf(v, dim)
    if isinstance(v, ir.Permute):
        return _length(v.arg, v.perm[dim])
    if isinstance(v, ir.Slice):
        # the slice's axes are the ones ``at`` leaves (None) and the arg's past ``at``
        # (counted off the slice's own axes: a view's alias reads its arg unlabelled)
        kept = [k for k, at in enumerate(v.at) if at is None]
        kept += list(range(len(v.at), len(v.at) + len(v.axes) - len(kept)))
        return _length(v.arg, kept[dim])
    return None


def _permuted(v: ir.Node, axes: tuple[sp.Symbol, ...]) -> ir.Node:
    """``v`` with its axes in the order ``axes`` lists them (itself if they are; a permute of
    a permute is one)."""
    if isinstance(v, ir.Permute) and set(v.arg.axes) == set(axes):
        v = v.arg
    if v.axes == axes:
        return v
    return ir.Permute(v, tuple(v.axes.index(x) for x in axes), axes=axes)


def released(block: list[ir.Statement], keep: Collection[str]) -> list[ir.Statement]:
    """``block`` with ``del`` after the last statement that reads each name it assigns,
    except the names in ``keep`` (what the function returns or saves, what code after the
    block reads) and those a ``del`` frees already (:func:`common_subexpressions`'). A name
    no statement reads is left as it is, and so is a view of a tensor the block did not make
    (``Wh = Wqkv.reshape(..)``: its storage is the caller's, freed by no ``del`` here). Only
    a name is dropped: a view of it, or a saved tuple holding it, keeps its storage alive, so
    freeing early never frees what is used."""
    dels = {n for s in block if isinstance(s, ir.Free) for n in s.names}
    made = {n for s in block for n in s.writes}
    assigned = dict.fromkeys(
        n
        for s in block
        if isinstance(s, ir.Assign) and not _views_outside(s.value, made)
        for n in s.targets
    )
    names = [n for n in assigned if n not in keep and n not in dels]
    return freed(block, [n for n in names if any(n in s.reads for s in block)])


# the nodes that print as a view of their argument: no new storage
VIEWS = (
    ir.Permute,
    ir.Broadcast,
    ir.Slice,
    ir.Reshape,
    ir.Flatten,
    ir.Unflatten,
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
