"""Fused kernels: element-wise work and the reduction it feeds, as the one torch kernel for both.

A softmax written out, ``m = max_d a``, ``e = exp(a - m)``, ``s = sum_d e``, ``p = e / s``,
is four kernels and four passes over the tensor; ``torch.softmax(a, d)`` is one, and it is the
same function. So is a log-softmax, ``a - m - log(s)``, ``torch.log_softmax(a, d)``. For any m
constant along d (a row's maximum, any other row statistic, a number, none),

    exp(a_d - m) / sum_d' exp(a_d' - m)     = exp(a_d) / sum_d' exp(a_d')  = softmax_d(a),
    a_d - m - log(sum_d' exp(a_d' - m))     = a_d - log(sum_d' exp(a_d'))  = log_softmax_d(a),

and the kernels subtract the row's maximum themselves, so an m that is not the maximum (or
none) loses nothing: their results are finite wherever the row holds a finite entry, where the
written-out form may overflow. A masked row (``where(j <= i, s, -inf)``, attention's) is as
it was: the kernels' exp of -inf is 0.

The rule reads the statements, never an op's name. A value is matched through the names the
block assigns once and does not hand on (``e``, ``s``, ``1 / s``, ``a - m``: each read
through its value); where one matches, the statement's value is the kernel of ``a`` (of the
exponent whole, where more than one of its terms varies along d), and every name that only
the matched value read goes (the exp, the sum, the maximum) unless another statement still
reads it. A kernel replaces its statement only where the sum goes too: cross-entropy's
probabilities and log-probabilities share one sum, and both become kernels; a sum that is
saved, or read by any other statement, stays, and so does the statement (the kernel would
compute the sum again). The terms outside a log-softmax's log and inside its exponent must
be the same, read through the same names: ``a - m1 - log(sum exp(a - m2))`` with m1 != m2
is no log-softmax, and stays written out.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Collection

from derive.ir import nodes as ir
from derive.ir.rewrite import assigned_once, unfreed

EXP = "torch.exp({0})"
LOG = "torch.log({0})"
RECIPROCAL = "torch.reciprocal({0})"

Term = tuple[int, ir.Node]  # a sign (+1, -1) and a node: one term of a sum


def softmaxes(block: list[ir.Statement], keep: Collection[str]) -> list[ir.Statement]:
    """``block`` with each softmax and log-softmax written out (see the module docstring)
    computed by its torch kernel; ``keep``: the names the function hands on (never removed).

    A kernel replaces its statement only where the sum it reads goes with it (with those of
    other kernels: cross-entropy's two share one): where the sum stays (saved, read by
    another statement), the kernel would compute it once more, and the statement stays as
    it is."""
    kept, skip = frozenset(keep), set()
    while True:
        out, sums = _fused(block, kept, skip)
        stay = {t for t, total in sums.items() if any(_computes(s, total) for s in out)}
        if not stay:
            return out
        skip |= stay


def _fused(
    block: list[ir.Statement], keep: frozenset[str], skip: set[str]
) -> tuple[list[ir.Statement], dict[str, ir.Reduce]]:
    """``block`` with every (log-)softmax fused but those assigning a name in ``skip``, and
    the sum each fused statement read (by its target)."""
    sums: dict[str, ir.Reduce] = {}
    k = 0
    while k < len(block):
        s = block[k]
        k += 1
        if not (isinstance(s, ir.Assign) and len(s.targets) == 1) or s.targets[0] in skip:
            continue
        ctx = _Block(block, keep)
        found = _softmax(ctx, s.value) or _log_softmax(ctx, s.value)
        if found is None or not ctx.movable(found[0].arg, k - 1):
            continue
        fused, sums[s.targets[0]] = found
        new = ir.Assign(s.targets, fused)
        block = [*block[: k - 1], new, *block[k:]]
        for name in ir.refs(fused.arg):  # read later now: freed again after (passes.released)
            block = unfreed(block, name)
        block = _dead(block, set(ir.refs(s.value)), keep)
        k = next(j for j, t in enumerate(block) if t is new) + 1
    return block, sums


def _computes(s: ir.Statement, total: ir.Reduce) -> bool:
    return any(n == total for root in s.nodes() for n in ir.walk(root))


class _Block:
    """What the matching reads of a block: the value of each name it assigns once and does
    not hand on (read through, as if written inline), and where each name is written."""

    def __init__(self, block: list[ir.Statement], keep: frozenset[str]) -> None:
        self.block = block
        self.values = assigned_once(block, keep)

    def see(self, node: ir.Node) -> ir.Node:
        """``node``, or the value of the name it reads, through any chain of names."""
        while isinstance(node, ir.Ref) and node.name in self.values:
            value = self.values[node.name]
            if value.axes != node.axes:  # read under other labels: not the same node
                return node
            node = value
        return node

    def deep(self, node: ir.Node) -> ir.Node:
        """``node`` with every name read through: two values are the same tensor where
        their deep forms are equal."""
        node = self.see(node)
        changes = {}
        for f in dataclasses.fields(node):
            value = getattr(node, f.name)
            if isinstance(value, ir.Node):
                changes[f.name] = self.deep(value)
            elif isinstance(value, tuple) and any(isinstance(v, ir.Node) for v in value):
                changes[f.name] = tuple(
                    self.deep(v) if isinstance(v, ir.Node) else v for v in value
                )
        return dataclasses.replace(node, **changes) if changes else node

    def terms(self, node: ir.Node, sign: int = 1) -> list[Term]:
        """``node`` as signed terms, through ``+``, ``-``, unary minus and the names holding
        them; a term is the node as read (a name stays a name: a kernel reads it, never
        computes its value again)."""
        seen = self.see(node)
        if isinstance(seen, ir.Binary) and seen.op in "+-" and seen.axes == seen.left.axes:
            right = sign if seen.op == "+" else -sign
            if seen.right.axes == seen.axes or _constant(seen.right):
                return self.terms(seen.left, sign) + self.terms(seen.right, right)
        if isinstance(seen, ir.Neg):
            return self.terms(seen.arg, -sign)
        return [(sign, node)]

    def movable(self, node: ir.Node, k: int) -> bool:
        """``node`` read at statement ``k`` is the value it had where the fused statements
        read it: every name it reads is an input or assigned once, before ``k``."""
        writes = Counter(n for s in self.block for n in s.writes)
        for name in ir.refs(node):
            at = [j for j, s in enumerate(self.block) if name in s.writes]
            if writes[name] > 1 or any(j >= k for j in at):
                return False
        return True


def _softmax(ctx: _Block, v: ir.Node) -> tuple[ir.Softmax, ir.Reduce] | None:
    """``softmax(a, d)`` where ``v`` is exp(a - m) times the reciprocal of its sum along d
    (or over it), m constant along d."""
    if not isinstance(v, ir.Binary):
        return None
    if v.op == "/":
        pairs = [(v.left, _broadcast_row(ctx, v.right, None))]
    elif v.op == "*":
        pairs = [
            (v.left, _broadcast_row(ctx, v.right, RECIPROCAL)),
            (v.right, _broadcast_row(ctx, v.left, RECIPROCAL)),
        ]
    else:
        return None
    for e, row in pairs:
        if row is None:
            continue
        total, d = row
        e = ctx.see(e)
        if not (_is_exp(e) and e.axes == v.axes and ctx.deep(total.arg) == ctx.deep(e)):
            continue
        arg = _varying(ctx, ctx.terms(e.args[0]), d) or e.args[0]
        return ir.Softmax(arg, d, axes=v.axes), total
    return None


def _log_softmax(ctx: _Block, v: ir.Node) -> tuple[ir.Softmax, ir.Reduce] | None:
    """``log_softmax(a, d)`` where ``v`` is a - m - log(sum_d exp(a - m)), m constant along
    d, the same terms outside the log as in its exponent."""
    if not isinstance(v, ir.Binary) or v.op not in "+-":
        return None
    terms = ctx.terms(v)
    logs = [
        (t, row) for t in terms if t[0] < 0 and (row := _broadcast_row(ctx, t[1], LOG)) is not None
    ]
    if len(logs) != 1:
        return None
    log_term, (total, d) = logs[0]
    e = ctx.see(total.arg)
    if not (_is_exp(e) and e.axes == v.axes):
        return None
    outside = [t for t in terms if t is not log_term]
    inside = ctx.terms(e.args[0])
    if Counter(_keyed(ctx, outside)) != Counter(_keyed(ctx, inside)):
        return None
    arg = _varying(ctx, outside, d) or e.args[0]
    return ir.Softmax(arg, d, log=True, axes=v.axes), total


def _broadcast_row(ctx: _Block, node: ir.Node, form: str | None) -> tuple[ir.Reduce, int] | None:
    """``(s, d)`` where ``node`` is ``form`` of a sum ``s`` over one axis ``d``, broadcast back
    along it (the function applied before or after the broadcast; ``None``: no function)."""
    node = ctx.see(node)
    if form is not None and isinstance(node, ir.Apply) and node.form == form:
        inner = ctx.see(node.args[0])
        if not isinstance(inner, ir.Broadcast):
            return None
        node, form = inner, None  # f(broadcast(s)): the same as broadcast(f(s))
    if not isinstance(node, ir.Broadcast) or list(node.kept).count(False) != 1:
        return None
    d = node.kept.index(False)
    inner = ctx.see(node.arg)
    if form is not None:
        if not (isinstance(inner, ir.Apply) and inner.form == form):
            return None
        inner = ctx.see(inner.args[0])
    ok = isinstance(inner, ir.Reduce) and inner.kind == "sum" and inner.dims == (d,)
    return (inner, d) if ok and not inner.keepdim and inner.arg.axes == node.axes else None


def _varying(ctx: _Block, terms: list[Term], d: int) -> ir.Node | None:
    """The one term of ``terms`` that varies along axis ``d``, positive; the others constant
    along it, which the kernel need not subtract (it is shift-invariant along d). None where
    there is no such one term: the kernel reads the exponent whole."""
    varying = [(sign, t) for sign, t in terms if not _constant(ctx.see(t), d)]
    if len(varying) != 1 or varying[0][0] != 1:
        return None
    return varying[0][1]


def _constant(node: ir.Node, d: int | None = None) -> bool:
    """``node`` is the same at every position of axis ``d`` (of every axis: ``d`` None): a
    python number, or a broadcast along it."""
    if isinstance(node, ir.Number) or node.scalar:
        return True
    return d is not None and isinstance(node, ir.Broadcast) and not node.kept[d]


def _keyed(ctx: _Block, terms: list[Term]) -> list[tuple[int, ir.Node]]:
    return [(sign, ctx.deep(t)) for sign, t in terms]


def _is_exp(node: ir.Node) -> bool:
    return isinstance(node, ir.Apply) and node.form == EXP


def _dead(block: list[ir.Statement], names: set[str], keep: frozenset[str]) -> list[ir.Statement]:
    """``block`` without the single-target assignments of ``names`` that no statement reads
    any more (the exp, the sum, the maximum a fused kernel no longer reads), nor of the names
    only they read, unless handed on."""
    while True:
        reads = _reads(block)
        values = assigned_once(block, keep)
        gone = {n for n in names if n in values and reads[n] == 0}
        if not gone:
            return block
        names = {r for n in gone for r in ir.refs(values[n])}
        block = [t for t in block if not _assigns(t, gone)]
        for name in gone:
            block = unfreed(block, name)


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
