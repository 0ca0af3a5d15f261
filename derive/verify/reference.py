"""A naive torch interpreter of the op language: the independent reference for generated modules.

It shares nothing with the lowering (:mod:`derive.lower`, :mod:`derive.emit`): it reads
the parsed :class:`~derive.language.Graph` and evaluates each definition by brute force. Every
index of a definition, free or bound, gets its own tensor axis; a value is a pair
``(tensor, axes)`` with one axis per index symbol it depends on, and

    a + b, a * b        broadcast over the union of the axes
    Sum(f, i)           f.sum over axis i    (times the range of i if f does not depend on i)
    Max(f, i)           f.amax over axis i   (f unchanged if it does not depend on i; over
                        several indices, one amax over their axes flattened)
    x[i, t[i], j]       advanced indexing with one index tensor per subscript, broadcast
    KroneckerDelta(a,b) the mask a == b
    where(c, a, b)      torch.where over the comparison c of index aranges / int data
    W[c, 1, h, d]       a constant subscript indexes with that number

so the result is right by construction, at the cost of memory (prod of all index ranges). It is
differentiable by torch autograd, which gives the reference gradients (:func:`autograd_reference`).
Batched inputs (``x[...]``) have their leading dimensions flattened into the one ``Batch`` axis;
batched definitions are returned with the leading shape of the inputs restored.
"""

from __future__ import annotations

import math

import sympy as sp
import torch

from derive.language import Definition, Graph, ReduceMax, View
from derive.verify.binding import InterpretError, bind_inputs
from derive.verify.reference_functions import COMPARE, KINKED, UNARY, VARIADIC

Axes = tuple[sp.Symbol, ...]
Value = tuple[torch.Tensor, Axes]


class _Scope:
    """What one definition is evaluated against: sizes, params, tensors, index axes."""

    def __init__(
        self, graph: Graph, sizes: dict, values: dict, dtype: torch.dtype, kinks: list | None
    ) -> None:
        self.graph = graph
        self.sizes = sizes  # size symbol -> int
        self.values = values  # tensor name -> concrete tensor (batched ones flattened)
        self.params = graph.params  # param symbol -> float
        self.dtype = dtype
        self.ranges: dict[sp.Symbol, tuple[int, int]] = {}  # index -> (start, length)
        self.fresh = 0
        self.kinks = kinks  # distances to the nearest kink (|x| at abs/relu, max gaps), if asked

    def kink(self, distance: torch.Tensor) -> None:
        if self.kinks is not None and distance.numel():
            self.kinks.append(float(distance.detach().abs().min()))

    def integer(self, e: sp.Expr) -> int:
        ints = {p: v for p, v in self.params.items() if isinstance(v, int)}  # view(x, N, k, T/k)
        v = sp.sympify(e).subs({**self.sizes, **ints})
        if not v.is_Integer:
            raise InterpretError(f"cannot evaluate '{e}' to an integer (unbound size?)")
        return int(v)

    def scalar(self, x: float) -> Value:
        return torch.tensor(float(x), dtype=self.dtype), ()


def _align(vals: list[Value]) -> tuple[list[torch.Tensor], Axes]:
    """Broadcast each value over the union of all axes (first-appearance order)."""
    union: list[sp.Symbol] = []
    for _, axes in vals:
        union += [a for a in axes if a not in union]
    out = []
    for t, axes in vals:
        perm = sorted(range(len(axes)), key=lambda i: union.index(axes[i]))
        t = t.permute(perm) if axes else t
        shape = [t.shape[[axes[i] for i in perm].index(u)] if u in axes else 1 for u in union]
        out.append(t.reshape(shape))
    return out, tuple(union)


def _arithmetic(e: sp.Add | sp.Mul, values: list[Value]) -> Value:
    """a + b + ... or a * b * ...: broadcast over the union of the operands' axes."""
    parts, axes = _align(values)
    acc = parts[0]
    for p in parts[1:]:
        acc = acc + p if isinstance(e, sp.Add) else acc * p
    return acc, axes


def _index_value(e: sp.Expr, s: _Scope) -> Value:
    """An integer-valued subscript: an index symbol, a constant, or an entry of an int tensor."""
    if isinstance(e, sp.Symbol) and e in s.ranges:
        start, length = s.ranges[e]
        return torch.arange(start, start + length), (e,)
    if e.is_Integer:
        return torch.tensor(int(e)), ()
    if isinstance(e, sp.Indexed):
        t, axes = _indexed(e, s)
        if t.is_floating_point():
            raise InterpretError(f"subscript '{e}' is a float tensor entry")
        return t, axes
    if isinstance(e, sp.Symbol) and e in s.sizes:
        return torch.tensor(s.sizes[e]), ()
    if isinstance(e, sp.Symbol) and isinstance(s.params.get(e), int):  # x[S*t + k - P]
        return torch.tensor(s.params[e]), ()
    if isinstance(e, (sp.Add, sp.Mul)):
        return _arithmetic(e, [_index_value(a, s) for a in e.args])
    if isinstance(e, sp.Pow) and e.exp.is_Integer and e.exp >= 0:  # x[t + pad**2]
        base, axes = _index_value(e.base, s)
        return base ** int(e.exp), axes
    raise InterpretError(f"cannot use '{e}' as a subscript")


def _condition(e: sp.Expr, s: _Scope) -> Value:
    compare = COMPARE.get(type(e).__name__)
    if compare is None:
        raise InterpretError(f"cannot evaluate the condition '{e}'")
    ints = {p: v for p, v in s.params.items() if isinstance(v, int)}  # t + P >= 0: indices
    e = e.func(*(x.xreplace(ints) for x in e.args), evaluate=False) if ints else e
    if all(_subscript_like(x) and not _reads_floats(x, s) for x in e.args):  # indices, int data
        (a, b), axes = _align([_index_value(x, s) for x in e.args])
        return compare(a, b), axes
    # float values (x[n] > threshold, alpha <= 0.5, sign(x[n]) >= 0, integer-valued but of
    # float data): a step in the data, with a kink at a = b
    (a, b), axes = _align([value(x, s) for x in e.args])
    s.kink(a - b)
    return compare(a, b), axes


def _subscript_like(e: sp.Expr) -> bool:
    """An integer that a subscript could be: indices, sizes, int params, integers and int
    data, added and multiplied (not sign(i - j), integer-valued but a function's value)."""
    if e.is_Integer or isinstance(e, sp.Symbol):
        return bool(e.is_integer)
    if isinstance(e, sp.Indexed):
        return bool(e.base.is_integer)
    return isinstance(e, (sp.Add, sp.Mul)) and all(map(_subscript_like, e.args))


def _reads_floats(e: sp.Expr, s: _Scope) -> bool:
    """Whether ``e`` reads float data: a float tensor's entry or a 0-d float tensor."""
    if any(not i.base.is_integer for i in e.atoms(sp.Indexed)):
        return True
    return any(not x.is_integer and x.name in s.values for x in e.free_symbols)


def _indexed(e: sp.Indexed, s: _Scope) -> Value:
    name = e.base.label.name
    if name not in s.values:
        raise InterpretError(f"tensor '{name}' is used before it is defined")
    data = s.values[name]
    if data.dim() != len(e.indices):
        raise InterpretError(f"{e}: {len(e.indices)} subscripts for a {data.dim()}-d tensor")
    if not e.indices:
        return data, ()
    subs, axes = _align([_index_value(i, s) for i in e.indices])
    inside = True  # an affine subscript outside its axis reads 0 (zero padding)
    for k, i in enumerate(e.indices):
        if isinstance(i, (sp.Add, sp.Mul)) and not i.has(sp.Indexed):
            inside = inside & (subs[k] >= 0) & (subs[k] < data.shape[k])
            subs[k] = subs[k].clamp(0, data.shape[k] - 1)
        elif i.has(sp.Indexed):  # int data outside the axis (an ignored -100) stands only in a
            # branch a where() discards: read as any entry, as torch wraps a -1
            subs[k] = subs[k].clamp(-data.shape[k], data.shape[k] - 1)
    picked = data[tuple(subs)]
    if inside is not True:
        picked = torch.where(inside, picked, torch.zeros((), dtype=picked.dtype))
    return picked, axes


def _reduce(e: sp.Expr, s: _Scope) -> Value:
    """Sum / Max over fresh axes: each bound index is renamed first, so nesting cannot clash."""
    renames, lengths = {}, {}
    for var, lo, hi in e.limits:
        s.fresh += 1
        new = sp.Dummy(f"{var}_{s.fresh}", integer=True)
        start = s.integer(lo)
        s.ranges[new] = (start, s.integer(hi) - start + 1)
        renames[var], lengths[new] = new, s.ranges[new][1]
    t, axes = value(e.function.xreplace(renames), s)
    if not isinstance(e, sp.Sum):
        return _maximum(t, axes, [new for new in lengths if new in axes], s)
    for new, length in lengths.items():
        if new in axes:
            dim = axes.index(new)
            t = t.sum(dim)
            axes = axes[:dim] + axes[dim + 1 :]
        else:  # Sum_i f = length * f when f does not depend on i
            t = t * length
    return t, axes


def _maximum(t: torch.Tensor, axes: list, over: list, s: _Scope) -> Value:
    """Max over the axes ``over`` at once (f unchanged along an index it does not read): a
    tie of the top two entries of a whole window is a kink, not one along each axis alone."""
    if not over:
        return t, axes
    dims = [axes.index(v) for v in over]
    kept = [a for a in axes if a not in over]
    flat = t.permute([axes.index(a) for a in kept] + dims).flatten(len(kept))
    if flat.shape[-1] > 1:  # a tie for the max has no single derivative
        top2 = flat.detach().topk(2, -1).values
        s.kink(top2[..., 0] - top2[..., 1])
    return flat.amax(-1), type(axes)(kept)


def _function(e: sp.Expr, s: _Scope) -> Value:
    name = type(e).__name__
    if name in VARIADIC and isinstance(e, (sp.Max, sp.Min)):
        parts, axes = _align([value(a, s) for a in e.args])
        acc = parts[0]
        for p in parts[1:]:
            s.kink(acc - p)
            acc = VARIADIC[name](acc, p)
        return acc, axes
    if name in UNARY and len(e.args) == 1:
        t, axes = value(e.args[0], s)
        if name in KINKED:
            s.kink(t)
        return UNARY[name](t), axes
    raise InterpretError(f"the reference interpreter does not know '{e.func}' (in '{e}')")


def _pow(e: sp.Pow, s: _Scope) -> Value:
    if e.exp.is_Integer and int(e.exp) in (1, 2, 3) and not e.base.is_number:
        t, axes = value(e.base, s)
        return math.prod([t] * int(e.exp)), axes
    (b, ex), axes = _align([value(e.base, s), value(e.exp, s)])
    return torch.pow(b, ex), axes


def value(e: sp.Expr, s: _Scope) -> Value:
    """Evaluate an expression to a float tensor with one axis per index it depends on."""
    if e.is_Number or isinstance(e, sp.NumberSymbol):  # 2, 1/2, 0.5, pi, E
        return s.scalar(float(e))  # functions of numbers (sigmoid(pi)) go through torch below
    if isinstance(e, sp.Symbol):
        if e in s.sizes:
            return s.scalar(s.sizes[e])
        if e in s.params:
            return s.scalar(s.params[e])
        if e in s.ranges:
            t, axes = _index_value(e, s)
            return t.to(s.dtype), axes
        if not e.is_integer and e.name in s.values and not s.graph.tensors[e.name].dims:
            return s.values[e.name], ()  # a 0-d tensor, read whole
        raise InterpretError(f"unknown symbol '{e}'")
    if isinstance(e, sp.Indexed):
        t, axes = _indexed(e, s)
        return t.to(s.dtype), axes
    if isinstance(e, (sp.Sum, ReduceMax)):
        return _reduce(e, s)
    if isinstance(e, (sp.Add, sp.Mul)):
        return _arithmetic(e, [value(a, s) for a in e.args])
    if isinstance(e, sp.Pow):
        return _pow(e, s)
    if isinstance(e, sp.KroneckerDelta):
        (a, b), axes = _align([_index_value(x, s) for x in e.args])
        return (a == b).to(s.dtype), axes
    if isinstance(e, sp.Function) and type(e).__name__ == "where":
        (cond, a, b), axes = _align(
            [_condition(e.args[0], s), value(e.args[1], s), value(e.args[2], s)]
        )
        return torch.where(cond, a, b), axes
    if isinstance(e, (sp.Function, sp.Max, sp.Min)):
        return _function(e, s)
    raise InterpretError(f"the reference interpreter does not know '{type(e).__name__}': {e}")


def evaluate(
    graph: Graph,
    inputs: dict[str, torch.Tensor],
    kinks: list[float] | None = None,
    track: bool = False,
) -> dict[str, torch.Tensor]:
    """Every input and definition's value, in float (the float inputs' dtype), by brute force.

    ``kinks``, if given, collects how far each non-differentiable point was from being hit: the
    smallest |x| under abs/sign/relu, |a - b| under maximum/minimum, the top-2 gap under Max.
    ``track``: every definition's value is part of autograd's graph, a constant one too
    (``W = where(c, pi, 0)`` reads no float input), so that its adjoint can be taken.
    """
    floats = [inputs[n] for n in graph.inputs if not graph.tensors[n].integer]
    dtype = floats[0].dtype if floats else torch.float64
    sizes, values, batch_shape = bind_inputs(graph, inputs)
    for step in graph.steps:
        try:
            values[step.name] = _step(_Scope(graph, sizes, values, dtype, kinks), step)
        except InterpretError as exc:
            raise InterpretError(f"op '{graph.op.name}', definition `{step.text}`: {exc}") from None
        value = values[step.name]
        if track and value.is_floating_point() and not value.requires_grad:
            values[step.name] = value.detach().requires_grad_()
    out = dict(values)
    for name, spec in graph.tensors.items():
        if spec.batched and name in out and name not in graph.inputs:
            out[name] = out[name].reshape(batch_shape + tuple(out[name].shape[1:]))
        elif name in graph.inputs:
            out[name] = inputs[name]
    return out


def _step(s: _Scope, step: Definition | View) -> torch.Tensor:
    graph, values = s.graph, s.values
    if isinstance(step, View):
        shape = tuple(s.integer(d) for d in graph.tensors[step.name].dims)
        return values[step.source].reshape(shape)
    assert isinstance(step, Definition)
    dims = [s.integer(d) for d in graph.tensors[step.name].dims]
    for index, length in zip(step.indices, dims):
        s.ranges[index] = (0, length)
    t, axes = value(step.body, s)
    missing = [i for i in step.indices if i not in axes]
    if set(axes) - set(step.indices):
        raise InterpretError(f"indices {set(axes) - set(step.indices)} are neither free nor bound")
    t = t.reshape(tuple(t.shape) + (1,) * len(missing))
    axes = axes + tuple(missing)
    t = t.permute([axes.index(i) for i in step.indices]) if step.indices else t
    return t.expand(tuple(dims)).to(s.dtype)


def autograd_reference(
    graph: Graph,
    inputs: dict[str, torch.Tensor],
    grad_out: torch.Tensor,
    intermediates: bool = False,
) -> dict[str, torch.Tensor]:
    """d(output . grad_out)/d(input) for every float input, by torch.autograd through evaluate.

    With ``intermediates``, also the gradient of every definition that is not batched (what a
    stepwise module's ``backward_all`` returns), the output's own being ``grad_out``.
    """
    leaves = {
        n: t.detach().clone().requires_grad_(not graph.tensors[n].integer)
        for n, t in inputs.items()
    }
    # with intermediates, a constant definition's adjoint is wanted too (fuzz 701525: a mask
    # W = where(.., pi, 0) that no float input reaches made autograd refuse the whole reference)
    values = evaluate(graph, leaves, track=intermediates)
    out = values[graph.output]
    wanted = [n for n in graph.inputs if not graph.tensors[n].integer]
    if intermediates:
        wanted += [s.name for s in graph.steps if not graph.tensors[s.name].batched]
    if not wanted:
        return {}
    if not out.requires_grad:  # reached through steps alone (Sum(where(z >= 0, 3, 0))): all 0
        return {n: torch.zeros_like(values[n]) for n in wanted}
    grads = torch.autograd.grad(
        out, [values[n] for n in wanted], grad_out.reshape(out.shape), allow_unused=True
    )
    return {
        n: torch.zeros_like(values[n]) if g is None else g
        for n, g in zip(wanted, grads, strict=True)
    }
