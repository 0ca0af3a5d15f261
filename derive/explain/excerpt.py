"""The torch statements a generated module runs for one gradient, from the statements emission
recorded (:class:`~derive.emit.statements.Statement`), formatted as the module formats them.

For a variable such as ``dlogits`` the excerpt is every statement of the backward that writes
it (``dlogits = ...``, ``dlogits[...] -= ...``, ``dC.index_add_(...)``) plus, before them, the
temporaries those statements read (``sum_grad_out = grad_out.sum(0)``), transitively. Other
gradients, saved tensors, sizes and ``grad_out`` are inputs of the excerpt, not part of it.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterable

import black

from derive.emit.statements import Statement

# The backward's statements stand one level deep in the module, which black wraps at 100
# columns: formatted as the bodies of functions at 100, each breaks where it breaks there.
MODE = black.Mode(line_length=100)
BODY = re.compile(r"^def _excerpt_\d+\(\):\n", re.MULTILINE)


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
    opaque, codes = set(opaque), {}
    for var in variables:
        picked = _picked(statements, var, opaque)
        if picked:
            codes[var] = "\n".join(statements[i].code for i in picked)
    return dict(zip(codes, _formatted(list(codes.values())), strict=True))


def _formatted(codes: list[str]) -> list[str]:
    """Each block of statements as black lays it out one level deep, all in one call (black's
    start-up per call costs more than the formatting of a few lines)."""
    source = "".join(
        f"def _excerpt_{i}():\n{textwrap.indent(code, '    ')}\n" for i, code in enumerate(codes)
    )
    bodies = BODY.split(black.format_str(source, mode=MODE))[1:]
    return [textwrap.dedent(body).strip("\n") for body in bodies]
