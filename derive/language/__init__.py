"""The op language: how a forward op is written, element by element, in SymPy index notation.

An op is a small graph of named definitions. Everything a definition may use:

Inputs (``inputs=[...]``), one string each::

    "x[N, D]"            a float tensor; N, D are size symbols (any capitalised name)
    "targets[N]: int64"  an integer tensor: usable as a data-dependent index, never differentiated
    "idx[...]: int64"    ``...`` stands for any number of leading batch dimensions; the generated
                         module flattens them into one axis (size ``Batch``, index ``batch``)

Params (``params={"eps": 1e-5}``): python scalars passed to ``forward`` by keyword; a default
may name a param declared before it (``{"kernel_size": 2, "stride": "kernel_size"}``).

Derived sizes (``sizes={"H": "n_head", "D": "C / n_head"}``): a size computed from the inputs'
sizes and int params, multiplied or divided (or added, with integers and ``//``: below); the
generated forward checks that it is a positive whole number (``C = 10 is not divisible by
n_head = 3``). A dimension may carry a number:
``"Wqkv[C, 3*C]"``, ``view(Wqkv, C, 3, H, D)``. A derived size may also name an input's
dimension (``"w[O, CG, K]"`` with ``"CG": "C / groups"``): the forward checks the two agree.

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

- A constant subscript picks a slice of an axis: ``q[b, h, t, d] = Sum(x[b, t, c] *
  Wh[c, 0, h, d], c)`` reads the first of the three blocks of ``Wh = view(Wqkv, C, 3, H, D)``;
  on an axis of run-time length ``h[b, 0, c]`` is the first token and ``h[b, T - 1, c]`` the
  last (the forward checks T is long enough).
  ``view`` of an *input* works in every op (the input's gradient is the view's, reshaped), as
  does the output as a view of an intermediate (``out = view(outg, N, O, L)``: a grouped
  convolution's); a view of an intermediate that a later definition reads needs
  ``stepwise=True``.
- A 0-d tensor (an input declared without brackets, ``"temperature"``, or a definition
  without indices, ``"mean = Sum(x[n], n) / N"``) is read whole, by its name, in any later
  definition; never as a subscript or an index. An int64 input needs an axis.
- ``where(c, a, b)``: a where the comparison c holds, else b. c compares indices (``t2 <= t1``),
  int64 data (``t[n] >= 0``, ``c != t[n]``: every class but the target) or float values
  (``x[n] > threshold``: a step; ``y[n] == 1``) with one of ``== != < <= > >=``, as values
  (:mod:`~derive.language.conditions`); a chained comparison and ``and``/``or``/``not`` are
  refused (nest where() instead). ``-inf``
  (``inf``) may be a branch and nowhere else. An int input used as a subscript only under a
  guard, ``where(t[n] >= 0, ..t[n].., b)`` or ``where(t[n] != -1, ..t[n].., b)``, may hold
  what the guard ignores (any negative entry; exactly -1), cross-entropy's ignore_index: it
  is read clamped there, and checked for nothing else (:mod:`~derive.language.guards`).

  Why a comparison, for the causal mask, rather than a mask input or a reduction over a
  bounded range ``Sum(e, (t2, 0, t1))``: the mask is a fact about indices, so it belongs in
  the definition, not in a tensor the caller must build and pass right; and a comparison
  keeps every Sum over a whole axis, so the simplifier's rules (delta elimination assumes an
  index is in its range by construction, alpha-equal sums merge) stay true unchanged, where a
  triangular range would need each rule to reason about bounds. ``where(t2 <= t1, s, -inf)``
  is what the softmax needs (exp(-inf) = 0, the row's Max skips it); SymPy differentiates it
  (d/ds = where(t2 <= t1, 1, 0)), and the simplifier drops that factor beside the softmax of
  the masked scores, which is 0 there already.

- Affine subscripts (issue 25): an index plus or minus integers, sizes, int params or other
  indices, each index times an integer or an int param (``x[n, c, S*t + D*k - P]``). A read
  outside the tensor's axis is 0 (zero padding, as a convolution's): ``x[n, t - 1]`` is 0 at
  t = 0. An index that subscripts no tensor as a plain index (an output axis of a convolution,
  a pooled axis, the t of a cumulative sum) has its range declared once, in the op, as a size:
  ``ranges={"t": "L"}``; it applies to every definition, a tensor it subscripts plainly
  must agree, and a key that is no definition's index is a misspelling (each else one line).
  A derived size may add and floor-divide
  (``"L": "(T + 2*P - K) // S + 1"``); the forward checks it is positive, and that each window
  can run (:mod:`derive.emit.window_checks`: int params in subscripts, positive strides and
  dilations, no empty axis or kernel under an affine subscript). A convolution and an average
  pool::

    Op(name="conv1d", inputs=["x[N, C, T]", "w[O, C, K]", "b[O]"],
       params={"S": 2, "P": 1}, sizes={"L": "(T + 2*P - K) // S + 1"}, ranges={"t": "L"},
       definitions=["out[n, o, t] = Sum(x[n, c, S*t + k - P] * w[o, c, k], c, k) + b[o]"])
    Op(name="avg_pool1d", inputs=["x[N, C, T]"], params={"kernel": 3, "stride": 2},
       sizes={"K": "kernel", "L": "(T - kernel) // stride + 1"}, ranges={"k": "K", "t": "L"},
       definitions=["out[n, c, t] = Sum(x[n, c, stride*t + k], k) / K"])

  The adjoint of an affine read is a gather where a summed index solves the read (t = u - k +
  P: :mod:`derive.symbolic.inversion`), else a delta the lowering scatters (a stride that is
  a param, or > 1 on every index). A cumulative sum is a triangular sum,
  ``out[n, t] = Sum(where(s <= t, x[n, s], 0), s)`` with ``ranges={"t": "T"}``.

Parsing turns these strings into a :class:`Graph` of SymPy expressions; any problem raises a
:class:`~derive.errors.DerivationError` that names the op and the definition.

The package: :mod:`~derive.language.graph` holds the parsed form (:class:`Op` in, :class:`Graph`
out), :mod:`~derive.language.parse` reads the strings, :mod:`~derive.language.ranges` gives
``Sum``/``Max`` their ranges and lifts a ``Max`` out of an expression, :mod:`~derive.language.sizes`
reads derived sizes and keeps ``inf`` to where() branches, :mod:`~derive.language.affine` checks
affine subscripts and declared ranges, :mod:`~derive.language.text` checks the text before SymPy
reads it (a Python keyword as a name, an unbalanced parenthesis, a tensor's name as an index).
"""

import derive.sums  # noqa: F401  (SymPy's Sum.free_symbols memoised: see the module)
from derive.language.graph import (
    BATCH_INDEX,
    BATCH_SIZE,
    Definition,
    Graph,
    Op,
    ReduceMax,
    Tensor,
    View,
    tensor_reads,
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
    "tensor_reads",
]
