"""The dtype an op runs in under ``torch.autocast``, derived from its definitions.

torch's own ops each carry a policy (its autocast op lists): contractions (``F.linear``,
``matmul``) run in the low precision, reductions, normalisations and losses (``softmax``,
``layer_norm``, ``cross_entropy``, ``sum``) in float32, and the rest (``tanh``,
``embedding``) in the dtype of their inputs. A generated op gets the same, by a rule on its
reductions:

- every reduction a contraction (a Sum whose terms each multiply two or more float tensors
  and that keeps an index: ``Sum(x[n, k] * W[k, m], k)``; a square, ``Sum(x[n, c]**2, c)``,
  is a norm, and a weighted sum to one number a loss, not one), and at least one: ``lower``
  (the autocast dtype);
- any other reduction (a mean ``Sum(x[n, c], c) / C``, a softmax's normaliser, a Max, a
  loss's sum): ``float32``, as CUDA's lists hold layer_norm, softmax and the losses on every
  device (CPU's lists leave softmax and layer_norm in bfloat16; backgen keeps range);
- no reduction (element-wise, gathers): ``input``, the inputs' own dtype.

The rule reads the definitions as the op wrote them: a call lifted into a definition of its
own for the backward (``softplus(x)`` of a weighted BCE) is no operand of a contraction.

Outside autocast, float inputs of mixed dtypes are promoted to their common dtype
(``torch.promote_types``), as torch's element-wise ops promote.
"""

from __future__ import annotations

import sympy as sp

from derive.language import Definition, Graph, ReduceMax
from derive.symbolic.indices import free_indices

LOWER, FLOAT32, INPUT = "lower", "float32", "input"


def _float_reads(term: sp.Expr, g: Graph) -> int:
    """How many factors of ``term`` are reads of float tensors. A power of one read counts
    once: ``Sum(x[n, c]**2, c)`` is a norm (torch's autocast runs ``norm``, ``mse_loss`` and
    ``cosine_similarity`` in float32), not a product of two operands as a matmul is."""
    count = 0
    for factor in sp.Mul.make_args(term):
        base, exp = factor.as_base_exp()
        if isinstance(base, sp.Indexed) and not g.tensors[base.base.label.name].integer:
            count += 1 if exp.is_Integer and exp > 0 else 0
        elif isinstance(base, sp.Symbol) and base.name in g.tensors and not base.is_integer:
            count += 1 if exp.is_Integer and exp > 0 else 0
        elif not factor.is_number and not factor.free_symbols <= set(g.sizes) | set(g.params):
            return 0  # a function, a mask, a quotient: not a product of reads
    return count


def _contraction(s: sp.Sum, g: Graph) -> bool:
    """A matrix product: a sum of products of two float reads or more that keeps an index.
    Summed to one number, ``Sum(w[c] * l[n, c], n, c)``, it is a loss's weighted sum (torch
    lists ``dot`` in neither list, and ``sum`` in float32's)."""
    if not free_indices(s):
        return False
    return all(_float_reads(t, g) >= 2 for t in sp.Add.make_args(sp.expand(s.function)))


def autocast_policy(g: Graph) -> str:
    """``lower``, ``float32`` or ``input`` for the op of ``g`` (see the module docstring)."""
    sums = [s for step in g.steps if isinstance(step, Definition) for s in step.body.atoms(sp.Sum)]
    maxes = any(step.body.has(ReduceMax) for step in g.steps if isinstance(step, Definition))
    if not sums and not maxes:
        return INPUT
    if not maxes and all(_contraction(s, g) for s in sums):
        return LOWER
    return FLOAT32
