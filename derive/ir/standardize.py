"""Standardization over trailing axes as torch's one kernel for it: ``torch.native_layer_norm``.

A tensor standardized over its last k axes D, written out,

    m = mean_D x,    d = x - m,    v = mean_D d*d,    r = (v + eps)^(-1/2),    y = d r,

is five kernels and four passes over x (the mean, the difference, the square's mean, the
product; the rsqrt is per row). ``torch.native_layer_norm(x, x.shape[-k:], None, None, eps)``
is one kernel that returns the same three tensors an op goes on with, ``(y, m, r)``, m and r
with size-1 axes where D was: it computes the variance with Welford's update, the same number
to rounding (both sum the squares of deviations from the row's mean, never x*x - m*m), and
``1 / sqrt(v + eps)`` as the text does. Under autocast it runs in float32 as the module does.
Where the variance overflows (entries past 1e154 in float64, 1e19 in float32) the kernel's
rstd is NaN, as F.layer_norm's, where the written-out form gave 0 and a standardized row of
zeros: neither is the row's true value, of order 1 (found probing the rule; an open find).
On this CPU the kernel is slower than the written-out form at rows of 64 entries (about 1.25x
at (512, 64), the GPT's) and faster at wide ones (about 4x at (4096, 1024)), measured with
other jobs running; it is one kernel where the written-out form is five, wherever it runs.

The rule reads the statements, never an op's name (layernorm, a standardization inside an
op, instance norm over trailing axes all match; a batch norm's axes lead and do not): a
statement's value ``d * broadcast(r)`` (or ``d / broadcast(sqrt(v + eps))``) whose d, v, m
are the forms above, read through names, with eps a python number. The kernel takes the
statement's place where x is the name it was when the chain read it, and every name of the
chain that nothing else reads goes (:func:`~derive.ir.fused._dead`); a name of the chain the
function hands on or reads later (the rstd a backward reads, the mean) is the kernel's output
with its size-1 axes squeezed (views). Where d is read elsewhere (a double backward's forward
hands it on), the chain stays as written: the kernel would compute d's pass again.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection

from derive.ir import nodes as ir
from derive.ir.fused import _Block, _dead
from derive.ir.rewrite import unfreed

RSQRT = "torch.rsqrt({0})"
SQRT = "torch.sqrt({0})"


def standardized(
    block: list[ir.Statement], keep: Collection[str], fresh: Callable[[str], str]
) -> list[ir.Statement]:
    """``block`` with each standardization over trailing axes computed by torch's kernel (see
    the module docstring); ``keep``: the names the function hands on."""
    kept = frozenset(keep)
    k = 0
    while k < len(block):
        s = block[k]
        k += 1
        if not (isinstance(s, ir.Assign) and len(s.targets) == 1):
            continue
        found = _match(block, kept, s.value, k - 1)
        if found is not None:
            block = _fused(block, kept, k - 1, found, fresh)
    return block


class _Found:
    """A standardization matched at one statement: its x, k, eps, and the names of its chain
    (None where the part is written inline)."""

    def __init__(self, x: ir.Ref, k: int, eps: ir.Node, names: dict[str, str | None]) -> None:
        self.x, self.k, self.eps, self.names = x, k, eps, names


def _match(block: list[ir.Statement], kept: frozenset[str], v: ir.Node, at: int) -> _Found | None:
    ctx = _Block(block, kept)
    once = _written_once(block)
    if not isinstance(v, ir.Binary) or v.op not in "*/":
        return None
    sides = [(v.left, v.right), (v.right, v.left)] if v.op == "*" else [(v.left, v.right)]
    for diff_side, scale_side in sides:
        names: dict[str, str | None] = {}
        diff = _diff(ctx, once, diff_side, v.axes, names)
        if diff is None:
            continue
        x, dims = diff
        scale = _scale(ctx, once, scale_side, v.op, dims, names)
        if scale is None:
            continue
        var, eps = scale
        if not _is_var(ctx, once, var, dims, diff_side, names):
            continue
        if not _movable(block, x, at) or not _only_chain(block, kept, names, at):
            continue
        return _Found(x, len(dims), eps, names)
    return None


def _written_once(block: list[ir.Statement]) -> dict[str, ir.Node]:
    """The value of each name one single-target assignment writes (handed on or not)."""
    writes = Counter(n for s in block for n in s.writes)
    return {
        s.targets[0]: s.value
        for s in block
        if isinstance(s, ir.Assign) and len(s.targets) == 1 and writes[s.targets[0]] == 1
    }


def _through(
    once: dict[str, ir.Node], node: ir.Node, role: str, names: dict[str, str | None]
) -> ir.Node:
    """``node``'s value where it reads a name written once (the name noted under ``role``)."""
    if isinstance(node, ir.Ref) and node.name in once and once[node.name].axes == node.axes:
        names[role] = node.name
        return once[node.name]
    names.setdefault(role, None)
    return node


def _trailing(node: ir.Node, axes: tuple) -> tuple[int, ...] | None:
    """The dims a broadcast of a per-row statistic stretches: the trailing ones, at least one."""
    if not (isinstance(node, ir.Broadcast) and node.axes == axes) or all(node.kept):
        return None
    k = list(node.kept).index(False)
    if any(node.kept[k:]) or k == 0:
        return None
    return tuple(range(k, len(axes)))


def _diff(
    ctx: _Block,
    once: dict[str, ir.Node],
    node: ir.Node,
    axes: tuple,
    names: dict[str, str | None],
) -> tuple[ir.Ref, tuple[int, ...]] | None:
    """(x, D) where ``node`` is x - broadcast(mean_D x), x a named tensor over ``axes``."""
    d = _through(once, node, "diff", names)
    if not (isinstance(d, ir.Binary) and d.op == "-" and d.axes == axes):
        return None
    x, row = d.left, d.right
    if not (isinstance(x, ir.Ref) and not x.scalar and x.axes == axes):
        return None
    dims = _trailing(row, axes)
    if dims is None:
        return None
    mean = _through(once, row.arg, "mean", names)
    ok = (
        isinstance(mean, ir.Reduce)
        and mean.kind == "mean"
        and mean.dims == dims
        and not mean.keepdim
        and ctx.deep(mean.arg) == ctx.deep(x)
    )
    return (x, dims) if ok else None


def _scale(
    ctx: _Block,
    once: dict[str, ir.Node],
    node: ir.Node,
    op: str,
    dims: tuple[int, ...],
    names: dict[str, str | None],
) -> tuple[ir.Node, ir.Node] | None:
    """(v, eps) where ``node`` is broadcast((v + eps)^(-1/2)) (``op`` '*': an rsqrt) or
    broadcast(sqrt(v + eps)) (``op`` '/'), stretched along ``dims``."""
    if _trailing(node, node.axes) != dims:
        return None
    r = _through(once, node.arg, "rstd", names)
    if not (isinstance(r, ir.Apply) and r.form == (RSQRT if op == "*" else SQRT)):
        return None
    total = r.args[0]
    if not (isinstance(total, ir.Binary) and total.op == "+"):
        return None
    for var, eps in ((total.right, total.left), (total.left, total.right)):
        if eps.scalar and not var.scalar:
            return var, eps
    return None


def _is_var(
    ctx: _Block,
    once: dict[str, ir.Node],
    node: ir.Node,
    dims: tuple[int, ...],
    diff: ir.Node,
    names: dict[str, str | None],
) -> bool:
    """``node`` is mean_D(d * d), d the difference ``diff`` reads."""
    v = _through(once, node, "var", names)
    if not (isinstance(v, ir.Reduce) and v.kind == "mean" and v.dims == dims and not v.keepdim):
        return False
    sq = ctx.see(v.arg)
    if not (isinstance(sq, ir.Binary) and sq.op == "*"):
        return False
    want = _same(ctx, once, diff)
    return _same(ctx, once, sq.left) == want and _same(ctx, once, sq.right) == want


def _same(ctx: _Block, once: dict[str, ir.Node], node: ir.Node) -> ir.Node:
    """``node`` read through every name: two reads of one tensor compare equal."""
    while isinstance(node, ir.Ref) and node.name in once and once[node.name].axes == node.axes:
        node = once[node.name]
    return ctx.deep(node)


def _movable(block: list[ir.Statement], x: ir.Ref, at: int) -> bool:
    """x is written at most once, before statement ``at``: the kernel there reads the x the
    chain read."""
    at_writes = [j for j, s in enumerate(block) if x.name in s.writes]
    return len(at_writes) <= 1 and all(j < at for j in at_writes)


def _only_chain(
    block: list[ir.Statement], kept: frozenset[str], names: dict[str, str | None], at: int
) -> bool:
    """The difference is read by the chain alone (and not handed on); the variance too; the
    mean and the rstd, where the function reads them elsewhere, only from statement ``at`` on
    (the kernel's outputs stand in for them there)."""
    chain = {n for n in names.values() if n is not None}
    for role in ("diff", "var"):
        name = names.get(role)
        if name is None:
            continue
        if name in kept:
            return False
        for j, s in enumerate(block):
            if name in s.reads and not isinstance(s, ir.Free) and not _in_chain(s, chain, j, at):
                return False
    for role in ("mean", "rstd"):
        name = names.get(role)
        if name is None:
            continue
        for j, s in enumerate(block):
            if name in s.reads and not isinstance(s, ir.Free) and j < at:
                if not _in_chain(s, chain, j, at):
                    return False
    return True


def _in_chain(s: ir.Statement, chain: set[str], j: int, at: int) -> bool:
    """Statement ``s`` (at ``j``) is a step of the chain or the matched statement itself."""
    return j == at or (isinstance(s, ir.Assign) and set(s.targets) <= chain)


def _fused(
    block: list[ir.Statement],
    kept: frozenset[str],
    at: int,
    found: _Found,
    fresh: Callable[[str], str],
) -> list[ir.Statement]:
    """``block`` with the statement at ``at`` computed by the kernel, the chain's mean and
    rstd names (where still read) its outputs squeezed, the rest of the chain dropped."""
    s = block[at]
    target = s.targets[0]  # type: ignore[attr-defined]
    rank = len(found.x.axes)
    lead = found.x.axes[: rank - found.k]
    mean_t, rstd_t = fresh(f"{target}_mean"), fresh(f"{target}_rstd")
    kernel = ir.Assign(
        (target, mean_t, rstd_t),
        ir.Standardize(found.x, found.k, found.eps, axes=found.x.axes),
    )
    after: list[ir.Statement] = []
    replaced: set[str] = set()
    for role, out in (("mean", mean_t), ("rstd", rstd_t)):
        name = found.names.get(role)
        if name is None or not _read_after(block, name, at, kept):
            continue
        view: ir.Node = ir.Ref(out, axes=found.x.axes)
        for dim in range(rank - 1, rank - found.k - 1, -1):
            view = ir.Squeeze(view, dim, axes=lead + found.x.axes[rank - found.k : dim])
        after.append(ir.Assign((name,), view))
        replaced.add(name)
    out = [
        t
        for j, t in enumerate(block[:at])
        if not (isinstance(t, ir.Assign) and len(t.targets) == 1 and t.targets[0] in replaced)
    ]
    for name in replaced:
        out = unfreed(out, name)
    block = [*out, kernel, *after, *block[at + 1 :]]
    chain = {n for n in found.names.values() if n is not None} - replaced
    return _dead(block, chain | set(ir.refs(s.value)), kept)


def _read_after(block: list[ir.Statement], name: str, at: int, kept: frozenset[str]) -> bool:
    """The function hands ``name`` on or a statement past ``at`` reads it."""
    return name in kept or any(
        name in t.reads and not isinstance(t, ir.Free) for t in block[at + 1 :]
    )
