"""Canonical forms and folding: express adjoints through the tensors the forward saves.

Before simplifying, element-wise intermediates are *inlined* into their canonical form (inputs
and reductions only), so identities between them become visible to SymPy. Afterwards they are
*folded* back, latest definition first, so the backward reads ``probs`` rather than
``exp(logits - maxes) / counts_sum`` and the saved set stays small:

    exp(l[n,c] - M[n]) * S[n]**-1    -> probs[n, c]            (a product of powers)
    (var[m] + eps)**(-3/2)           -> bnvar_inv[m]**3        (an integer power of a pattern)
    c * sum_k f(k)                   -> sum_k c f(k), folded, then factors pulled back out
    where(t <= f, exp(a - z), 0)     -> where(t <= f, x, 0)      (x = exp(where(t <= f, a,
                                        -inf) - z): folded where its where() holds)
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass

import sympy as sp

from derive.functions import where
from derive.identities import ACCURACY_RULES, FORWARD_RULES, rewrite, split_logs
from derive.language import Definition, Graph
from derive.symbolic.indices import (
    Fresh,
    bound_by_depth,
    freshen_bound,
    indexed_atoms,
    is_reduction,
    rename_bound,
    substitute,
    symbol_atoms,
    without,
)
from derive.symbolic.inversion import keep_padding, may_leave_axis
from derive.symbolic.reverse import live_tensors
from derive.symbolic.simplify import Reduction, cost


@dataclass(frozen=True)
class Pattern:
    """``name[indices] = body`` (canonical), folded wherever an instance of body appears."""

    name: str
    base: sp.IndexedBase | sp.Symbol
    indices: tuple[sp.Symbol, ...]
    body: sp.Expr
    of_exp: bool = False  # body is exp(the definition's body): fold to exp(name[...])
    # conditions under which body is the definition: its where()s read as one branch
    # (:func:`_resolved`), folded only inside where()s that hold them
    holds: tuple[sp.Basic, ...] = ()
    # work over sums (a lifted call of one): an instance whose sums' indices are named apart
    # is the same work (:func:`_same_sums`)
    over_sums: bool = False

    def target(self, bind: dict) -> sp.Expr:
        at = self.base[tuple(bind[i] for i in self.indices)] if bind else self.base
        return sp.exp(at) if self.of_exp else at


# A canonical body whose tree is this many times its distinct sub-expressions copies subtrees
# (a2 = a1 tanh(a1) inlined twice over is 4 copies of x): inlining it everywhere grows as 2**n
# along a chain, so such an intermediate stays atomic, like a reduction.
DUPLICATION = 4
SMALL = 64  # bodies of at most this many nodes are always inlined


@functools.lru_cache(maxsize=1 << 16)
def _tree_size(e: sp.Basic) -> int:
    return 1 + sum(_tree_size(a) for a in e.args)


def _duplicates(body: sp.Expr) -> bool:
    tree = _tree_size(body)
    if tree <= SMALL:
        return False
    distinct, todo = set(), [body]
    while todo:
        e = todo.pop()
        if e not in distinct:
            distinct.add(e)
            todo.extend(e.args)
    return tree > DUPLICATION * len(distinct)


def _over_sums(body: sp.Expr) -> bool:
    """``body`` is element-wise work over sums it divides by, ``e[n, c] / Sum(e[n, c2], c2)``
    (a normalisation written in one line): inlined like an element-wise definition, so the
    backward sees ``probs[n, y[n]]`` as ``e[n, y[n]] / S[n]`` and ``1 / probs`` cancels, as
    it does where the user named the sum (``counts_sum``). A sum anywhere else keeps the
    definition a reduction."""
    factors = sp.Mul.make_args(body)
    over = [f for f in factors if f.has(sp.Sum)]
    return bool(over) and all(
        isinstance(f, sp.Pow) and isinstance(f.base, sp.Sum) and f.exp.is_negative for f in over
    )


def _divides_safely(coef: sp.Expr, sizes: set) -> bool:
    """Whether ``name / coef`` stands for ``Sum_k body`` wherever ``name = coef * Sum_k body``
    is finite, in floats as in exact arithmetic. Folding the sum to the saved name divides by
    the coefficient, so each factor of it must be nonzero as a float:

        a number c != 0, a size (N, 1/C)    a nonzero constant
        b**-e, e > 0 (1/S, rstd = v**-1/2)  the division multiplies by b**e: finite where b is
        anything else (tanh(s), a param)    may be 0 (tanh(0), alpha = 0) or round to 0
                                            (exp(-800)): name / coef = 0 / 0 = NaN there

    (``out = tanh(Sum(y)) * Sum(y**2)`` folded ``Sum(y**2)`` to ``out / tanh(Sum(y))``: its
    backward was NaN at every row whose entries sum to 0, found by the fourteenth session's
    accuracy sweep; tests/cases/view_by_a_param.py.)"""
    for f in sp.Mul.make_args(coef):
        if f.is_number:
            if f == 0:
                return False
        elif isinstance(f, sp.Pow) and f.exp.is_negative:
            continue
        elif not (f.free_symbols <= sizes and not f.atoms(sp.Indexed)):
            return False
    return True


def nested_extremes(g: Graph) -> set[str]:
    """The definitions that are one maximum (minimum) and that a maximum (minimum) reads as an
    argument: ``out_max0 = Max(x, y)`` under ``out = Max(out_max0, z)``. Inlined, SymPy would
    flatten the two into ``Max(x, y, z)``, whose derivative splits a three-way tie 1/2 each
    (see :class:`derive.language.ranges.nested`)."""
    kinds = {
        s.name: type(s.body)
        for s in g.steps
        if isinstance(s, Definition) and isinstance(s.body, (sp.Max, sp.Min))
    }
    found = set()
    for s in g.steps:
        if isinstance(s, Definition):
            for e in s.body.atoms(sp.Max, sp.Min):
                for a in e.args:
                    read = (
                        a.base.label.name if isinstance(a, sp.Indexed) else getattr(a, "name", None)
                    )
                    if kinds.get(read) is type(e):
                        found.add(read)
    return found


class Canon:
    """Canonical bodies of a graph's definitions (pointwise ones inlined, reductions atomic).

    Only the definitions the output reads: a fold or a named reduction turns an expression into
    the tensor that holds it, and one the output does not read is never computed (the forward
    drops it), so an expression folded onto it would read an undefined name (fuzz 700564:
    ``h[j, a, t]`` in a tangent folded onto an unread transpose ``w[a, t, j] = h[j, a, t]``)."""

    def __init__(self, g: Graph, fresh: Fresh) -> None:
        self.graph = g
        self.fresh = fresh
        self.bodies: dict[str, tuple[tuple[sp.Symbol, ...], sp.Expr]] = {}
        self.reductions: list[Reduction] = []
        # work over sums that is neither a sum nor a normalisation (``sigmoid(Sum_d x W)``, a
        # lifted call): atomic, as a reduction is, but folded wherever the backward writes it
        self.over_sums: dict[str, tuple[tuple[sp.Symbol, ...], sp.Expr]] = {}
        live = live_tensors(g)
        nested = nested_extremes(g)
        for step in g.steps:
            if isinstance(step, Definition) and step.name in live:
                if step.name in nested:
                    continue  # stays a named tensor: inlined, SymPy flattens the two maximums
                body = self.inline(step.body)
                if _over_sums(body) and not _duplicates(body):
                    self.bodies[step.name] = (step.indices, body)  # probs = e / Sum(e): inlined
                elif step.body.has(sp.Sum) or is_reduction(step.body):
                    if not self._add_reduction(step, body) and body.has(sp.Sum):
                        self.over_sums[step.name] = (step.indices, body)
                elif _duplicates(body):
                    continue  # stays a named tensor: inlined, it would copy a subtree each use
                else:
                    self.bodies[step.name] = (step.indices, body)

    def inline(self, expr: sp.Expr) -> sp.Expr:
        """Replace every pointwise intermediate in ``expr`` by its canonical body."""
        replace = {}
        for ind in sorted(indexed_atoms(expr), key=sp.default_sort_key):
            entry = self.bodies.get(ind.base.label.name)
            if entry is not None:
                idx, body = entry
                body = freshen_bound(body, self.fresh)
                dims = self.graph.tensors[ind.base.label.name].dims
                replace[ind] = keep_padding(
                    lambda at, body=body, idx=idx: body.xreplace(dict(zip(idx, at, strict=True))),
                    ind.indices,
                    dims,
                )
        for sym in symbol_atoms(expr):
            entry = self.bodies.get(sym.name)
            if entry is not None and not entry[0]:
                replace[sym] = entry[1]
        return substitute(expr, replace)

    def _add_reduction(self, step: Definition, body: sp.Expr) -> bool:
        """Whether ``body`` is ``coef * Sum_k f`` (then registered for the simplifier's folds)."""
        sums = [f for f in sp.Mul.make_args(body) if isinstance(f, sp.Sum)]
        if len(sums) != 1 or len(sums[0].limits) != 1:
            return False
        coef = sp.Mul(*[f for f in sp.Mul.make_args(body) if not isinstance(f, sp.Sum)])
        if not _divides_safely(coef, set(self.graph.sizes)):
            return True  # Sum_k body stays a sum: name / coef would be 0 / 0 where coef is 0
        name = self.graph.tensors[step.name]
        base = name.base if name.dims else name.whole
        self.reductions.append(
            Reduction(base, step.indices, coef, sums[0].function, sums[0].limits[0])
        )
        return True

    def patterns(self) -> list[Pattern]:
        """Fold patterns, latest definition first (the larger expression wins)."""
        out = []
        for name in reversed(list(self.bodies)):
            idx, body = self.bodies[name]
            t = self.graph.tensors[name]
            base = t.base if t.dims else t.whole
            out.append(Pattern(name, base, idx, body))
            exp_body = _exp_of_logs(body)
            if exp_body is not None:
                out.append(Pattern(name, base, idx, exp_body, of_exp=True))
            for branch in (1, 2):
                resolved, holds = _resolved(body, branch)
                # a branch of -inf or 0 names nothing; and the name is read only where it is
                # finite on the other side too: a later derivation (the second order) may take
                # a read out of its where(), and -inf * 0 is NaN (fuzz --constants 1260227)
                other, _ = _resolved(body, 3 - branch)
                if holds and resolved.free_symbols and _finite(other):
                    out.append(Pattern(name, base, idx, resolved, holds=holds))
        for name in reversed(list(self.over_sums)):
            idx, body = self.over_sums[name]
            t = self.graph.tensors[name]
            out.append(Pattern(name, t.base if t.dims else t.whole, idx, body, over_sums=True))
        return out


def ruled_patterns(patterns: list[Pattern], *rules: Callable[[sp.Expr], sp.Expr]) -> list[Pattern]:
    """Each pattern, then the same pattern with its body as each of ``rules`` rewrites it,
    where that differs: the expression a fold meets has been through the rules, and an
    instance of a definition is found only in the form the rules left.

    ``a1 = erf(log(sigmoid(z[q]) exp(z[n])))`` reads ``-erf(softplus(-z[q]) - z[n])`` once
    the rules split the log; the definitions over it (two masked softmaxes, fuzz 7200256)
    then matched no pattern, and their bodies were recomputed inline at every read: a
    backward of 1,051 operations, a double backward of 3,500 lines and minutes to derive.
    Each variant is the body by identities, so folding it to the name is exact."""
    out = []
    for pat in patterns:
        out.append(pat)
        seen = {pat.body}
        for rule in rules:
            body = rule(pat.body)
            if body not in seen:
                seen.add(body)
                out.append(dataclasses.replace(pat, body=body))
    return out


def _resolved(body: sp.Expr, branch: int) -> tuple[sp.Expr, tuple[sp.Basic, ...]]:
    """``body`` with each where() outside its sums read as its first (``branch`` 1) or second
    (2) branch, and the conditions that reading needs.

    Inside ``where(t <= f, .., 0)`` the simplifier reads a masked ``hid = where(t <= f, a,
    -inf)`` as ``a``, so ``x = exp(hid - z)`` inlined there is ``exp(a - z)``, which no longer
    matches x's body: the backward recomputed it, by another rounding than the forward's
    (``torch.addcmul``), and ``a - z``, exactly 0 at the Max in the forward, was +ulp(a) there,
    an overflow at a ~ 1e22 (fuzz --range 1210288). Folded under its conditions it reads x.
    """
    holds: list[sp.Basic] = []

    def walk(e: sp.Basic) -> sp.Basic:
        if isinstance(e, sp.Sum) or not e.args:
            return e
        if isinstance(e, where):
            c = e.args[0]
            holds.append(condition(c) if branch == 1 else negation(c))
            return walk(e.args[branch])
        return e.func(*[walk(a) for a in e.args])

    resolved = walk(body)
    return resolved, tuple(holds)


def _finite(e: sp.Expr) -> bool:
    """Whether ``e`` is finite at a typical point (each read and param 1/3, each size and
    index 3): no -inf branch, no exp(-inf) aside (exp(-inf - z) is 0). Sizes were 1/3 too,
    and a maximum of a Sum over ``(i, 0, -2/3)`` could not be compared (a ValueError out of
    the derivation, fuzz 1610008, found on an H200's CPU cores); a point SymPy cannot
    evaluate answers False, as an infinite one (no conditional fold)."""
    at = e.xreplace({a: sp.Rational(1, 3) for a in e.atoms(sp.Indexed)})
    try:
        at = at.xreplace(
            {a: sp.Integer(3) if a.is_integer else sp.Rational(1, 3) for a in at.free_symbols}
        )
        return at.is_finite is True
    except (TypeError, ValueError):
        return False


def condition(c: sp.Basic) -> sp.Basic:
    """A where()'s condition in one spelling: ``f >= t`` and ``t <= f`` alike."""
    return c.canonical if type(c) in _RELATIONS else c


def negation(c: sp.Basic) -> sp.Basic:
    """Where a where()'s condition fails, in :func:`condition`'s spelling (``t > f``); a
    condition of the language's own (:class:`~derive.functions.zero_in_floats`) as Not(c)."""
    return condition(c.negated) if type(c) in _RELATIONS else sp.Not(c, evaluate=False)


_RELATIONS = (sp.Eq, sp.Ne, sp.Lt, sp.Le, sp.Gt, sp.Ge)


def _exp_of_logs(body: sp.Expr) -> sp.Expr | None:
    """exp(a - log S) = exp(a) / S: a log-softmax's exp(out) is the softmax, read from the saved
    out instead of recomputed from x, the max and the sum (one tensor saved, not three)."""
    logs = [t for t in sp.Add.make_args(body) if t.as_coeff_Mul()[1].func == sp.log]
    if not logs or len(logs) == len(sp.Add.make_args(body)):
        return None
    rest = sp.Add(*[t for t in sp.Add.make_args(body) if t not in logs])
    powers = [t.as_coeff_Mul()[1].args[0] ** t.as_coeff_Mul()[0] for t in logs]
    return sp.exp(rest) * sp.Mul(*powers)


def _powers(
    e: sp.Expr, apart: bool = False
) -> tuple[sp.Expr, dict[sp.Expr, sp.Expr], dict[sp.Expr, sp.Expr]]:
    """``e`` as coefficient * product of base**exponent (exp(x) stays one base): the
    coefficient, ``{key: exponent}`` and ``{key: base}``. With ``apart``, a base over sums is
    keyed with its bound indices named by depth (``1 / Sum_u s[g, u]`` is the same base as
    ``1 / Sum_k s[g, k]``)."""
    coef, powers, bases = sp.S.One, {}, {}
    for f in sp.Mul.make_args(e):
        if f.is_Number:
            coef *= f
            continue
        b, x = (f.base, f.exp) if isinstance(f, sp.Pow) else (f, sp.S.One)
        key = bound_by_depth(b) if apart and b.has(sp.Sum) else b
        powers[key] = powers.get(key, 0) + x
        bases.setdefault(key, b)
    return coef, powers, bases


BINDINGS = 64  # partial bindings kept while joining a pattern's reads (a bound on the search)


def _bindings(pattern: Pattern, expr: sp.Expr) -> list[dict]:
    """Index bindings under which an instance of the pattern could appear in ``expr``.

    An instance holds every read of the pattern's body, so the bindings are a join: each read
    ``x[a, labels[n1], h]`` is unified with a read of the same tensor in ``expr``, through
    data subscripts too (``labels[n1]`` against ``labels[m]`` binds n1 = m), and the partial
    bindings of all the reads are merged where they agree. One read need not bind every index:
    ``gain[a, h] = x[a] * y[h]`` is bound by two (fuzz --range 730268: a pattern bound only
    through a gather's subscript never folded, so the backward recomputed ``exp(gain - max)``
    by another rounding and overflowed where the forward's ``gain - max <= 0`` held exactly).
    The caller compares the instance with the expression; a binding here is only a candidate.
    """
    if not pattern.indices:
        return [{}]
    wanted = set(pattern.indices)
    present = _reads_by_tensor(expr)
    reads = [p for p in _sorted_reads(pattern.body) if p.free_symbols & wanted]
    partial: list[dict] = [{}]
    for p in reads:
        grown, seen = [], set()
        for bind in partial:
            for actual in present.get(p.base, []):
                more = _unify(p, actual, dict(bind), wanted)
                key = None if more is None else frozenset(more.items())
                if key is not None and key not in seen:  # hashed: dicts compared pairwise
                    seen.add(key)  # were most of a large fold's time
                    grown.append(more)
        partial = grown[:BINDINGS]
        if not partial:
            return []
    found = [b for b in partial if set(b) == wanted]
    return sorted(found, key=lambda b: sp.default_sort_key(tuple(b.values())))


@functools.lru_cache(maxsize=1 << 14)
def _sorted_reads(e: sp.Expr) -> tuple[sp.Indexed, ...]:
    # once per expression: a fold asks each pattern's bindings at every node it passes, and
    # sorting by default_sort_key was half of a large fold's binding time
    return tuple(sorted(indexed_atoms(e), key=sp.default_sort_key))


@functools.lru_cache(maxsize=1 << 14)
def _reads_by_tensor(e: sp.Expr) -> dict[sp.Basic, tuple[sp.Indexed, ...]]:
    """The reads of ``e`` per tensor, each tensor's in sorted order (read, never changed)."""
    present: dict[sp.Basic, list[sp.Indexed]] = {}
    for actual in _sorted_reads(e):
        present.setdefault(actual.base, []).append(actual)
    return {base: tuple(reads) for base, reads in present.items()}


def _unify(p: sp.Basic, actual: sp.Basic, bind: dict, wanted: set) -> dict | None:
    """``bind`` extended so that ``p`` (a pattern's read or subscript) may be ``actual``; None
    where they disagree on an index. A subscript that is neither an index nor a read of data
    (``t - 1``) binds nothing: the instance comparison decides."""
    if p in wanted:
        if bind.get(p, actual) != actual:
            return None
        bind[p] = actual
        return bind
    if isinstance(p, sp.Indexed) and isinstance(actual, sp.Indexed) and p.base == actual.base:
        for pi, ai in zip(p.indices, actual.indices, strict=True):
            if _unify(pi, ai, bind, wanted) is None:
                return None
    return bind


@functools.lru_cache(maxsize=1 << 14)
def _instance(body: sp.Expr, bind: tuple[tuple[sp.Symbol, sp.Expr], ...]) -> sp.Expr:
    """The pattern's body at ``bind``. A sum's index that a bound value names is renamed apart
    first: ``e[n, c] / Sum_m e[n, m]`` at n = m is a sum over the row m, not the diagonal
    ``Sum_m e[m, m]``. To a Dummy, not as :func:`~derive.symbolic.indices.replace_apart`
    names it (``m1``): a name the backward may use too would let an instance equal some
    expression by its names, and which folds fire would hang on the names it chose."""
    names = {s for key, value in bind for s in (key, *value.free_symbols)}

    def apart(limits: tuple, depth: int, scope: frozenset[str]) -> list[sp.Symbol]:
        return [sp.Dummy(str(v), integer=True) if v in names else v for v, _, _ in limits]

    return rename_bound(body, apart).xreplace(dict(bind))


def _fold_product(pattern: Pattern, bind: dict, e: sp.Expr, apart: bool) -> sp.Expr:
    inst = _instance(pattern.body, tuple(bind.items()))
    target = pattern.target(bind)
    pc, pp, _ = _powers(inst, apart)
    ec, ep, bases = _powers(e, apart)
    if not pp:
        return e
    times = None
    for b, x in pp.items():
        ratio = ep.get(b, 0) / x
        k = int(sp.floor(ratio)) if ratio.is_number and ratio > 0 else 0
        times = k if times is None else min(times, k)
    if not times:
        return e
    rest = sp.Mul(*[bases[b] ** (x - times * pp.get(b, 0)) for b, x in ep.items()])
    coef = ec / pc**times
    coef = sp.S.One if coef == 1 else coef  # 1.25 / 1.25 is the Float 1.0: no multiply by it
    return coef * rest * target**times


def _fold_terms(inst: sp.Add, target: sp.Expr, e: sp.Add) -> sp.Expr:
    # a + b + rest -> t + rest    when t = a + b (only this Add's own terms, never deeper)
    terms = list(e.args)
    for t in inst.args:
        if t not in terms:
            return e
        terms.remove(t)
    return sp.Add(target, *terms)


def _same_call(e: sp.Expr, inst: sp.Expr) -> bool:
    """f(a) and f(b) with a - b expanding to 0: the simplifier may have factored an argument
    (x + c x**3 -> x (1 + c x**2)) after the forward wrote it; the call is still the saved one."""
    if not (isinstance(e, sp.Function) and type(e) is type(inst) and len(e.args) == len(inst.args)):
        return False
    return all(a == b or _same_value(a, b) for a, b in zip(e.args, inst.args, strict=True))


def _same_sums(e: sp.Expr, inst: sp.Expr) -> bool:
    """The same work over sums whose bound indices are named apart: the backward renames a
    sum's index (d to d1) where it writes ``sigmoid(Sum_d x W)`` again, and a normalisation
    ``s[g, w] / Sum_u s[g, u]`` inlined into it reads ``Sum_k``. Compared only as that,
    never folded by its sums' names (a softmax the user wrote in one line was recomputed at
    every read, and two in a chain were copied into each other: fuzz 7200256)."""
    return type(e) is type(inst) and inst.has(sp.Sum) and bound_by_depth(e) == bound_by_depth(inst)


def _same_value(a: sp.Basic, b: sp.Basic) -> bool:
    # arithmetic only: a where()'s condition (t2 <= t1) has no difference to expand (fuzz 50456).
    # Values that read different symbols are taken as different without expanding: a symbol
    # one side reads and the other does not cancels only in a sum the simplifier would have
    # cancelled (missed, the call is computed again, not read). The expansion was 8.6 s of a
    # 70 s derivation (fuzz 11500880's double backward: 4,161 pairs, none equal, every one
    # reading different symbols)
    exprs = isinstance(a, sp.Expr) and isinstance(b, sp.Expr)
    if not exprs or a.is_Relational or _free_of(a) != _free_of(b):
        return False
    return sp.expand(a - b) == 0


def _fold_node(patterns: list[Pattern], e: sp.Expr, holds: frozenset = frozenset()) -> sp.Expr:
    for pat in patterns:
        if pat.holds and not holds:
            continue
        for bind in _bindings(pat, e):
            if _may_leave(pat, bind) or _captured(bind, e) or not _held(pat, bind, holds):
                continue
            inst = _instance(pat.body, tuple(bind.items()))
            target = pat.target(bind)
            # sums named apart are the same work read over whole axes; at a gathered or
            # shifted read the instance is a few entries, the name a whole tensor to compute
            # (p[n, y[n]] of e[n, c] / Sum_k e[n, k]: an N x C tensor for N entries)
            apart = pat.over_sums or all(isinstance(v, sp.Symbol) for v in bind.values())
            if (
                (hash(e) == hash(inst) and e == inst)
                or _same_call(e, inst)
                or apart
                and _same_sums(e, inst)
            ):
                return target
            if isinstance(inst, (sp.Mul, sp.Pow)) and isinstance(e, (sp.Mul, sp.Pow)):
                e = _fold_product(pat, bind, e, apart)
            elif isinstance(inst, sp.Add) and isinstance(e, sp.Add):
                e = _fold_terms(inst, target, e)
    return e


def _captured(bind: dict, e: sp.Expr) -> bool:
    """A binding that reads an index bound by a Sum inside ``e``: the target would stand at
    ``e``'s level, outside that Sum, where the index means nothing. ``loss[q, o, y] = gain[q]
    - gain[o] - W1[y]`` is ``-W1[y]`` wherever q = o, and ``-W1[labels[t]] * Sum_k exp(..
    gain[k] ..)`` bound q = o = k off the sum's reads (fuzz 1070018: an engine bug, the
    backward reading k outside its sum)."""
    free = _free_of(e)
    return any(not v.free_symbols <= free for v in bind.values())


@functools.lru_cache(maxsize=1 << 14)
def _free_of(e: sp.Expr) -> frozenset:
    # asked once per pattern and binding at each node of a fold: SymPy walks e each time
    return frozenset(e.free_symbols)


def _may_leave(pattern: Pattern, bind: dict) -> bool:
    """An affine subscript of the fold's target that may fall outside its axis: there the
    instance reads its operands' zero padding (exp(act[.., y + 2]) is exp(0) = 1 past the end)
    while the named tensor reads 0, so the instance stays as written (fuzz --affine 1973)."""
    if not bind or not isinstance(pattern.base, sp.IndexedBase) or pattern.base.shape is None:
        return False
    dims = dict(zip(pattern.indices, pattern.base.shape, strict=True))
    return any(may_leave_axis(sub, dims[i]) for i, sub in bind.items())


def _held(pattern: Pattern, bind: dict, holds: frozenset) -> bool:
    """Whether each condition the pattern's reading needs holds where it would be folded."""
    bound = tuple(bind.items())
    return all(condition(_instance(c, bound)) in holds for c in pattern.holds)


def fold(
    expr: sp.Expr,
    patterns: list[Pattern],
    memo: dict | None = None,
    holds: frozenset = frozenset(),
) -> sp.Expr:
    """Fold canonical sub-expressions back into the intermediates that name them.

    Top-down, so the largest instance wins: ``exp(l - M) / S`` becomes ``probs`` before its
    ``l - M`` could become ``norm_logits``. ``memo`` (for one list of patterns) folds each
    distinct sub-expression once: a shared subtree is not folded again per occurrence.
    ``holds``: what the where()s around ``expr`` decide there (``c`` in a first branch, its
    negation in a second).
    """
    if not isinstance(expr, sp.Basic) or not expr.args:
        return expr
    memo = {} if memo is None else memo
    key = (expr, holds) if holds else expr
    if key not in memo:
        memo[key] = _fold(expr, patterns, memo, holds)
    return memo[key]


def _fold(expr: sp.Expr, patterns: list[Pattern], memo: dict, holds: frozenset) -> sp.Expr:
    if isinstance(expr, sp.Sum):
        bound = {lim[0] for lim in expr.limits}
        inner = frozenset(c for c in holds if not c.free_symbols & bound)
        return sp.Sum(fold(expr.function, patterns, memo, inner), *expr.limits)
    node = _fold_node(patterns, expr, holds)
    if node != expr:
        plain = fold(node, patterns, memo, holds)
    elif isinstance(expr, where):
        c, a, b = expr.args
        first = fold(a, patterns, memo, holds | {condition(c)})
        second = fold(b, patterns, memo, holds | {negation(c)})
        plain = where(fold(c, patterns, memo, holds), first, second)
    else:
        plain = expr.func(*[fold(a, patterns, memo, holds) for a in expr.args])
    sums = [f for f in expr.args if isinstance(f, sp.Sum)] if isinstance(expr, sp.Mul) else []
    if len(sums) != 1:
        return plain
    # c * sum_k f(k) -> sum_k c f(k): a factor outside may complete a pattern inside. Back out
    # goes what reads none of the sum's indices (all its limits: sum_{q,h} x[q] y[h] keeps y[h]
    # inside, fuzz 96606); nothing moves in when c names one of them (it would be captured).
    (s,) = sums
    bound = {lim[0] for lim in s.limits}
    others = sp.Mul(*without(expr.args, s))
    if others.free_symbols & bound:
        return plain
    within = frozenset(c for c in holds if not c.free_symbols & bound)
    inner = fold(others * s.function, patterns, memo, within)
    outside = [f for f in sp.Mul.make_args(inner) if not f.free_symbols & bound]
    kept = [f for f in sp.Mul.make_args(inner) if f.free_symbols & bound]
    pulled = fold(sp.Mul(*outside), patterns, memo, holds) * sp.Sum(sp.Mul(*kept), *s.limits)
    return pulled if cost(pulled) < cost(plain) else plain


def stabilise(body: sp.Expr, canon: Canon, earlier: set[str]) -> sp.Expr:
    """A forward rewrite for range: log(exp(a) * b) -> a + log(b).

    The seed's ``logprobs = log(probs)`` underflows to -inf once a probability rounds to 0
    (logits of 1e4); through the canonical form it becomes ``norm_logits - log(counts_sum)``.
    Kept wherever a log splits (:func:`~derive.identities.split_logs`: only where the split
    holds for every real value), ``log(exp(a) / Sum(exp(b)))`` too: ``a - log(Sum(exp(b)))``.
    """
    patterns = ruled_patterns([p for p in canon.patterns() if p.name in earlier], _stabilised)
    inlined = canon.inline(body)
    ruled = _ruled(inlined)
    if not body.has(sp.log):  # a log read through an earlier definition was stabilised there
        return fold(ruled, patterns) if ruled != inlined else body
    rewritten = _stabilised(inlined)
    if rewritten == inlined:
        return body
    return fold(rewritten, patterns)


def _ruled(e: sp.Expr) -> sp.Expr:
    return rewrite(rewrite(e, FORWARD_RULES), ACCURACY_RULES)


def _stabilised(e: sp.Expr) -> sp.Expr:
    # the rows again after a split: log(sigma(x) sigma(z)) -> log(sigma(x)) + log(sigma(z))
    return _ruled(split_logs(_ruled(e)))
