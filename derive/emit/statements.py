"""The generated module's statements as data: each statement's code and the names it writes
and reads, taken from the kernel-IR statement the lowering printed it from, or declared by the
emission code that wrote it (:class:`Code`), never read back off the text.

In: the lowered lines of one backward (:class:`~derive.ir.printer.Line`, each keeping its
:class:`~derive.ir.nodes.Statement`) and the lines emission writes itself (size bindings, the
checks' calls, the batch shape's reshapes: :class:`Code`); out: :class:`Statement` records,
which :mod:`derive.explain.excerpt` follows (a gradient's statements and the temporaries they
read), and the names a line reads (:func:`names_read`), from which emission decides which
size bindings and check helpers a module keeps.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from derive.ir.printer import Line


class Code(str):
    """A line emission writes itself, with what it writes and reads said by the code that
    builds it (``E = C.shape[1]`` writes E and reads C; ``_check_size(...)`` reads the helper,
    the tensor and the sizes it compares). ``binds``: the size or batch shape it binds by
    name, which a module drops when nothing reads it."""

    writes: frozenset[str]
    reads: frozenset[str]
    binds: str | None

    def __new__(
        cls, code: str, writes: Iterable[str] = (), reads: Iterable[str] = (), binds: bool = False
    ) -> Code:
        line = super().__new__(cls, code)
        line.writes, line.reads = frozenset(writes), frozenset(reads)
        line.binds = next(iter(line.writes)) if binds else None
        return line


@dataclass(frozen=True)
class Statement:
    code: str  # one python statement, as lowered (black formats it with the module)
    writes: frozenset[str]  # the variables it assigns or updates in place
    reads: frozenset[str]  # every variable it mentions (its targets too)


def statement(code: Line | Code) -> Statement:
    """``code`` (one statement) with what it writes and reads."""
    if isinstance(code, Line):
        s = code.statement
        return Statement(code.strip(), s.writes, s.reads | s.writes)
    return Statement(code.strip(), code.writes, code.reads | code.writes)


def names_read(code: Line | Code) -> frozenset[str]:
    """The variables (and the module's helpers) ``code`` reads."""
    if isinstance(code, Line):
        return code.statement.reads
    if isinstance(code, Code):
        return code.reads
    raise TypeError(f"a line of emitted code without its reads: {code!r}")  # an engine bug


def size_binding(code: Line | Code) -> str | None:
    """The size or batch shape ``code`` binds by name (``E = C.shape[1]``), else None."""
    return code.binds if isinstance(code, Code) else None
