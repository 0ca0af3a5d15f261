"""Stage 2, symbolic: a parsed :class:`~derive.language.Graph` in, a
:class:`~derive.symbolic.derivation.Derivation` out (every adjoint as a SymPy index expression,
simplified and folded onto the tensors the forward saves).

- :mod:`~derive.symbolic.indices`: index bookkeeping (fresh bound names, substitution, the
  readable renaming of bound indices);
- :mod:`~derive.symbolic.reverse`: reverse mode, ``dv[J] += sum_I du[I] * d f(I) / d v[J]``;
- :mod:`~derive.symbolic.simplify`: the Sum rules (one row each, identity beside it) and the
  engine that applies them; :mod:`~derive.symbolic.cost` the cost they minimise;
- :mod:`~derive.symbolic.canon`: canonical bodies (element-wise intermediates inlined), folding
  back onto saved tensors, and the forward's numerically stable rewrites;
- :mod:`~derive.symbolic.derivation`: the stage's entry point, :func:`derive`.
"""
