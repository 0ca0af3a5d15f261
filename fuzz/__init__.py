"""backgen's differential fuzzer: random ops in the op language, derived, emitted and checked.

Each case is a seeded random :class:`~derive.language.Op` (``fuzz.ops``); its generated module's
forward and every float input's gradient are compared with the independent reference
interpreter (``derive.verify.reference``) differentiated by torch autograd (``fuzz.check``). A case
ends as one of

    passed    output and gradients agree (float64, relative 1e-10)
    refused   a DerivationError naming the op (the engine says it cannot do it)
    wrong     anything else: another exception, a wrong shape, a wrong number

Wrong cases are shrunk (``fuzz.shrink``) and written to ``tests/regressions/``. Run it with
``python -m fuzz -n 500 --seed 0`` (``make fuzz N=5000``).
"""
