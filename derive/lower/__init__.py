"""Stage 3, lowering: SymPy index expressions in, vectorized torch statements out.

- :mod:`~derive.lower.value`: a lowered value (code and the indices labelling its axes) and the
  pure helpers that align, permute and combine values;
- :mod:`~derive.lower.memo`: each computed tensor remembered under a key free of its index names,
  so the same reduction met again is read, not computed twice;
- :mod:`~derive.lower.lowerer`: the :class:`~derive.lower.lowerer.Lowerer`, one per generated
  function, dispatching on the expression's class and collecting statements;
- :mod:`~derive.lower.reductions`: sums, matmuls and einsums;
- :mod:`~derive.lower.indexing`: gathers, masks and one-hot updates (``scatter_add_``,
  ``index_add_``);
- :mod:`~derive.lower.fusions`: where two kernels can be one (addmm, addcmul, mean, ...);
- :mod:`~derive.lower.select`: where(), index comparisons, constant subscripts and stacks.
"""
