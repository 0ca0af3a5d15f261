"""Checking a generated module against an independent interpreter of the op language.

- :mod:`~derive.verify.reference`: a naive torch interpreter (one axis per index) that shares no
  code with lowering or emission, differentiated by autograd for the reference gradients;
  :mod:`~derive.verify.reference_functions` its own function table, and
  :mod:`~derive.verify.binding` its sizes, bound from the shapes of the inputs given;
- :mod:`~derive.verify.check`: ``python -m derive check``: the module against the reference,
  finite differences and ``gradcheck``, one line naming the op on a disagreement.
"""
