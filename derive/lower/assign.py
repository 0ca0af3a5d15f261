"""Lowering of one assignment ``name[axes] = expr``: the statements that make the tensor.

In: the target, its axes and the expression, and the lowering's context; out: IR statements
(:mod:`derive.ir.nodes`), emitted in order. How an assignment is written is decided before
anything is lowered (:func:`delta_form`):

- no delta: one statement, the value materialised over exactly the target's axes;
- ``sum_k delta(i, k) A_k`` over constants k: one ``torch.stack`` (:func:`stack`);
- ``sum_n delta(v, t[n]) g[n, e]``: one ``index_add_`` into zeros (:func:`scatter`); where
  t reads other target axes too (``t[m, n]``: several picks a row) one ``scatter_add_``; a
  coefficient outside the sum is moved into it first (:func:`_coefficient_inside`), and the
  same sum met inside a larger expression is scattered into a name of its own
  (:func:`derive.lower.lowerer._sum`);
- ``sum_{i,j} delta(h, S*i + A[i, j]) delta(w, S*j + B[i, j]) g[i, j]``, each target axis
  solved from a delta against data, an affine expression (a stride: ``delta(n, 2*i + v)``) or
  both, or against data alone beside another: one ``index_put_`` or ``scatter_add_`` into
  zeros (:func:`solved_scatter`, a max pool's adjoint routed to its argmaxes);
- one-hot terms beside the rest: the rest, then one in-place update per term
  (:func:`pick_update`: ``scatter_add_`` where it fits, else ``x[i, t[i]] += v``);
- anything else: equality masks, always right.
"""

from __future__ import annotations

import dataclasses

import sympy as sp

from derive.errors import DerivationError
from derive.functions import where
from derive.ir import nodes as ir
from derive.ir.printer import Precedence, precedence
from derive.language.argmax import fold_digits
from derive.lower import bounds
from derive.lower.context import Context, lowers_to_int
from derive.lower.equalities import as_scatter, gathered
from derive.lower.fusions import fuse
from derive.lower.indexing import affine_value, padded_part, within
from derive.lower.reductions import counted, sum_value
from derive.lower.select import numbers_out, safe_indices, slice_constants
from derive.lower.value import (
    AxisError,
    PickUpdate,
    align,
    delta_terms,
    dense_axes,
    filled,
    permute,
    scatter_delta,
    scatter_reads,
    split_deltas,
)
from derive.lower.windows import plan_window
from derive.symbolic.indices import (
    free_indices,
    rename_apart,
    replace_apart,
    symbols_outside_entries,
    without,
)
from derive.symbolic.simplify import expanded_terms


def assign(cx: Context, name: str, expr: sp.Expr, axes: tuple, dims: tuple) -> None:
    """Emit ``name = <expr>`` with axes in ``axes`` order (one-hots and scatters included)."""
    cx.claim(name)
    cx.learn(zip(axes, dims, strict=True))
    expr = safe_indices(cx, gathered(cx, slice_constants(cx, numbers_out(summed_where_met(expr)))))
    expr = equality_scatter(cx, expr, axes) or expr
    if not expr.has(sp.KroneckerDelta):
        return _assign_plain(cx, name, expr, axes)
    if stack(cx, name, expr, axes):
        return None
    expr = _coefficient_inside(cx, nested_inside(cx, expr, axes), axes)
    if solved_scatter(cx, name, expr, axes):
        return None
    form = delta_form(cx, expr, axes)
    if form == "scatter":
        return scatter(cx, name, expr, axes)
    # one-hot terms become in-place updates of the rest; a delta no update writes (two of
    # them in a term, or one against an argmax) becomes an equality mask, always right
    plain, picks = form if form is not None else (expr, [])
    value = materialise(cx, checked(cx, plain, axes, name), axes, fresh=bool(picks))
    start = len(cx.statements)
    cx.emit(ir.Assign((name,), value))
    for coef, axis, data in picks:
        pick_update(cx, name, coef, axis, data, axes)
    if picks:
        _made_like_its_update(cx, name, start)
    return None


def _made_like_its_update(cx: Context, name: str, start: int) -> None:
    """A buffer of zeros (or one number) that picks are added into in place, made like what
    the first adds, as :func:`_buffer_like` makes a scatter's: made like grad_out, which is
    the unbatched 1 of a double backward, it refused a batched source under a vectorized
    Hessian (``vmap: scatter_add_(self, ...) is not possible``; found probing a maxout
    squared). The buffer is moved down to just before that update, past the statements
    lowering its source, which never read it."""
    made = cx.statements[start]
    if not (
        isinstance(made, ir.Assign)
        and isinstance(made.value, (ir.Zeros, ir.Full))
        and made.value.like == cx.like
    ):
        return
    at = next(
        (
            k
            for k in range(start + 1, len(cx.statements))
            if isinstance(cx.statements[k], (ir.ScatterAdd, ir.IndexPut))
            and cx.statements[k].target == name
        ),
        None,
    )
    if at is None:
        return
    update = cx.statements[at]
    source = update.source if isinstance(update, ir.ScatterAdd) else update.value
    root = _view_root(source)
    if source.scalar or (isinstance(root, ir.Ref) and (root.scalar or root.name in cx.integers)):
        return
    before: list[ir.Statement] = []
    if isinstance(root, ir.Ref):
        like = ir.Ref(root.name)
    else:
        added = cx.fresh("added")  # the views stay on the read: the buffer takes no shape
        before.append(ir.Assign((added,), root))
        like, source = ir.Ref(added), _rooted(source, ir.Ref(added, axes=root.axes))
        field = "source" if isinstance(update, ir.ScatterAdd) else "value"
        update = dataclasses.replace(update, **{field: source})
    buffer = ir.Assign(made.targets, dataclasses.replace(made.value, like=like))
    cx.statements[start : at + 1] = [*cx.statements[start + 1 : at], *before, buffer, update]


def _coefficient_inside(cx: Context, expr: sp.Expr, axes: tuple) -> sp.Expr:
    """``c * sum_n delta(v, t[n]) g`` -> ``sum_n c delta(v, t[n]) g`` where that makes it a
    scatter (one ``index_add_``, or a solved scatter's): the forms below match a sum, and a
    coefficient outside it (``sqrt(C) * E[X[n], c]``'s, or a 1.25 from a fold) left the
    adjoint to the equality masks, a (V, N) one-hot matmul for an embedding where the
    scatter is O(N). Factors reading the sum's indices stay (none can: they are bound)."""
    factors = sp.Mul.make_args(expr)
    sums = [f for f in factors if isinstance(f, sp.Sum)]
    if len(sums) != 1 or len(factors) == 1:
        return expr
    (summed,) = sums
    bound = {lim[0] for lim in summed.limits}
    coef = sp.Mul(*without(factors, summed))
    if coef.free_symbols & bound:
        return expr
    inside = nested_inside(cx, sp.Sum(coef * summed.function, *summed.limits), axes)
    if _solved_deltas(cx, inside, axes) is not None or is_scatter(cx, inside, axes):
        return inside
    return expr


def equality_scatter(cx: Context, expr: sp.Expr, axes: tuple) -> sp.Sum | None:
    """``expr``'s equality ``k[n] == g`` as the delta of a scatter
    (:func:`derive.lower.equalities.as_scatter`) where :func:`scatter` then writes it; else
    None."""
    found = as_scatter(cx, expr, axes)
    return found if found is not None and is_scatter(cx, found, axes) else None


def summed_where_met(expr: sp.Expr) -> sp.Expr:
    """``sum_f A[d, f] sum_e X[e, d] Y[e, f]`` as ``sum_e X[e, d] sum_f A[d, f] Y[e, f]``:
    an outer sum's index that meets only some factors of an inner sum's body is summed with
    them, where the inner sum's value then holds fewer indices. Summed outside, the inner
    sum carried f: a two-layer GNN's first backward scattered an (E, D, F) product over the
    nodes before W contracted F (86 ms against autograd's 11.7, 43 MiB against 4.6; found
    probing); inside, ``sum_f W[d, f] g[dst[e], f]`` is one (V, D) matmul gathered at dst.
    Innermost first; a reassociation of finite sums (the additions in another order)."""
    if not expr.has(sp.Sum):
        return expr

    def rule(s: sp.Sum) -> sp.Expr:
        factors = sp.Mul.make_args(s.function)
        for t in factors:
            if not isinstance(t, sp.Sum):
                continue
            inner = {lim[0] for lim in t.limits}
            for lim in s.limits:
                f = lim[0]
                if f in inner or any(f in x.free_symbols for x in _bound_limits(t)):
                    continue
                parts = sp.Mul.make_args(t.function)
                with_f = [p for p in parts if p.has(f)]
                if not with_f or len(with_f) == len(parts):
                    continue
                outer = [a for a in factors if a is not t and a.has(f)]
                if any(a.free_symbols & inner for a in outer):
                    continue
                moved = sp.Sum(sp.Mul(*outer, *with_f), lim)
                if len(free_indices(moved)) >= len(free_indices(t)):
                    continue
                kept = [a for a in factors if a is not t and not a.has(f)]
                body = sp.Mul(*[p for p in parts if not p.has(f)], moved)
                rest = [x for x in s.limits if x is not lim]
                new = sp.Mul(*kept, sp.Sum(body, *t.limits))
                return sp.Sum(new, *rest) if rest else new
        return s

    return expr.replace(lambda x: isinstance(x, sp.Sum), rule)


def _bound_limits(t: sp.Sum) -> list:
    return [x for lim in t.limits for x in lim[1:]]


def nested_inside(cx: Context, expr: sp.Expr, axes: tuple) -> sp.Expr:
    """``sum_b g[b, e] sum_l delta(v, t[b, l])`` -> ``sum_{b, l} delta(v, t[b, l]) g[b, e]``
    where that makes it a scatter: the simplifier sums first what g does not read, which
    leaves the delta's sum a count (a (B, L, V) equality mask, then a (V, B) matmul: an
    embedding bag's adjoint 89x autograd's time, found probing), where the whole sum is one
    ``index_add_`` of g expanded over l, O(B L E)."""
    if not isinstance(expr, sp.Sum):
        return expr
    factors = sp.Mul.make_args(expr.function)
    inner = [f for f in factors if isinstance(f, sp.Sum) and f.has(sp.KroneckerDelta)]
    if len(inner) != 1:
        return expr
    (total,) = inner
    bound = {lim[0] for lim in total.limits}
    rest = sp.Mul(*without(factors, total))
    if rest.free_symbols & bound or bound & {lim[0] for lim in expr.limits}:
        return expr
    flat = sp.Sum(rest * total.function, *expr.limits, *total.limits)
    return flat if is_scatter(cx, flat, axes) else expr


def is_scatter(cx: Context, expr: sp.Expr, axes: tuple) -> bool:
    """Whether ``expr`` over ``axes`` is written by :func:`scatter` (one ``index_add_`` or
    ``scatter_add_``): the one question the assignment, a coefficient moved inside and a
    sum met inside an expression all ask."""
    return isinstance(expr, sp.Sum) and delta_form(cx, expr, axes) == "scatter"


def delta_form(cx: Context, expr: sp.Expr, axes: tuple) -> str | tuple | None:
    """How an assignment with deltas is written, decided before anything is lowered:
    ``"scatter"`` (one ``index_add_``), ``(plain, picks)`` (the rest, then one in-place
    update per one-hot term), or None (equality masks)."""
    found = scatter_delta(expr, axes) if isinstance(expr, sp.Sum) else None
    if found is not None:
        delta, axis, data = found
        rest = _picked(expr, delta, axis, data)
        others = [a for a in axes if a != axis]
        source = others + [lim[0] for lim in expr.limits]
        # the source is read over the other axes and the summed ones, in any order, and
        # expanded over summed ones it does not read (an embedding bag's grad_out over l);
        # one it is constant along among the other axes is broadcast after the scatter (a
        # source expanded over it was a (J N G Y I) copy: --widest 15164)
        read = cx.scope(source).axes(rest)
        return "scatter" if set(others) <= read <= set(source) else None
    try:
        plain, picks = split_deltas(expr, axes)
    except ValueError:
        return None
    for coef, axis, data in picks:  # an update reads its coefficient over the other axes
        others = cx.scope([a for a in axes if a != axis])
        if not others.axes(coef) | others.axes(data) <= set(others.order):
            return None
    return plain, picks


def _assign_plain(cx: Context, name: str, expr: sp.Expr, axes: tuple) -> None:
    if isinstance(expr, sp.Sum) and counted(expr) is expr and cx.recall(expr) is None:
        # a sum that reads every axis is bound to ``name`` (then permuted in place, its memo
        # entry with it); one broadcast over axes it does not read keeps a name of its own,
        # which the memo holds: dZz = sum(g) expanded to Y is not the sum a later dW1 reads
        whole = set(axes) <= free_indices(expr)
        sum_value(cx, expr, list(axes), name=name if whole else None)
        stored = cx.verified(expr, cx.recall(expr))  # in the order it came out
        if stored.axes != axes:
            stored = exact(cx, stored, axes, name)
            cx.emit(ir.Assign((name,), materialise(cx, stored, axes, fresh=False)))
            if whole:
                cx.remember(expr, ir.Ref(name, axes=axes))
        return
    value = materialise(cx, checked(cx, expr, axes, name), axes, fresh=False)
    cx.emit(ir.Assign((name,), value))


def checked(cx: Context, e: sp.Expr, axes: tuple, name: str) -> ir.Node:
    value = cx.value(e, list(axes))
    return value if value.scalar else exact(cx, value, axes, name)


def exact(cx: Context, v: ir.Node, axes: tuple, name: str) -> ir.Node:
    """``v`` permuted to ``axes``: the one guard that an assignment's axis order is the
    target's, whatever order the lowering found it in."""
    try:
        return permute(v, axes)
    except AxisError as exc:
        raise DerivationError(cx.op, f"cannot lower {name}: {exc}") from None


def materialise(cx: Context, v: ir.Node, axes: tuple, fresh: bool) -> ir.Node:
    """A new tensor with exactly ``axes``; fresh when it will be updated in place."""
    shape = tuple(cx.size(a) for a in axes)  # (): a 0-d tensor, W[1, 2]'s
    if v.scalar:  # a python number as a tensor of the target's shape (a 0-d one too)
        return filled(v, shape, cx.like, axes)
    if v.axes != axes:
        return ir.Clone(ir.Expand(align(v, axes), shape, axes=axes), axes=axes)
    # a name or a call may be another tensor's storage (torch.where's result is its own)
    if fresh and precedence(v) == Precedence.ATOM and not isinstance(v, ir.Where):
        return ir.Clone(v, axes=axes)
    return v


def stack(cx: Context, name: str, expr: sp.Expr, axes: tuple) -> bool:
    """``name = sum_k delta(i, k) A_k`` over constants k: one stack (or slices set)."""
    found = _stacked(cx, expr, axes)
    if found is None:
        return False
    axis, size, picks = found
    others, pos = tuple(a for a in axes if a != axis), axes.index(axis)
    parts = []
    for k in range(size):
        coef = safe_indices(cx, slice_constants(cx, picks.get(k, sp.S.Zero)))
        value = checked(cx, coef, others, name) if coef != 0 else ir.Number(0)
        parts.append(materialise(cx, value, others, fresh=False))
    cx.emit(ir.Assign((name,), ir.Stack(tuple(parts), pos, axes=axes)))
    return True


def _stacked(cx: Context, expr: sp.Expr, axes: tuple) -> tuple | None:
    """(axis, its size, {k: coefficient}) when every term is one ``delta(axis, k)`` times a
    coefficient, for constants k in the axis's range; else None."""
    picks: dict[int, sp.Expr] = {}
    axis = None
    terms = sp.Add.make_args(_deltas_out_of_sums(expr, axes))
    if any(len(t.atoms(sp.KroneckerDelta)) > 1 for t in terms) and expanded_terms(expr) <= 16:
        terms = delta_terms(expr)  # g (delta(i, 1) a + delta(i, 2) b)
    for term in terms:
        deltas = [f for f in sp.Mul.make_args(term) if isinstance(f, sp.KroneckerDelta)]
        if len(deltas) != 1:
            return None
        (d,) = deltas
        ax = next((x for x in d.args if x in axes), None)
        const = next((x for x in d.args if x.is_Integer), None)
        if ax is None or const is None or (axis is not None and ax != axis):
            return None
        axis, k = ax, int(const)
        # coef(i) delta(i, k) = coef(k) delta(i, k): the slice reads coef at i = k
        picks[k] = picks.get(k, sp.S.Zero) + (term / d).xreplace({ax: const})
    size = cx.sizes.get(axis) if axis is not None else None
    if size is None or not size.is_Integer or not set(picks) <= set(range(int(size))):
        return None
    return axis, int(size), picks


def _deltas_out_of_sums(expr: sp.Expr, axes: tuple) -> sp.Expr:
    """``sum_n x[n, i] (delta(g, 0) a[n, j] + delta(g, 1) b[n, j])`` as ``delta(g, 0) sum_n
    x a + delta(g, 1) sum_n x b``: the deltas of an axis of the result, taken out of the sums
    they do not bind, so the result is a stack of one sum a constant (an LSTM's dWx, its
    gates' adjoints each against x: four matmuls the sibling pass makes one over the stacked
    gate gradients, where the deltas were four masks over a (4, J, N) product). A sum with
    no delta of a free axis, or with other terms beside it, is left as it is."""
    if not isinstance(expr, sp.Sum):
        return expr
    bound = {lim[0] for lim in expr.limits}
    deltas = expr.function.atoms(sp.KroneckerDelta)
    if not deltas or any(not (set(d.free_symbols) & set(axes)) or d.has(*bound) for d in deltas):
        return expr
    terms = delta_terms(expr.function)
    out = []
    for term in terms:
        found = [f for f in sp.Mul.make_args(term) if isinstance(f, sp.KroneckerDelta)]
        if len(found) != 1:
            return expr
        out.append(found[0] * sp.Sum(term / found[0], *expr.limits))
    return sp.Add(*out)


def pick_update(cx: Context, name: str, coef: sp.Expr, axis, data: sp.Indexed, axes: tuple) -> None:
    """``name[..., data, ...] += coef``: one one-hot term added (in place where it may be)."""
    others = [a for a in axes if a != axis]
    fused = fuse(cx, PickUpdate(name, coef, axis, data, axes), others)
    if fused is not None:
        cx.emit(fused)
        return
    index = []
    for a in axes:
        if a == axis:
            index.append(align(cx.value(data, others), tuple(others)))
        else:
            arange = ir.Arange(cx.size(a), ir.Ref(name), axes=(a,))
            index.append(align(arange, tuple(others)))
    # one index_put_(accumulate=True), not x[i, t] += v: one kernel where indexing, adding and
    # writing back are three, and in place only through _index_put (a Tensor subclass such as
    # DTensor relabels an in-place update's target without moving its data)
    value = align(cx.value(coef, others), tuple(others))
    if value.scalar:  # index_put_ takes tensors only (see _source)
        value = filled(value, tuple(cx.size(a) for a in others), cx.like, tuple(others))
    cx.emit(ir.IndexPut(name, tuple(index), value))


def scatter(cx: Context, name: str, e: sp.Sum, axes: tuple) -> None:
    """``name = sum_n delta(v, t[n]) g[n, e]``: ``g``'s rows added at ``t`` into zeros, one
    ``index_add_``. Where t reads other target axes too (``sum_b delta(v, t[m, b]) g[m, b,
    e]``: several picks a row), the index varies along them: one ``scatter_add_`` of g with t
    expanded to g's shape, O(M B E) where the equality masks were an (M, B, V, E) product."""
    delta, axis, data = scatter_delta(e, axes)
    bound = [lim[0] for lim in e.limits]
    cx.learn_limits(e.limits)
    rest = _picked(e, delta, axis, data)
    others = [a for a in axes if a != axis]
    pos = axes.index(axis)
    src_order = others[:pos] + bound + others[pos:]
    # its axes are src_order's or some of them (delta_form checked), in whatever order they
    # came out: expanded over the others, a view until the reshape below copies it
    source = _source(cx, rest, src_order)
    if set(source.axes) == set(src_order):
        source = permute(source, tuple(src_order))
    else:
        order = tuple(src_order)
        source = ir.Expand(align(source, order), tuple(map(cx.size, order)), axes=order)
    # several bound axes as one, sized by number: -1 is ambiguous where another size is 0
    merged = cx.value(sp.Mul(*[cx.sizes[b] for b in bound]), []) if len(bound) > 1 else None
    flat = [cx.size(a) for a in others[:pos]] + [merged]
    flat += [cx.size(a) for a in others[pos:]]
    shape = tuple(cx.size(a) for a in axes)
    src = source if len(bound) == 1 else ir.Reshape(source, tuple(flat))
    src, like = _buffer_like(cx, src)
    # positions that may lie past the axis (an equality's data, derive.lower.equalities) add
    # into a spare entry one past it, cut off after
    spare = data.base.label.name in cx.spare
    if spare:
        shape = shape[:pos] + (cx.value(cx.sizes[axis] + 1, []),) + shape[pos + 1 :]
    zeros = ir.Zeros(shape, like, axes=axes)
    if scatter_reads(data, axes, set(bound)) == set(bound):
        index = cx.value(data, bound)
        idx = index if len(bound) == 1 else ir.Reshape(index, (merged,))
        cx.emit(ir.Assign((name,), ir.IndexAdd(zeros, pos, idx, src, axes=axes)))
    else:
        order = tuple(src_order)
        index = ir.Expand(
            align(cx.value(data, src_order), order), tuple(map(cx.size, order)), axes=order
        )
        idx = index if len(bound) == 1 else ir.Reshape(index, tuple(flat))
        cx.emit(ir.Assign((name,), zeros))
        cx.emit(ir.ScatterAdd(name, pos, idx, src))
    if spare:
        cut = ir.Narrow(ir.Ref(name), pos, ir.Number(0), cx.size(axis), axes=axes)
        cx.emit(ir.Assign((name,), cut))


def _view_root(node: ir.Node) -> ir.Node:
    """What a chain of views reads: the node below every view of ``node``."""
    while isinstance(node, ir.View):
        node = node.arg
    return node


def _rooted(view: ir.Node, root: ir.Node) -> ir.Node:
    """``view`` (a chain of views down to a root) read from ``root`` instead."""
    if isinstance(view, ir.View):
        return dataclasses.replace(view, arg=_rooted(view.arg, root))
    return root


def _buffer_like(cx: Context, source: ir.Node) -> tuple[ir.Node, ir.Ref]:
    """``(source, like)``: the tensor a buffer that ``source`` is added into in place is made
    like (``like.new_zeros``), the source's own, so that under vmap the buffer is batched
    where what it adds is (an ``index_add_`` of batched rows into an unbatched buffer is
    refused). A view of a name is made like that name; another expression is named first.
    Made like grad_out, the double backward's embedding gradient was refused under a
    vectorized Hessian once grad_out became the 1 it always is there."""
    root = _view_root(source)
    if isinstance(root, ir.Ref) and root.name not in cx.integers:
        return source, ir.Ref(root.name)
    if not isinstance(root, ir.Ref) and not source.scalar:
        name = cx.fresh("added")
        cx.emit(ir.Assign((name,), source))
        ref = ir.Ref(name, axes=source.axes)
        return ref, ir.Ref(name)
    return source, cx.like


def _source(cx: Context, e: sp.Expr, order: list) -> ir.Node:
    """What a scatter adds, ``e`` over ``order``, in the target's dtype: a number filled over
    the axes, int data cast (a count ``sum_q delta(v, 2 q + 2)`` added ones as int64 into a
    float target, which scatter_add_ refuses: fuzz --affine 4877). A number is filled where
    the expression lowers to one too: ``where(u > h, .., 0)`` with u's range proven below
    h's lowers to 0, and index_put_ takes tensors only (fuzz --affine 11400364)."""
    value = cx.value(e, [] if e.is_number else order)
    if value.scalar:
        return filled(value, tuple(cx.size(a) for a in order), cx.like, tuple(order))
    return ir.Cast(value, cx.like, axes=value.axes) if lowers_to_int(cx, e) else value


def _picked(e: sp.Sum, delta: sp.KroneckerDelta, axis: sp.Symbol, data: sp.Indexed) -> sp.Expr:
    """What ``sum_B delta(v, t[..]) g`` adds at v = t[..]: g with v read as t[..] (equal
    wherever the delta is 1). A g that reads v (``db_dy[g1, v, idx[j, j2]]``) was no scatter
    source, and the masks broadcast it over v: a (J, J, J, G, G) product in
    tests/cases/constant_sum_from_a_fold.py's second order."""
    return replace_apart(sp.Mul(*without(sp.Mul.make_args(e.function), delta)), {axis: data})


def solved_scatter(cx: Context, name: str, e: sp.Expr, axes: tuple) -> bool:
    """``name = sum_B c * prod_t delta(f_t, 0)``, each delta solvable for one target axis t as
    ``t = e_t`` with e_t affine in other indices, reading data, or both (``h - S*i == A[n, i]``
    gives ``h = S*i + A[n, i]``; ``delta(n, 2*i + v)`` gives ``n = 2*i + v``; a delta against
    data alone only beside another; a solution may read another, substituted), c free of
    every solved t: c added at (the other axes, e_t) into zeros, by one ``scatter_add_``
    along the solved axes flattened where they are the target's last (a pool's h, w: the
    index h*W + w), else one ``index_put_(..., accumulate=True)``. The sum over B is the
    accumulation, O(|B|), where the equality masks were O(|B| * |t|); an index of B that no
    e_t reads is summed first. An index e_t outside its axis (a read of the zero padding)
    adds nothing: its value is masked to 0, the index clamped inside. Nothing else is
    written (False): a delta left unsolved, a target axis read by c, one index that is data
    alone (``delta(v, t[n])``: :func:`scatter`'s), a transposed convolution (the window
    planner's)."""
    found = _solved_deltas(cx, e, axes)
    if found is None or _transposed_window(cx, e, axes, found[0]):
        return False
    solved, rest, limits = found
    # a summed index no position reads is summed before the scatter, not scattered: the
    # value is then over the positions' indices alone (fuzz --affine 4022: F x F x G x F).
    # Every one too: scattered, they were an index expanded over them, which Inductor's
    # vectorised atomic add refuses where it is the same along the inner loop (12400516)
    reads = set().union(*(v.free_symbols for v in solved.values()))
    inner = [lim for lim in limits if lim[0] not in reads]
    if inner:
        rest = _summed_inside(rest, inner)
        limits = [lim for lim in limits if lim[0] in reads]
    bound = [lim[0] for lim in limits]
    others = [a for a in axes if a not in solved]
    ranges = {a: (sp.S.Zero, cx.sizes[a] - 1) for a in others if a in cx.sizes}
    ranges.update({var: (lo, hi) for var, lo, hi in limits})
    rest = _decided(cx, rest, ranges)
    cx.claim(name)
    cx.learn_limits(limits)
    source = tuple(others + bound)
    value = align(_source(cx, rest, list(source)), source)
    index, inside = [], []
    for a in axes:
        if a not in solved:
            index.append(align(ir.Arange(cx.size(a), cx.like, axes=(a,)), source))
            continue
        if within(cx, solved[a], ranges, sp.S.Zero, cx.sizes[a] - 1):
            index.append(align(affine_value(cx, solved[a], list(source)), source))
            continue
        at, kept = padded_part(cx, solved[a], cx.sizes[a], list(source))
        index.append(align(at, source))
        inside.append(align(kept, source))
    if set().union(*(v.axes for v in [value, *index])) != set(source):
        raise AxisError(f"a scatter over {[str(a) for a in source]} reads fewer axes")
    if inside:
        mask = inside[0]
        for m in inside[1:]:
            mask = ir.Binary("&", mask, m, axes=source)
        value = ir.Where(align(mask, source), value, ir.Number(0), axes=source)
    shape = tuple(cx.size(a) for a in axes)
    full = tuple(cx.size(a) for a in source)
    k = len(others)
    if tuple(others) != axes[:k]:  # a solved axis before another: index_put_ over them all
        # an entry read at a constant (x[n, T - 1]) is solved to a python number: index_put_
        # takes tensors only (a 0-d one broadcasts), and one expanded below must be a tensor
        # (fuzz --windows 12400516: (R - 1).expand(A, T))
        index = [ir.AsTensor(i, cx.like) if i.scalar else i for i in index]
        if set().union(*map(dense_axes, index)) != set(source):  # the indices broadcast to
            # the value's shape: over a summed axis no index reads too (fuzz --windows 7067)
            index[0] = ir.Expand(index[0], full, axes=source)
        value, like = _buffer_like(cx, value)
        cx.emit(ir.Assign((name,), ir.Zeros(shape, like, axes=axes)))
        cx.emit(ir.IndexPut(name, tuple(index), value))
        return True
    # the solved axes last: one flat index over them, a scatter_add_ along it (the other axes
    # leading, laid out as the target's: no index tensor for them)
    flat = _folded_index(cx, solved, axes[k:], source) if not inside else None
    if flat is None:
        flat = index[k]
        for a, at in zip(axes[k + 1 :], index[k + 1 :], strict=True):
            flat = ir.Binary("+", ir.Binary("*", flat, cx.size(a), axes=source), at, axes=source)
    rows = shape[:k] + (cx.value(sp.Mul(*[cx.sizes[a] for a in source[k:]]), []),)
    # both laid out over every axis of source at full size, or the flattened index and value
    # would not line up: sum_{t,k,j} delta(g, t + S a[t]) h[t, k, j] has its index over t
    # alone, expanded over k and j (fuzz --windows 7068: T indices against T K J values)
    # (a constant index, hid[a, R - 1], is a python number: a tensor before it is expanded)
    flat_index, flat_value = (
        ir.Reshape(v if dense_axes(v) == set(source) else ir.Expand(v, full, axes=source), rows)
        for v in (ir.AsTensor(flat, cx.like) if flat.scalar else align(flat, source), value)
    )
    trailing = sp.Mul(*[cx.sizes[a] for a in axes[k:]])
    flat_value, like = _buffer_like(cx, flat_value)
    cx.emit(ir.Assign((name,), ir.Zeros(shape[:k] + (cx.value(trailing, []),), like)))
    cx.emit(ir.ScatterAdd(name, k, flat_index, flat_value))
    cx.emit(ir.Assign((name,), ir.Reshape(ir.Ref(name), shape, axes=axes)))
    return True


def _summed_inside(e: sp.Expr, limits: list) -> sp.Expr:
    """``sum_limits e`` with the guards and factors free of the summed indices outside the
    sum: ``sum_k where(c, a x[k], 0) = where(c, a sum_k x[k], 0)`` for c and a free of k,
    so the sum is a contraction of its own factors, not a product under a where."""
    bound = {lim[0] for lim in limits}
    if isinstance(e, where) and e.args[2] == 0 and not e.args[0].free_symbols & bound:
        return where(e.args[0], _summed_inside(e.args[1], limits), 0)
    factors = sp.Mul.make_args(e)
    outside = [f for f in factors if not f.free_symbols & bound]
    if outside and len(outside) < len(factors):
        inside = [f for f in factors if f.free_symbols & bound]
        return sp.Mul(*outside) * _summed_inside(sp.Mul(*inside), limits)
    return sp.Sum(e, *limits)


def is_solved_scatter(cx: Context, e: sp.Expr, axes: tuple) -> bool:
    """Whether :func:`solved_scatter` writes ``e`` over ``axes`` (asked before a name is
    taken for it: a sum among other terms is scattered into a name of its own)."""
    found = _solved_deltas(cx, e, axes)
    return found is not None and not _transposed_window(cx, e, axes, found[0])


def _transposed_window(cx: Context, e: sp.Expr, axes: tuple, solved: dict) -> bool:
    """Deltas of affine reads alone that the window planner reads as a transposed
    convolution: one torch kernel (derive/lower/windows.py), not a scatter."""
    if any(v.has(sp.Indexed) for v in solved.values()):
        return False
    return isinstance(e, sp.Sum) and plan_window(cx.scope(axes), e) is not None


def _folded_index(cx: Context, solved: dict, axes: tuple, source: tuple) -> ir.Node | None:
    """The flat index over the solved ``axes`` (the target's last), ``h*W + w``, where it is
    built from an argmax's digits: ``(S*i + floor(a/W))*W + S*j + Mod(a, W)`` folds
    (:func:`~derive.language.argmax.fold_digits`) to ``S*i*W + S*j + a``, no division at run
    time. None where no digit is read (the index is built from the parts as before)."""
    flat = sp.S.Zero
    for a in axes:
        flat = flat * cx.sizes[a] + solved[a]
    if not flat.has(sp.floor, sp.Mod):
        return None
    return align(affine_value(cx, fold_digits(flat), list(source)), source)


def _decided(cx: Context, e: sp.Expr, ranges: dict) -> sp.Expr:
    """``e`` with each ``where(a <= b, u, v)`` (any of <=, <, >=, >) whose condition holds
    for every value of its indices and data (``indexing.within``) replaced by u, or by v
    where it never holds: the bounds an argmax's adjoint carries over from the window
    (``0 <= h - S*i <= K - 1`` at ``h = S*i + argmax``) are then no masks at run time."""

    def decide(w: sp.Expr) -> sp.Expr:
        cond, then, other = w.args
        if not isinstance(
            cond, (sp.LessThan, sp.StrictLessThan, sp.GreaterThan, sp.StrictGreaterThan)
        ):
            return w
        small, big = (
            (cond.lhs, cond.rhs)
            if isinstance(cond, (sp.LessThan, sp.StrictLessThan))
            else (cond.rhs, cond.lhs)
        )
        gap = sp.expand(big - small)  # the condition: gap >= 0 (<=, >=) or gap >= 1 (<, >)
        least = 1 if isinstance(cond, (sp.StrictLessThan, sp.StrictGreaterThan)) else 0
        found = bounds.interval(gap, ranges, cx.data_ranges, cx.derived, cx.scalars)
        if found is None:
            return w
        if bounds.at_most(least, found[0], cx.derived, cx.scalars):
            return then
        if bounds.at_most(found[1], least - 1, cx.derived, cx.scalars):
            return other
        return w

    return e.replace(lambda x: isinstance(x, where), decide)


def _solved_deltas(cx: Context, e: sp.Expr, axes: tuple) -> tuple | None:
    """(each solved axis's index expression, the coefficient c, the sums' limits) of
    ``e = sum_B c * deltas``, as :func:`solved_scatter` reads it; None for any other shape."""
    if not isinstance(e, sp.Sum):
        return None
    factors, limits = [], []
    stack_ = [e]
    # nested sums flattened: sum_i f sum_j g = sum_{i,j} f g, a nested sum's indices renamed
    # apart from those met before (sum_u grad_out[k, u] beside sum_u delta(m, cls[u, k])
    # a[u, k]: one u for both, nothing was solved, and fuzz --affine 4121 scattered over k)
    seen = {lim[0] for lim in e.limits} | set(axes)
    while stack_:
        s = stack_.pop()
        limits += list(s.limits)
        for f in sp.Mul.make_args(s.function):
            if isinstance(f, sp.Sum):
                f = rename_apart(f, seen)
                seen |= {lim[0] for lim in f.limits}
            (stack_ if isinstance(f, sp.Sum) else factors).append(f)
    bound = [lim[0] for lim in limits]
    if len(set(bound)) != len(bound) or set(bound) & set(axes):
        return None
    pending = [f for f in factors if isinstance(f, sp.KroneckerDelta)]
    # a delta against data alone (delta(g, idx[i])) is solved beside another; alone, it is
    # index_add_'s (scatter) or a one-hot update's
    beside = len(pending) > 1
    solved: dict[sp.Symbol, sp.Expr] = {}
    while pending:
        progress = False
        for d in list(pending):
            diff = sp.expand((d.args[0] - d.args[1]).xreplace(solved))
            outside = symbols_outside_entries(diff)
            ts = [a for a in axes if a not in solved and a in outside]
            if len(ts) != 1 or diff.coeff(ts[0]) not in (1, -1):
                continue  # one target axis, +-1, outside the data: t = the rest
            (t,) = ts
            c = diff.coeff(t)
            rest = sp.expand(diff - c * t)
            plain = rest.xreplace({i: sp.S.Zero for i in rest.atoms(sp.Indexed)})
            if rest.has(t) or not (plain.free_symbols or beside and rest.has(sp.Indexed)):
                continue  # t = data and/or an affine part, a data index alone beside one
            solved[t] = sp.expand(-rest / c)
            pending.remove(d)
            progress = True
        if not progress:
            return None
    if not solved:
        return None
    for _ in solved:  # a solution read inside another's data: substituted through
        solved = {t: sp.expand(v.xreplace(solved)) for t, v in solved.items()}
    rest = sp.Mul(*[f for f in factors if not isinstance(f, sp.KroneckerDelta)])
    rest = replace_apart(rest, solved)  # its own sums' indices kept apart (fuzz 1030111)
    if any(v.has(*solved) for v in solved.values()) or rest.has(*solved):
        return None
    scope = cx.scope(list(axes) + bound)
    source = set(axes) - set(solved) | set(bound)
    if not scope.axes(rest) <= source:
        return None
    return solved, rest, limits
