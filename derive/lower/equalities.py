"""An equality between int data and an index, ``where(k[n] == g, A, 0)``, as an index.

The language writes a segment sum, a GNN's messages or a pick as an equality mask:
``out[g, d] = Sum(where(seg[n] == g, x[n, d], 0), n)``. Lowered as written, the mask is an
(N, G) tensor broadcast against x, an (N, G, D) product: 212x autograd's time on a segment
sum (found probing). Two rules read the equality as the index it is:

- **scatter**, g a target axis and n summed: ``sum_n where(k[n] == g, A, 0) = sum_n
  delta(g, k[n]) A``: one ``index_add_`` (:func:`derive.lower.assign.scatter`), O(N D);
- **gather**, g summed: ``sum_g where(k == g, A, 0) B = (A B)(g = k)`` (k free of g): the
  part that reads g computed over g once and read at g = k, O(N D).

Unlike a delta the derivation makes from a subscript (``E[idx[n]]``: idx is range-checked
before any kernel runs, so every entry lies in the axis), the data of an equality may hold
any value: an entry outside g's axis matches no g, and the sum adds nothing for it (a -1
padding segment). Such an entry is sent to a spare index G, one past the axis
(:func:`spare_index`): the scatter adds it into a spare row that is then cut off, the gather
reads a row of zeros padded on. No mask over the data's (N, D) rows, where one was 3x the
``index_add_`` itself. Where the read at g = k cannot be padded (it reads the sum's other
indices too), it is clamped into the axis and masked instead. Data the module checks against
that very size (:attr:`Context.checked`) is read as it is.
"""

from __future__ import annotations

import sympy as sp

from derive.functions import clamp, where
from derive.ir import nodes as ir
from derive.lower.context import Context, lowers_to_int
from derive.lower.select import safe_indices
from derive.lower.value import permute, stem
from derive.symbolic.indices import factors, free_indices, has_reduction, replace_apart, without


def gathered(cx: Context, e: sp.Expr) -> sp.Expr:
    """``e`` with every sum over g of an equality ``k == g`` solved at g = k (the gather
    rule), innermost first; the rest unchanged."""
    if not e.has(where):
        return e
    ranges: dict[sp.Symbol, sp.Expr | None] = {}  # each bound index's range, None if two
    for x in e.atoms(sp.Sum):
        for var, lo, hi in x.limits:
            size = hi - lo + 1
            ranges[var] = size if ranges.get(var, size) == size else None

    def rule(s: sp.Sum) -> sp.Expr:
        for lim in s.limits:
            for f in factors(s.function):
                found = _equality(cx, f, lim[0])
                if found is None:
                    continue
                body = sp.Mul(found[1], *without(factors(s.function), f))
                # read at g = k, a sum inside that matched g is one of data against data now
                # (sum_e2 where(dst[e2] == dst[e1], ..)): solved too, not a dense (E, E) mask
                body = gathered(cx, _read_at(cx, found[0], lim, body, s.limits, ranges))
                rest = [x for x in s.limits if x is not lim]
                return sp.Sum(body, *rest) if rest else body
        read = _data_against_data(cx, s, ranges)
        return s if read is None else read

    return e.replace(lambda x: isinstance(x, sp.Sum), rule)


def _data_against_data(cx: Context, s: sp.Sum, ranges: dict) -> sp.Expr | None:
    """``sum_e where(k[e] == j[n], A, 0)``, an equality of two data, j[n] checked to lie in
    [0, G) (a subscript of an axis of that size): the same sum over a new index g in j[n]'s
    place, a tensor over (g, ..) (a scatter, :func:`as_scatter`), read at g = j[n]. A second
    layer of messages reads the first layer's scattered sum at its source nodes, ``dst[e] ==
    src[n]``: an (E, E) mask and an (E, D, E) product, where the sum over g is (V, D) once
    and its rows gathered (found probing: 51 GB at V 2000, E 20000, D 16). None for any
    other sum."""
    bound = {lim[0] for lim in s.limits}
    for f in factors(s.function):
        if not (isinstance(f, where) and isinstance(f.args[0], sp.Eq) and f.args[2] == 0):
            continue
        for a, b in (f.args[0].args, f.args[0].args[::-1]):
            if not (isinstance(b, sp.Indexed) and isinstance(a, sp.Indexed)):
                continue
            if b.free_symbols & bound or not a.free_symbols & bound:
                continue
            if not (_int_data(cx, a) and _int_data(cx, b)) or not _rows_of(b):
                continue
            # g's range: one that j[n] is checked to lie in (read at it as it is), else one
            # that k[e] is (j[n] outside it matches no k[e]: read guarded, _read_at)
            size_b, size_a = (_checked_size(cx, x) for x in (b, a))
            size = size_b if size_b is not None else size_a
            if size is None:
                continue
            g = sp.Symbol(cx.fresh("g"), integer=True)
            over = s.xreplace({b: g})
            if over.has(b) or free_indices(over) & set(b.indices):
                continue  # j[n]'s indices read elsewhere: no tensor over g alone
            lim = (g, sp.S.Zero, size - 1)
            named = _named(cx, over, lim, set(b.indices), ranges)
            if named is None:
                continue
            if size_b is not None:
                return named.xreplace({g: b})
            return _read_at(cx, b, lim, named, (), ranges)
    return None


def _checked_size(cx: Context, read: sp.Indexed) -> sp.Expr | None:
    """A size ``n`` for which :func:`is_checked` holds of ``read``, or None."""
    label = read.base.label.name
    sizes = (n for name, n in sorted(cx.checked, key=str) if name == label)
    return next((n for n in sizes if is_checked(cx, read, n)), None)


def _read_at(
    cx: Context, value: sp.Expr, lim: tuple, body: sp.Expr, limits: tuple, ranges: dict
) -> sp.Expr:
    """``body`` at g = value where lo <= value <= hi, 0 elsewhere (no g there to match)."""
    g, lo, hi = lim
    if lo == 0 and is_checked(cx, value, hi + 1):
        return replace_apart(body, {g: value})
    if g not in body.free_symbols:  # a count of the matches: 1 where value lies in the axis
        return _kept_inside(value, lo, hi, body)
    if lo != 0:
        return _masked(cx, value, lo, hi, body, g)
    outer = {x[0] for x in limits} - {g} | value.free_symbols
    body = _materialised(cx, body, lim, outer, ranges)
    at_g = [f for f in factors(body) if g in f.free_symbols]
    rest = [f for f in factors(body) if g not in f.free_symbols]
    carrier = carrier_of(cx, value)
    if carrier is None or not all(_finite(cx, f) for f in rest):
        return _masked(cx, value, lo, hi, body, g)
    part = sp.Mul(*at_g)
    read = part if _read_by_rows(part, g) else _named(cx, part, lim, outer, ranges)
    if read is None:
        return _masked(cx, value, lo, hi, body, g)
    padded = _padded(cx, read, g, hi + 1)
    return sp.Mul(*rest) * replace_apart(padded, {g: spare_index(cx, value, carrier, hi + 1)})


def _rows_of(value: sp.Expr) -> bool:
    """An entry of data read at distinct plain indices (``seg[n]``), which a spare index of
    the same shape stands for."""
    return (
        isinstance(value, sp.Indexed)
        and len(set(value.indices)) == len(value.indices)
        and all(isinstance(i, sp.Symbol) for i in value.indices)
    )


def _read_by_rows(part: sp.Expr, g: sp.Symbol) -> bool:
    """A tensor read at distinct plain indices, g its first: padded as it is."""
    return isinstance(part, sp.Indexed) and _rows_of(part) and part.indices[0] == g


def _finite(cx: Context, f: sp.Expr) -> bool:
    """A factor known finite: a number, or a read of a tensor the caller passes. Multiplied
    by a padded 0 it is 0, as the where it stands for gives."""
    if f.is_number:
        return bool(f.is_finite)
    return isinstance(f, sp.Indexed) and f.base.label.name in cx.finite


def _named(cx: Context, part: sp.Expr, lim: tuple, outer: set, ranges: dict) -> sp.Indexed | None:
    """``part`` computed over (g, its other indices) into a name of its own, read back at
    them; None where it reads an index of ``outer`` or one of no known range."""
    g, _, hi = lim
    free = free_indices(part)
    if free & outer:
        return None
    axes = (g, *sorted(free - {g}, key=sp.default_sort_key))
    shape = tuple(hi + 1 if a == g else cx.sizes.get(a, ranges.get(a)) for a in axes)
    if any(n is None for n in shape):
        return None
    # g is this sum's own index: its range is the limit's, whatever another statement's axis
    # of the same name learnt (dlogits[i, t] over logits[2, T] beside a sum over i < I, fuzz
    # --segments 12000000: a table of 2 rows read at rows up to I, an IndexError); the other
    # axes are the caller's
    cx.learn([(g, hi + 1)])
    cx.learn(zip(axes[1:], shape[1:], strict=True), replace=False)
    known = cx.recall(part)
    if isinstance(known, ir.Ref) and known.axes == axes:  # another gradient's, once
        name = known.name
    else:
        name = cx.fresh("at_" + stem(part))
        # computed here, before the caller's reads are clamped: a guarded index in it
        # (db[cls[u]] under where(cls[u] < 0, 0, ..)) is clamped as well (found by the fuzz)
        value = cx.value(safe_indices(cx, part), list(axes))
        cx.emit(ir.Assign((name,), permute(value, axes)))
        cx.remember(part, ir.Ref(name, axes=axes))
    return sp.IndexedBase(name, shape=shape, real=True)[axes]


def _padded(cx: Context, read: sp.Indexed, g: sp.Symbol, size: sp.Expr) -> sp.Indexed:
    """``read`` (g its first index) from the tensor with a row of zeros added after its last
    along g: the row a spare index reads."""
    label = read.base.label.name
    rank = len(read.indices)
    pads = (ir.Number(0),) * (2 * (rank - 1)) + (ir.Number(0), ir.Number(1))
    name = cx.alias(f"{label}_padded", ir.Pad(cx.tensor(label), pads))
    shape = (size + 1, *read.base.shape[1:])
    return sp.IndexedBase(name, shape=shape, real=True)[read.indices]


def _masked(cx: Context, value, lo, hi, body: sp.Expr, g: sp.Symbol) -> sp.Expr:
    """``body`` read at value clamped into [lo, hi], kept where value lies there."""
    return _kept_inside(value, lo, hi, replace_apart(body, {g: _clamped(cx, value, lo, hi)}))


def _materialised(
    cx: Context, body: sp.Expr, lim: tuple, outer: set, ranges: dict[sp.Symbol, sp.Expr | None]
) -> sp.Expr:
    """``body`` with each largest part that reads g under a sum (and no index in ``outer``:
    the sum's other indices, those k reads) computed once over g's axis and read at g.

    Read at g = k[n] as it stands, such a part is a sum per n, not per g: a ReLU's mask on a
    scattered sum, ``where(sum_e where(dst[e] == i, h[e], 0) > 0, ..)``, became a sum over
    e for each edge, an (E, E) product. Computed over g, it is the scatter once
    (:func:`as_scatter`) and a gather of its rows."""
    g = lim[0]

    def walk(x: sp.Expr) -> sp.Expr:
        if g not in x.free_symbols or not has_reduction(x):
            return x
        if free_indices(x) & outer:
            return x if isinstance(x, sp.Sum) else x.func(*[walk(a) for a in x.args])
        named = _named(cx, x, lim, outer, ranges)
        return x if named is None else named

    return walk(body)


def as_scatter(cx: Context, e: sp.Expr, axes: tuple) -> sp.Expr | None:
    """``e``, a sum over n with an equality ``k[n] == g`` for a target axis g, as the delta
    sum that :func:`derive.lower.assign.scatter` writes (``sum_n delta(g, k[n]) A``, an
    entry of k outside g's axis sent to its spare index); None where it is no such sum."""
    if not isinstance(e, sp.Sum) or not e.has(where):
        return None
    bound = {lim[0] for lim in e.limits}
    for f in factors(e.function):
        for g in axes:
            found = _equality(cx, f, g)
            if found is None or g in bound:
                continue
            value, kept = found
            carrier = carrier_of(cx, value)
            if not value.free_symbols & bound:
                continue
            if not isinstance(value, sp.Indexed) and carrier is None:
                continue  # k[n] + k[m] == g: no tensor of positions stands for it
            size = cx.sizes.get(g)
            rest = sp.Mul(kept, *without(factors(e.function), f))
            if size is not None and rest.has(g) and is_checked(cx, value, size):
                # read at g = k[n], which the delta makes it: 1 / den[g]**2 of a segment's
                # own sum is read only at the segments that hold an n (GAT's softmax adjoint)
                rest = replace_apart(rest, {g: value})
            if size is None or rest.has(g):
                continue
            at = value
            if not is_checked(cx, value, size):
                if carrier is not None:
                    at = spare_index(cx, value, carrier, size)
                else:
                    at = _clamped(cx, value, 0, size - 1)
                    rest = _kept_inside(value, 0, size - 1, rest)
            return sp.Sum(sp.KroneckerDelta(g, at) * rest, *e.limits)
    return None


def carrier_of(cx: Context, value: sp.Expr) -> sp.Indexed | None:
    """The one read of data at distinct plain indices that ``value`` is a function of
    (``seg[n]``, ``seg[n] + 1``, ``2*seg[n]``: a tensor of positions of seg's shape stands
    for it), or None."""
    reads = value.atoms(sp.Indexed)
    if len(reads) != 1:
        return None
    (read,) = reads
    if not _rows_of(read):
        return None
    labels = {read.base.label}
    axes = {x for x in value.free_symbols - labels if cx.is_axis(x)}
    return read if axes <= set(read.indices) else None


def spare_index(cx: Context, value: sp.Expr, carrier: sp.Indexed, size: sp.Expr) -> sp.Indexed:
    """``value`` (a function of data at plain indices, ``carrier``) as a tensor of its own,
    each entry outside [0, size) replaced by ``size``: one past the axis, an index no entry
    of the op reads (``seg_or_G = torch.where((seg >= 0) & (seg <= G - 1), seg, G)``),
    computed once a function. A scatter that adds at it makes a spare row and cuts it off
    (:attr:`Context.spare`)."""
    label = carrier.base.label.name
    name = next((n for n, key in cx.spare.items() if key == (value, size)), None)
    if name is None:
        name = cx.fresh(f"{label}_or_{_stem_of(size)}")
        inside = where(sp.Ge(value, 0), where(sp.Le(value, size - 1), value, size), size)
        axes = tuple(carrier.indices)
        cx.learn(zip(axes, carrier.base.shape, strict=True), replace=False)
        cx.emit(ir.Assign((name,), permute(cx.value(inside, list(axes)), axes)))
        cx.spare[name] = (value, size)
    return sp.IndexedBase(name, shape=carrier.base.shape, integer=True)[carrier.indices]


def _stem_of(size: sp.Expr) -> str:
    """A size as part of a name: ``G``, or ``size`` for an expression."""
    return str(size) if isinstance(size, sp.Symbol) else "size"


def segment(cx: Context, f: sp.Expr, g: sp.Symbol) -> tuple[sp.Expr, sp.Expr] | None:
    """``(k, A)`` where ``f`` is ``where(k == g, A, -inf)``: a segment's entries under a Max
    (:func:`derive.lower.maxes.segment_max`), as :func:`_equality` reads a sum's."""
    return _equality(cx, f, g, -sp.oo)


def _equality(
    cx: Context, f: sp.Expr, g: sp.Symbol, empty: sp.Expr = sp.S.Zero
) -> tuple[sp.Expr, sp.Expr] | None:
    """``(k, A)`` where ``f`` is ``where(k == g, A, empty)`` (or ``where(k != g, empty, A)``),
    k an int expression that reads int data and not g; else None."""
    if not isinstance(f, where):
        return None
    cond, then, other = f.args
    if isinstance(cond, sp.Eq) and other == empty:
        kept = then
    elif isinstance(cond, sp.Ne) and then == empty:
        kept = other
    else:
        return None
    a, b = cond.args
    diff = sp.expand(a - b)  # k[n] == g + 1: g = k[n] - 1
    c = diff.coeff(g)
    if c not in (1, -1) or (diff - c * g).has(g):
        return None
    value = sp.expand(-(diff - c * g) / c)
    if not _int_data(cx, value):
        return None
    if any(s.is_integer is not True for s in value.free_symbols if isinstance(s, sp.Symbol)):
        return None
    return value, kept


def _int_data(cx: Context, e: sp.Expr) -> bool:
    """An int expression of int data (``k[n]``, ``k[n] - 1``): what lowers to int64
    (:func:`~derive.lower.context.lowers_to_int`) and reads a tensor."""
    return e.has(sp.Indexed) and lowers_to_int(cx, e)


def is_checked(cx: Context, value: sp.Expr, size: sp.Expr) -> bool:
    """Whether ``value`` is an entry of int data the module checks lies in [0, size). Not a
    guarded input's (:mod:`derive.language.guards`): its check admits the entries a where()
    ignores, -1 under ``cls[b] < 0``, which match no index and must reach no kernel (fuzz
    7700567's double backward scattered at -1, a device-side assert on CUDA)."""
    if not isinstance(value, sp.Indexed) or value.base.label.name in cx.guarded:
        return False
    return (value.base.label.name, size) in cx.checked


def _clamped(cx: Context, value: sp.Expr, lo: sp.Expr, hi: sp.Expr) -> sp.Expr:
    """``clamp(value, lo, hi)``; an entry of data held in [0, hi] as an entry of a view of its
    own (``seg.clamp(0, G - 1)``), which a read takes as whole rows (``index_select``), as it
    takes the data itself."""
    if not (isinstance(value, sp.Indexed) and lo == 0):
        return clamp(value, lo, hi)
    label = value.base.label.name
    name = cx.alias(f"{label}_clamped", ir.ClampTo(cx.tensor(label), cx.value(hi, [])))
    return sp.IndexedBase(name, shape=value.base.shape, integer=True)[value.indices]


def _kept_inside(value: sp.Expr, lo: sp.Expr, hi: sp.Expr, body: sp.Expr) -> sp.Expr:
    return where(sp.Ge(value, lo), where(sp.Le(value, hi), body, 0), 0)
