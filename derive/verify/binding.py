"""The reference interpreter's first step: sizes bound from the shapes of the inputs given.

In: a parsed :class:`~derive.language.Graph` and concrete input tensors; out: an int per size
symbol and the inputs as the interpreter reads them (batched ones flattened). Like the rest of
:mod:`derive.verify.reference` it reads only the graph, never the generated code or its checks.
"""

from __future__ import annotations

import sympy as sp
import torch

from derive.language import BATCH_SIZE, Graph


class InterpretError(ValueError):
    """A node or input the reference interpreter cannot evaluate; names the op and definition."""


def bind_inputs(graph: Graph, inputs: dict[str, torch.Tensor]) -> tuple[dict, dict, tuple]:
    """``(sizes, values, batch_shape)``: batched inputs flattened to one Batch axis, each size
    symbol bound from the first dimension that is it, a size in a product (M of ``x[N, 3*M]``)
    from the rest of it, derived sizes (``D = C / n_head``) computed, and every dimension
    checked against the shapes given."""
    sizes: dict[sp.Symbol, int] = {}
    values: dict[str, torch.Tensor] = {}
    batch_shape: tuple = ()
    for name in graph.inputs:
        t, spec = inputs[name], graph.tensors[name]
        dims = spec.dims[1:] if spec.batched else spec.dims
        if spec.batched:
            lead = t.dim() - len(dims)
            if lead < 0:
                raise InterpretError(f"input '{name}' has too few dimensions: {tuple(t.shape)}")
            batch_shape = tuple(t.shape[:lead])
            t = t.reshape((-1,) + tuple(t.shape[lead:]))
            sizes.setdefault(BATCH_SIZE, t.shape[0])
        elif t.dim() != len(dims):
            raise InterpretError(f"input '{name}' must have {len(dims)} dims, got {tuple(t.shape)}")
        for d, n in zip(dims, t.shape[-len(dims) :] if dims else ()):
            if isinstance(d, sp.Symbol):
                sizes.setdefault(d, int(n))
        values[name] = t
    ints = {p: x for p, x in graph.params.items() if isinstance(x, int)}
    for size, expr in graph.derived.items():  # H = n_head first: it gives D of x[N, H*D]
        v = sp.sympify(expr).subs(sizes).subs(ints)
        if v.is_Integer and v > 0:  # others are refused in their own words below
            sizes[size] = int(v)
    for name in graph.inputs:  # M of x[N, 3*M]: the dimension over the rest of the product
        spec, t = graph.tensors[name], values[name]
        for pos, d in enumerate(spec.dims):
            unknown = [x for x in sp.sympify(d).free_symbols if x not in sizes]
            if len(unknown) == 1 and (d / unknown[0]).subs(sizes).is_Integer:
                rest = int((d / unknown[0]).subs(sizes))
                if rest > 0 and t.shape[pos] % rest == 0:
                    sizes[unknown[0]] = t.shape[pos] // rest
    for size, expr in graph.derived.items():  # D = C / n_head
        ints = {p: x for p, x in graph.params.items() if isinstance(x, int)}
        v = sp.sympify(expr).subs(sizes).subs(ints)
        if not v.is_Integer or v <= 0:
            raise InterpretError(f"size {size} = {expr} is {v}, not a positive integer")
        sizes[size] = int(v)
    for name in graph.inputs:  # every dimension, products (T*E) too, must agree
        spec, t = graph.tensors[name], values[name]
        for pos, d in enumerate(spec.dims):
            want = sp.sympify(d).subs(sizes)
            if not want.is_Integer or int(want) != t.shape[pos]:
                raise InterpretError(f"input '{name}' dimension {pos} is {t.shape[pos]}, not {d}")
    return sizes, values, batch_shape
