"""The kernel IR, between index expressions and torch code.

- :mod:`~derive.ir.nodes`: what a lowered tensor is, as data (its axes, the operation that
  makes it, its operands) and the statements that bind or update tensors, each knowing what
  it writes and reads;
- the passes that rewrite a function's statements: :mod:`~derive.ir.sharing` (a tensor
  computed twice is computed once), :mod:`~derive.ir.passes` (sibling contractions merged and
  stacked, contractions as matmuls and addmms, ``del`` after last reads),
  :mod:`~derive.ir.slices` (element-wise siblings over slices as one), :mod:`~derive.ir.fused`
  (a softmax or log-softmax written out as its torch kernel), :mod:`~derive.ir.layout`
  (permuted views stored contiguous where matmuls would copy them), :mod:`~derive.ir.keepdim`
  (reductions read back over their axes keep them), with :mod:`~derive.ir.rewrite`'s tools;
- :mod:`~derive.ir.printer`: the nodes printed as torch, ``_print_<Node>`` per class.

:mod:`derive.lower` builds these nodes from SymPy index expressions; emission prints them.
"""
