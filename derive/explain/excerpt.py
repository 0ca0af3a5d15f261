"""The torch statements a generated module runs for one gradient, from the statements emission
recorded (:class:`~derive.emit.statements.Statement`), formatted as the module formats them.

For a variable such as ``dlogits`` the excerpt is every statement of the backward that writes
it (``dlogits = ...``, ``dlogits[...] -= ...``, ``dC.index_add_(...)``) plus, before them, the
temporaries those statements read (``sum_grad_out = grad_out.sum(0)``), transitively. Other
gradients, saved tensors, sizes and ``grad_out`` are inputs of the excerpt, not part of it.
"""

from __future__ import annotations

from collections.abc import Iterable

import black

from derive.emit.statements import Statement

# The backward's statements stand one level deep in the module, which black wraps at 100
# columns: formatted alone at 96, each breaks exactly where it breaks in the module.
MODE = black.Mode(line_length=96)


def _picked(statements: list[Statement], var: str, opaque: set[str]) -> list[int]:
    picked = {i for i, s in enumerate(statements) if var in s.writes}
    todo = sorted(picked)
    while todo:
        i = todo.pop()
        for name in sorted(statements[i].reads - opaque - {var}):
            found = [j for j in range(i) if name in statements[j].writes and j not in picked]
            picked.update(found)
            todo.extend(found)
    return sorted(picked)


def excerpts(
    statements: list[Statement], variables: Iterable[str], opaque: Iterable[str]
) -> dict[str, str]:
    """``{variable: its statements}`` for each variable the backward writes.

    ``opaque`` names are never followed into (sizes, params, grad_out, other gradients).
    """
    opaque, out = set(opaque), {}
    for var in variables:
        picked = _picked(statements, var, opaque)
        if picked:
            code = "\n".join(statements[i].code for i in picked)
            out[var] = black.format_str(code, mode=MODE).rstrip("\n")
    return out
