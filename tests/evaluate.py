"""A naive interpreter for index expressions: loops over every index, no vectorisation.

It shares nothing with the lowering, so it judges the simplifier independently: the raw adjoint
(chain rule, deltas and all) and the simplified one must give the same numbers.
"""

from __future__ import annotations

import itertools
import math
import random

import sympy as sp

from derive.language import Definition, Graph, ReduceMax
from derive.language.argmax import encode
from derive.symbolic.derivation import derive

FUNCS = {sp.exp: math.exp, sp.log: math.log, sp.tanh: math.tanh}


def value(e: sp.Expr, env: dict, data: dict) -> float:
    if e.is_Number:
        return float(e)
    if isinstance(e, sp.Symbol):
        return data[e.name] if e.name in data else env[e]
    if isinstance(e, sp.Indexed):
        idx = tuple(int(value(i, env, data)) for i in e.indices)
        return data[e.base.label.name][idx]
    if isinstance(e, sp.KroneckerDelta):
        a, b = (value(x, env, data) for x in e.args)
        return 1.0 if a == b else 0.0
    if isinstance(e, (sp.Sum, ReduceMax)):
        ranges = [
            range(int(value(lo, env, data)), int(value(hi, env, data)) + 1)
            for _, lo, hi in e.limits
        ]
        vals = [
            value(e.function, {**env, **dict(zip([lim[0] for lim in e.limits], combo))}, data)
            for combo in itertools.product(*ranges)
        ]
        return sum(vals) if isinstance(e, sp.Sum) else max(vals)
    if isinstance(e, sp.Add):
        return sum(value(a, env, data) for a in e.args)
    if isinstance(e, sp.Mul):
        # deltas first, and stop at a zero factor: the raw chain is mostly deltas that are 0
        product = 1.0
        for a in sorted(e.args, key=lambda f: not isinstance(f, sp.KroneckerDelta)):
            product *= value(a, env, data)
            if product == 0.0:
                return 0.0
        return product
    if isinstance(e, sp.floor):  # a digit of an argmax over several indices
        return float(math.floor(value(e.args[0], env, data)))
    if isinstance(e, sp.Mod):
        return float(int(value(e.args[0], env, data)) % int(value(e.args[1], env, data)))
    if isinstance(e, sp.Pow):
        return value(e.base, env, data) ** value(e.exp, env, data)
    return FUNCS[e.func](value(e.args[0], env, data))


def _argmax(step: Definition, idx: tuple, data: dict) -> int:
    """The argmax of ``step``'s Max at ``idx``, encoded (derive.language.argmax): the first
    maximum in row-major order over its indices, as torch's max and max_pool2d pick."""
    body, env = step.body, dict(zip(step.indices, idx))
    ranges = [
        range(int(value(lo, env, data)), int(value(hi, env, data)) + 1) for _, lo, hi in body.limits
    ]
    bound = [lim[0] for lim in body.limits]
    best = max(
        itertools.product(*ranges),
        key=lambda combo: value(body.function, {**env, **dict(zip(bound, combo))}, data),
    )
    offsets = tuple(c - r.start for c, r in zip(best, ranges))
    return int(value(encode(body, offsets), env, data))


def _tensor(g: Graph, dims, fill, data) -> dict:
    shape = [int(value(d, {}, data)) for d in dims]
    return {idx: fill(idx) for idx in itertools.product(*[range(s) for s in shape])}


def agree(g: Graph, sizes: int, seed: int, tol: float = 1e-9) -> bool:
    rng = random.Random(seed)
    data: dict = {s.name: sizes for s in g.sizes} | {p.name: v for p, v in g.params.items()}
    d = derive(g)
    for name in g.inputs:
        t = g.tensors[name]
        data[name] = _tensor(
            g, t.dims, lambda _: rng.randrange(sizes) if t.integer else rng.uniform(-1, 1), data
        )
    for step in g.steps:
        assert isinstance(step, Definition)
        t = g.tensors[step.name]
        data[step.name] = _tensor(
            g, t.dims, lambda idx, s=step: value(s.body, dict(zip(s.indices, idx)), data), data
        )
        if step.name in d.adjoints.argmax:
            data[d.adjoints.argmax[step.name].name] = _tensor(
                g, t.dims, lambda idx, s=step: _argmax(s, idx, data), data
            )
    grad = d.adjoints.names[g.output]
    data[grad] = _tensor(g, g.tensors[g.output].dims, lambda _: rng.uniform(-1, 1), data)
    if not g.tensors[g.output].dims:
        data[grad] = data[grad][()]
    for t in d.order:
        free = d.adjoints.free[t]
        for idx in itertools.product(*[range(sizes)] * len(free)):
            env = dict(zip(free, idx))
            raw, final = value(d.raw[t], env, data), value(d.final[t], env, data)
            if abs(raw - final) > tol * max(1.0, abs(raw)):
                raise AssertionError(f"{g.op.name}: d{t}{idx}: raw {raw} != simplified {final}")
    return True
