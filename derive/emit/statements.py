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

from derive.ir.nodes import Guarded
from derive.ir.printer import Line
from derive.lower.lowerer import PRINTER


class Code(str):
    """A line emission writes itself, with what it writes and reads said by the code that
    builds it (``E = C.shape[1]`` writes E and reads C; ``_check_size(...)`` reads the helper,
    the tensor and the sizes it compares). ``binds``: the size or batch shape it binds by
    name, which a module drops when nothing reads it. ``guard``: an ``if needs[k]: `` the
    statement runs under (:mod:`derive.ir.needs`), which a reader of the derivation is not
    shown."""

    writes: frozenset[str]
    reads: frozenset[str]
    binds: str | None
    body: str  # the statement without its guard

    def __new__(
        cls,
        code: str,
        writes: Iterable[str] = (),
        reads: Iterable[str] = (),
        binds: bool = False,
        guard: str = "",
    ) -> Code:
        line = super().__new__(cls, guard + code)
        line.writes, line.reads = frozenset(writes), frozenset(reads)
        line.binds = next(iter(line.writes)) if binds else None
        line.body = code
        return line


@dataclass(frozen=True)
class Statement:
    code: str  # one python statement, as lowered (black formats it with the module)
    writes: frozenset[str]  # the variables it assigns or updates in place
    reads: frozenset[str]  # every variable it mentions (its targets too)


def statement(code: Line | Code) -> Statement:
    """``code`` (one line, a guard and all) with what it writes and reads."""
    if isinstance(code, Line):
        s = code.statement
        return Statement(code.strip(), s.writes, s.reads | s.writes)
    return Statement(code.strip(), code.writes, code.reads | code.writes)


def statements(code: Line | Code) -> list[Statement]:
    """``code`` with what it writes and reads: one statement, or those a guard runs (shown
    without it: which gradients the caller asks for is no part of the derivation)."""
    if isinstance(code, Line) and isinstance(code.statement, Guarded):
        return [
            Statement(PRINTER.doprint(b), b.writes, b.reads | b.writes) for b in code.statement.body
        ]
    if isinstance(code, Code):
        return [Statement(code.body.strip(), code.writes, code.reads | code.writes)]
    return [statement(code)]


def unguarded(lines: Iterable[Line | Code]) -> list[str]:
    """The lines as a reader of the derivation sees them: each statement without its guard."""
    return [s.code for line in lines for s in statements(line)]


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
