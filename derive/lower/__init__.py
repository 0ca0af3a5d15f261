"""Stage 3, lowering: SymPy index expressions in, kernel-IR statements (:mod:`derive.ir`) out,
printed as vectorized torch.

- :mod:`~derive.lower.value`: the pure helpers that align, permute and combine IR nodes;
- :mod:`~derive.lower.memo`: each computed tensor remembered under a key free of its index names,
  so the same reduction met again is read, not computed twice;
- :mod:`~derive.lower.context`: the state of one function's lowering, changed only through its
  methods (emit a statement, take a name, learn a range, remember a tensor);
- :mod:`~derive.lower.lowerer`: the :class:`~derive.lower.lowerer.Lowerer`, one per generated
  function: the table of rules by expression class, and the entry points emission calls;
- :mod:`~derive.lower.assign`: one assignment's statements (stacks, scatters, one-hot updates);
- :mod:`~derive.lower.arithmetic`: element-wise arithmetic and the function registry's calls;
- :mod:`~derive.lower.reductions`: sums, matmuls and einsums;
- :mod:`~derive.lower.indexing`: gathers and masks;
- :mod:`~derive.lower.fusions`: where two kernels can be one (addmm, addcmul, mean, ...);
- :mod:`~derive.lower.select`: where(), index comparisons and constant subscripts.
"""
