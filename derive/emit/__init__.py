"""Stage 4, emission: a :class:`~derive.symbolic.derivation.Derivation` in, one black-formatted
module out (``derive/templates/op_module.py.jinja``), written to ``generated/`` only when it
changed.

- :mod:`~derive.emit.checks`: the input checks a generated forward runs;
- :mod:`~derive.emit.module`: the module's data (every line lowered in Python) and its render;
- :mod:`~derive.emit.generate`: loading op files, the writer (only files it generated itself).
"""
