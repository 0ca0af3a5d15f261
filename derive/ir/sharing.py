"""Common subexpressions: a tensor a function computes twice is computed once.

``torch.square(x) * g + torch.square(x) * y`` becomes ``t = torch.square(x)``, read twice, and
``del t`` after its last read: same kernels, same operands, so the same numbers, one pass over
the tensor instead of two. The pass runs over each definition's statements as it is lowered,
then over the whole function's (a backward's definitions share factors: layernorm's
``gain * grad_out`` is in two of its sums), where a name may hold the value already:

- ``s = v`` earlier (one definition's temporary, freed after its own last read): later reads
  of v read s, and s is freed after them;
- ``s = v`` later: s is computed where v is first read, and read there;
- ``b = v`` after ``a = v``, or ``b = a``, b a temporary: b's reads read a; also where v and
  a's value are alike only once a value inside them is shared (``1 - p`` read as ``s`` in
  one, named ``s`` in the other): the pass then runs again;
- a fused ``r + c a b`` (``torch.addcmul``) whose product ``a * b`` the block computes anyway
  is taken apart first, ``r + c s`` with s that product (``torch.add``'s alpha: one kernel
  still), so that the product is made once: layernorm's backward multiplies ``gain *
  grad_out`` for its two sums and then again inside ``addcmul(-S / C, gain, grad_out)``,
  which becomes ``add(s, S, alpha=-1 / C)``, one kernel where there were two.

Values alike but for the names of their indices (``t[n] >= 0``, ``t[m] >= 0``) print alike:
they are the same tensor. A value is shared only where it means the same tensor at each use:
nothing it reads is written between its first and last use (an in-place update, a name
assigned twice), and a name that holds it is assigned once.
"""

from __future__ import annotations

import dataclasses
import weakref
from collections import Counter
from collections.abc import Callable, Collection, Iterator
from typing import NamedTuple

import sympy as sp

from derive.ir import nodes as ir
from derive.ir.printer import ADD_SCALED, ADDCMUL
from derive.ir.rewrite import (
    NOT_SHARED,
    composed,
    freed,
    operands,
    rebuilt,
    safe,
    stem,
    unfreed,
)

# r + a * b and r + c * a * b as the lowering fuses them (derive.lower.fusions)
_ADDCMULS = ("torch.addcmul({0}, {1}, {2})", ADDCMUL + "({0}, {1}, {2}, {3})")


def common_subexpressions(
    block: list[ir.Statement], fresh: Callable[[str], str], keep: Collection[str] | None = None
) -> list[ir.Statement]:
    """``block`` with each tensor computed more than once bound to one name (one it has
    already, or ``fresh``'s) where it is first used, and freed after its last use (``del t``:
    the block's peak memory holds it no longer than it must); the largest such computation
    first, so a repeated ``a * b + c`` is one temporary, not ``a * b`` and then ``t + c``.
    ``keep``: the names that stay (handed on, or bound by a definition), where known; every
    other name is the lowering's temporary, freed or not yet (a scatter's ``added`` source,
    computed alike for two scatters: a GAT layer's edge scores scattered to both ends of each
    edge)."""
    block = [rebuilt(s, _permutes_out) for s in block]
    block, temps = _one_name_per_value(_products_read_again(block), keep)
    again = False
    while True:
        block = _shared(block, fresh, temps)
        before = len(block)
        # a value shared inside two temporaries' values makes them alike (``1 - p`` read as
        # ``s`` in one, ``s`` named in the other): the later one is then the earlier's value
        block, temps = _one_name_per_value(block, keep)
        if len(block) == before:
            return _refreed(block) if again else block
        again = True


def _permutes_out(node: ir.Node) -> ir.Node:
    """``a.T * b.T`` as ``(a * b).T``, and a permute of a permute as one (or none): work on
    operands permuted alike is the same tensor as the work on them permuted once, so a value
    a contraction reads in its own axis order is found equal to the one computed in the
    stored order (a ConvNeXt MLP's dW1 read ``(t_h.T * s.T).T``, a second product of the
    ``t_h * s`` its dx had named: one pass and one temporary more)."""
    if isinstance(node, ir.Permute) and isinstance(node.arg, ir.Permute):
        return composed(node)
    if not isinstance(node, ir.Binary) or node.scalar:
        return node
    sides = [c for c in (node.left, node.right) if not c.scalar]
    first = sides[0]
    if not all(
        isinstance(c, ir.Permute)
        and c.perm == first.perm
        and c.axes == node.axes
        and c.arg.axes == first.arg.axes
        for c in sides
    ):
        return node
    left, right = (c.arg if c in sides else c for c in (node.left, node.right))
    inner = dataclasses.replace(node, left=left, right=right, axes=first.arg.axes)
    return ir.Permute(inner, first.perm, axes=node.axes)


def _products_read_again(block: list[ir.Statement]) -> list[ir.Statement]:
    """``block`` with each addcmul ``r + c a b`` whose product ``a * b`` (either order) the
    block also computes as a product of its own written ``r + s`` (``_add_scaled(r, s, c)``,
    ``_add_scaled(s, t, k)`` where r is ``k t``) with s that product, which the sharing that
    follows then computes once: one multiply of the full tensor fewer, and the same number
    of kernels where the product was made anyway. Only where the product is safe to share
    between its reads (nothing it reads written between them): elsewhere the fused form
    stays, one kernel against two."""
    block = _matmuls_read_again(block)
    made: dict[_Key, list[int]] = {}
    for k, s in enumerate(block):
        for node in _products(s):
            made.setdefault(_unlabelled(node), []).append(k)
    if not made:
        return block

    def opened(n: ir.Node, k: int) -> ir.Node:
        if not (isinstance(n, ir.Apply) and n.form in _ADDCMULS):
            return n
        r, a, b = n.args[:3]
        shown = set(a.axes) | set(b.axes)
        axes = tuple(x for x in n.axes if x in shown)
        for product in (ir.Binary("*", a, b, axes=axes), ir.Binary("*", b, a, axes=axes)):
            at = made.get(_unlabelled(product), [])
            if at and safe(block, product, sorted({*at, k})):
                break
        else:
            return n
        if len(n.args) == 3:
            scaled = _scaled(r)
            if scaled is None:
                return ir.Binary("+", r, product, axes=n.axes)
            t, c = scaled
            return ir.Apply(ADD_SCALED + "({0}, {1}, {2})", (product, t, c), axes=n.axes)
        return ir.Apply(ADD_SCALED + "({0}, {1}, {2})", (r, product, n.args[3]), axes=n.axes)

    return [rebuilt(s, lambda n, k=k: opened(n, k)) for k, s in enumerate(block)]


def _matmuls_read_again(block: list[ir.Statement]) -> list[ir.Statement]:
    """``block`` with each ``addmm(c, a, b)`` whose product ``a @ b`` the block also computes
    written ``c + a @ b``, which the sharing then computes once: a SwiGLU's backward made
    ``grad_out @ W2.T`` for one gate's adjoint and again inside the other's addmm (found
    probing). Only where the product is safe to share between its reads."""
    made: dict[_Key, list[int]] = {}
    for k, s in enumerate(block):
        nodes = list(_candidates(s))
        if isinstance(s, ir.Assign) and len(s.targets) == 1:
            nodes.append(s.value)
        for node in nodes:
            if isinstance(node, ir.Matmul):
                made.setdefault(_unlabelled(node), []).append(k)
    if not made:
        return block

    def opened(n: ir.Node, k: int) -> ir.Node:
        if not isinstance(n, ir.Addmm):
            return n
        product = ir.Matmul(n.left, n.right, axes=n.axes)
        at = made.get(_unlabelled(product), [])
        if not at or not safe(block, product, sorted({*at, k})):
            return n
        return ir.Binary("+", n.bias, product, axes=n.axes)

    return [rebuilt(s, lambda n, k=k: opened(n, k)) for k, s in enumerate(block)]


def _products(s: ir.Statement) -> Iterator[ir.Node]:
    """The products of two tensors ``s`` computes: below its value, or its whole value."""
    nodes = list(_candidates(s))
    if isinstance(s, ir.Assign) and len(s.targets) == 1:
        nodes.append(s.value)
    for node in nodes:
        if isinstance(node, ir.Binary) and node.op == "*":
            if not (node.left.scalar or node.right.scalar):
                yield node


def _scaled(r: ir.Node) -> tuple[ir.Node, ir.Node] | None:
    """(t, c) where ``r`` is a tensor t times a python number c (``s * (-1 / C)``), broadcast
    or not; None otherwise."""
    view = r if isinstance(r, ir.Broadcast) else None
    inner = r.arg if view is not None else r
    if not (isinstance(inner, ir.Binary) and inner.op == "*"):
        return None
    for t, c in ((inner.left, inner.right), (inner.right, inner.left)):
        if c.scalar and not t.scalar:
            c = c.arg if isinstance(c, ir.Paren) else c
            return (dataclasses.replace(view, arg=t) if view is not None else t), c
    return None


def _refreed(block: list[ir.Statement]) -> list[ir.Statement]:
    """``block`` with each ``del`` after its name's last read (a temporary dropped for an
    earlier one leaves the names its value read freed where it was last read)."""
    names = list(dict.fromkeys(n for s in block if isinstance(s, ir.Free) for n in s.names))
    for name in names:
        block = unfreed(block, name)
    return freed(block, names)


def _shared(
    block: list[ir.Statement], fresh: Callable[[str], str], temps: list[str]
) -> list[ir.Statement]:
    """``block`` with each value :func:`_repeated` finds bound to one name, each of ``temps``
    and each new name freed after its last read."""
    temps = list(temps)
    seen: dict[int, tuple[ir.Statement, list[tuple[_Key, ir.Node]]]] = {}
    while (found := _repeated(block, seen)) is not None:
        if found.holder is None:
            name = fresh(stem(found.node))
            block.insert(found.first, ir.Assign((name,), found.node))
            start = found.first + 1
        else:
            name = block[found.holder].targets[0]
            if found.holder > found.first:  # computed where it is first read
                block.insert(found.first, block.pop(found.holder))
            start = min(found.holder, found.first) + 1
        writes = Counter(n for s in block for n in s.writes)
        block[start:] = [_read_as(s, found.node, name, writes) for s in block[start:]]
        if found.holder is not None and any(
            isinstance(s, ir.Free) and name in s.names for s in block
        ):  # a temporary read later now: freed after its last read
            block = unfreed(block, name)
            temps += [] if name in temps else [name]
        elif found.holder is None:
            temps.append(name)
    return freed(block, temps)


class _Found(NamedTuple):
    """A value to share: where it is first read, and the statement whose name holds it."""

    node: ir.Node
    first: int
    holder: int | None


def _repeated(
    block: list[ir.Statement], seen: dict[int, tuple[ir.Statement, list]] | None = None
) -> _Found | None:
    """The largest computation read twice or more, or read once where a name holds it, that
    can be shared safely; None when there is none. ``seen``: each statement's candidates by
    its id, from an earlier round (a round rewrites a few statements and keeps the others,
    whose trees were walked again each round: 44 of a fuzz op's 176 s, fuzz --windows
    12601329)."""
    writes = Counter(n for s in block for n in s.writes)
    uses: dict[_Key, list[int]] = {}
    example: dict[_Key, ir.Node] = {}
    holders: dict[_Key, int] = {}
    seen = {} if seen is None else seen
    for k, s in enumerate(block):
        known = seen.get(id(s))
        if known is None or known[0] is not s:
            known = s, [(_unlabelled(node), node) for node in _candidates(s)]
            seen[id(s)] = known
        for key, node in known[1]:
            uses.setdefault(key, []).append(k)
            example.setdefault(key, node)
        a = _single(s)
        if a is not None and writes[a] == 1 and _worth_a_name(s.value):
            holders.setdefault(_unlabelled(s.value), k)
    found = []
    for key, at in uses.items():
        holder = holders.get(key)
        if len(at) == 1 and holder is None:  # read once, held by no name: nothing to share
            continue
        if not safe(block, example[key], at):
            continue
        if holder is not None and not _can_hold(block, holder, at, example[key]):
            holder = None
        if len(at) > 1 or holder is not None:
            found.append(_Found(example[key], at[0], holder))
    if not found:
        return None
    return max(found, key=lambda f: (_size(f.node), -f.first))


def _can_hold(block: list[ir.Statement], k: int, at: list[int], node: ir.Node) -> bool:
    """Whether ``block[k]``'s name (assigned once, to ``node``) can hold it for the reads
    ``at``: nothing ``node`` reads written between them, and, where the name comes after the
    first read (its statement moves up to it), the name read nowhere before its statement
    (an input it rebinds)."""
    if not safe(block, node, sorted({k, at[0], at[-1]})):
        return False
    a = block[k].targets[0]
    return k < at[0] or not any(a in s.reads for s in block[:k])


def _one_name_per_value(
    block: list[ir.Statement], keep: Collection[str] | None = None
) -> tuple[list[ir.Statement], list[str]]:
    """``block`` with each temporary ``b = v`` (freed, or not in ``keep``) whose value an
    earlier ``a = v`` holds already, or ``b = a``, dropped and read as ``a``; and the names
    whose ``del`` must be placed again (after their new last read)."""
    temps: list[str] = []
    writes = Counter(n for s in block for n in s.writes)
    dels = {n for s in block if isinstance(s, ir.Free) for n in s.names}

    def temporary(name: str | None) -> bool:
        return name is not None and (name in dels or (keep is not None and name not in keep))

    k = 0
    while k < len(block):
        a = _holder(block, k, writes) if temporary(_single(block[k])) else None
        if a is None:
            k += 1
            continue
        b = block[k].targets[0]
        block = block[:k] + [_renamed(s, b, a) for s in unfreed(block[k + 1 :], b)]
        if a in dels:  # read later now: its del goes after its last read
            block = unfreed(block, a)
            temps += [] if a in temps else [a]
        k = 0  # a del dropped before k moves what follows: look again from the start
    return block, temps


def _holder(block: list[ir.Statement], k: int, writes: Counter) -> str | None:
    """An earlier name assigned once to the value ``block[k]`` assigns, nothing it reads
    written since, or the tensor it names again (``b = a``, a not written after); None when
    there is none."""
    value = block[k].value
    if writes[block[k].targets[0]] != 1:
        return None
    if isinstance(value, ir.Ref) and not value.scalar:  # b = a: b is another name for a
        return None if any(value.name in s.writes for s in block[k:]) else value.name
    if not _worth_a_name(value):
        return None
    bare = _unlabelled(value)
    for i in range(k - 1, -1, -1):
        s = block[i]
        if s.writes & ir.refs(value):
            return None
        a = _single(s)
        if a is not None and writes[a] == 1 and _unlabelled(s.value) == bare:
            return a
    return None


def _single(s: ir.Statement) -> str | None:
    """The name ``s`` assigns, where it is an assignment of one name."""
    return s.targets[0] if isinstance(s, ir.Assign) and len(s.targets) == 1 else None


def _worth_a_name(value: ir.Node) -> bool:
    """A computation on tensor data, not new storage an update writes nor a view."""
    return not (isinstance(value, ir.Ref) or value.scalar or isinstance(value, NOT_SHARED))


class _Key:
    """A value's shape with its index labels numbered in order of first appearance, depth
    first (``t[n] >= 0`` and ``t[m] >= 0`` are one key): hashed once, its children's keys
    held, not copied, so two keys compare in the size of what differs. Equal keys are one
    object (:data:`_KEYS`): the sharing pass looks each candidate's key up every round, and
    a lookup that met an equal key of another node compared their whole trees (10 of a fuzz
    op's 31 s in the pass, fuzz --windows 12601329)."""

    __slots__ = ("parts", "hash", "__weakref__")

    def __init__(self, parts: tuple) -> None:
        self.parts = parts
        self.hash = hash(parts)

    def __hash__(self) -> int:
        return self.hash

    def __eq__(self, other: object) -> bool:
        return self is other or (
            isinstance(other, _Key) and self.hash == other.hash and self.parts == other.parts
        )


_KEYS: weakref.WeakValueDictionary[_Key, _Key] = weakref.WeakValueDictionary()


def _unlabelled(node: ir.Node) -> _Key:
    """The key of ``node`` alike but for the names of its indices: two values with one key are
    the same tensor. Labels are renumbered, not dropped: an einsum's subscripts are the
    relation between its operands' axes and its own, which a consistent renaming keeps (two
    contractions of the same operands onto other axes are other tensors). Built from its
    children's keys and kept on the node (asked of it many times; nodes are immutable)."""
    return _labelled(node)[0]


def _labelled(node: ir.Node) -> tuple[_Key, tuple[sp.Symbol, ...]]:
    """``node``'s key and its labels in order of first appearance (its own axes, a
    contraction's letters, then each child's labels in field order)."""
    known = node.__dict__.get("_key")
    if known is None:
        order: dict[sp.Symbol, int] = {}

        def numbered(labels: tuple[sp.Symbol, ...]) -> tuple[int, ...]:
            return tuple(order.setdefault(a, len(order)) for a in labels)

        def part(value: object) -> object:
            if not isinstance(value, ir.Node):
                return value
            key, labels = _labelled(value)
            return key, numbered(labels)

        parts: list[object] = [type(node), numbered(node.axes)]
        for f in dataclasses.fields(node):
            value = getattr(node, f.name)
            if f.name == "letters":
                parts.append(numbered(value))
            elif f.name != "axes":
                parts.append(tuple(map(part, value)) if isinstance(value, tuple) else part(value))
        key = _Key(tuple(parts))
        key = _KEYS.setdefault(key, key)
        known = (key, tuple(order))
        object.__setattr__(node, "_key", known)  # not a field: equality ignores it
    return known


def _read_as(s: ir.Statement, node: ir.Node, name: str, writes: Counter) -> ir.Statement:
    """``s`` reading ``name`` (over each read's own axes) wherever it computes ``node``'s
    value under any labels; an
    assignment's whole value too (``b = name``: another name for the tensor), unless b is
    written again (updated in place: it must stay storage of its own)."""
    key = _unlabelled(node)
    if isinstance(s, ir.Assign) and _unlabelled(s.value) == key:
        own = any(writes[t] != 1 for t in s.targets)
        return s if own else dataclasses.replace(s, value=ir.Ref(name, axes=s.value.axes))
    needs = ir.refs(node)

    def rule(n: ir.Node) -> ir.Node:
        same = type(n) is type(node) and _unlabelled(n) == key
        return ir.Ref(name, axes=n.axes) if same else n

    # a subtree that does not read every variable the key reads cannot compute it
    return rebuilt(s, rule, enter=lambda n: needs <= ir.refs(n))


def _renamed(s: ir.Statement, old: str, new: str) -> ir.Statement:
    """``s`` reading ``new`` wherever it read ``old``."""

    def rule(n: ir.Node) -> ir.Node:
        return dataclasses.replace(n, name=new) if isinstance(n, ir.Ref) and n.name == old else n

    return rebuilt(s, rule)


def _candidates(s: ir.Statement) -> Iterator[ir.Node]:
    """The tensor computations ``s`` makes below its own value: an assignment's whole value
    (or a view of it) is its target's storage, which an update may write, so never shared."""
    roots = list(s.nodes())
    if isinstance(s, ir.Assign):
        (value,) = roots
        while isinstance(value, ir.View):
            value = value.arg
        roots = list(operands(value))
    for root in roots:
        yield from _below(root)


def _below(node: ir.Node) -> tuple[ir.Node, ...]:
    """``node`` and the computations under it worth a name, depth first: on tensor data (an
    index built from sizes alone, ``torch.arange(N)``, is cheaper to make again than to
    keep). Kept on the node: a statement the sharing rewrote is walked again each round, and
    all of it but the nodes the rewrite made is the tree it was."""
    known = node.__dict__.get("_below")
    if known is None:
        known = ()
        if not (isinstance(node, ir.Ref) or node.scalar or not _on_data(node)):
            own = () if isinstance(node, NOT_SHARED) else (node,)
            known = sum((_below(child) for child in node.children()), own)
        object.__setattr__(node, "_below", known)
    return known


def _on_data(node: ir.Node) -> bool:
    """Whether ``node`` reads entries of a tensor (kept on it, as :func:`_size`)."""
    known = node.__dict__.get("_on_data")
    if known is None:
        if isinstance(node, ir.Ref):
            known = not node.scalar
        else:  # from its operands' (kept on them), not a walk of its tree: ``data``'s reading
            known = any(
                _on_data(v)
                for f in dataclasses.fields(node)
                if f.name != "like"
                for v in _nodes_in(getattr(node, f.name))
            )
        object.__setattr__(node, "_on_data", known)
    return known


def _nodes_in(value: object) -> tuple[ir.Node, ...]:
    """The nodes a field holds: itself, or those in its tuple."""
    if isinstance(value, ir.Node):
        return (value,)
    if isinstance(value, tuple):
        return tuple(v for v in value if isinstance(v, ir.Node))
    return ()


def _size(node: ir.Node) -> int:
    """How many nodes ``node`` is (kept on it: asked of every candidate each round)."""
    known = node.__dict__.get("_size")
    if known is None:
        known = 1 + sum(_size(c) for c in operands(node))
        object.__setattr__(node, "_size", known)
    return known
