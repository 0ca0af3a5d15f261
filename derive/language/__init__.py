"""The op language: how a forward op is written, element by element, in SymPy index notation.

An op is a small graph of named definitions. Everything a definition may use:

Inputs (``inputs=[...]``), one string each::

    "x[N, D]"            a float tensor; N, D are size symbols (any capitalised name)
    "targets[N]: int64"  an integer tensor: usable as a data-dependent index, never differentiated
    "idx[...]: int64"    ``...`` stands for any number of leading batch dimensions; the generated
                         module flattens them into one axis (size ``Batch``, index ``batch``)

Params (``params={"eps": 1e-5}``): python scalars passed to ``forward`` by keyword.

Definitions (``definitions=[...]``), one string each, in forward order; the last is the output::

    "out[n, m] = Sum(x[n, k] * W[k, m], k) + b[m]"   element-wise, with a contraction
    "loss = -Sum(logprobs[n, targets[n]], n) / N"     scalar; ``targets[n]`` is a data index
    "emb[n, t, e] = C[X[n, t], e]"                   gather through an integer tensor
    "maxes[n] = Max(logits[n, c], c)"                reduce-max over c (must be the whole RHS)
    "embcat = view(emb, N, T*E)"                     structural: same data, another shape

- Lower-case names that are not tensors, sizes or params are *indices*. An index on the left is
  an output axis; an index on the right must be on the left or bound by ``Sum``/``Max``. Its
  range is read off the tensor dimension it indexes.
- Functions: the rows of :data:`derive.functions.FUNCTIONS` (exp, log, sqrt, tanh, sigmoid,
  softplus, relu, erf, ..., ``maximum(a, b)``), plus + - * / and ``**``; constants ``pi`` and
  ``e`` (``e`` is an index where a definition subscripts with it). Any other name is refused.
- Sizes stay symbolic; ``N - 1`` is fine (Bessel's correction in batchnorm is written that way).

Parsing turns these strings into a :class:`Graph` of SymPy expressions; any problem raises a
:class:`~derive.errors.DerivationError` that names the op and the definition.

The package: :mod:`~derive.language.graph` holds the parsed form (:class:`Op` in, :class:`Graph`
out), :mod:`~derive.language.parse` reads the strings, :mod:`~derive.language.reductions` gives
``Sum``/``Max`` their ranges and lifts a ``Max`` out of an expression.
"""

from derive.language.graph import (
    BATCH_INDEX,
    BATCH_SIZE,
    Definition,
    Graph,
    Op,
    ReduceMax,
    Tensor,
    View,
)
from derive.language.parse import parse

__all__ = [
    "BATCH_INDEX",
    "BATCH_SIZE",
    "Definition",
    "Graph",
    "Op",
    "ReduceMax",
    "Tensor",
    "View",
    "parse",
]
