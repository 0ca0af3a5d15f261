"""The op language's data: an :class:`Op` as its author writes it (strings) and the
:class:`Graph` that parsing makes of it (SymPy expressions, one :class:`Definition` or
:class:`View` per step, forward order). Every later stage reads a Graph.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field

import sympy as sp
from sympy.concrete.expr_with_limits import ExprWithLimits

BATCH_SIZE = sp.Symbol("Batch", integer=True, positive=True)
BATCH_INDEX = sp.Symbol("batch", integer=True)


class ReduceMax(ExprWithLimits):
    """``Max(f, c)``: the maximum of f over the index c. Its derivative picks the argmax."""

    __slots__ = ()


@dataclass(frozen=True)
class Op:
    """An op as its author writes it: plain strings, parsed by :func:`parse`."""

    name: str
    inputs: list[str]
    definitions: list[str]
    params: dict[str, float] = field(default_factory=dict)
    sizes: dict[str, str] = field(default_factory=dict)  # derived sizes: {"D": "C / n_head"}
    doc: str = ""
    stepwise: bool = False  # emit every intermediate's gradient step by step (the exercise)
    source: str = ""  # the file it came from, recorded in generated headers


@dataclass(frozen=True)
class Tensor:
    name: str
    dims: tuple[sp.Expr, ...]
    integer: bool = False
    batched: bool = False  # leading ``...`` flattened into one Batch axis

    @functools.cached_property
    def base(self) -> sp.IndexedBase:  # made once: SymPy builds an IndexedBase slowly
        kind = {"integer": True} if self.integer else {"real": True}
        return sp.IndexedBase(self.name, shape=self.dims or None, **kind)

    @functools.cached_property
    def whole(self) -> sp.Symbol:
        """A 0-d tensor as a definition reads it: a real symbol of its name (the adjoints and
        the forward's left-hand sides name 0-d tensors so too)."""
        return sp.Symbol(self.name, real=True)


@dataclass(frozen=True)
class Definition:
    """``name[indices] = body``: one element-wise definition."""

    name: str
    indices: tuple[sp.Symbol, ...]
    body: sp.Expr
    text: str


@dataclass(frozen=True)
class View:
    """``name = view(source, dims...)``: a reshape; its adjoint is the reverse reshape."""

    name: str
    source: str
    text: str


@dataclass
class Graph:
    op: Op
    sizes: list[sp.Symbol]
    params: dict[sp.Symbol, float]
    tensors: dict[str, Tensor]
    inputs: list[str]
    steps: list[Definition | View]
    output: str
    derived: dict[sp.Symbol, sp.Expr] = field(default_factory=dict)  # D -> C / n_head

    def base(self, name: str) -> sp.IndexedBase:
        return self.tensors[name].base


def tensor_reads(e: sp.Basic, tensors: Mapping[str, Tensor]) -> set[str]:
    """The tensors ``e`` reads: ``x[...]`` by its label, a 0-d tensor by its real symbol (an
    index is an integer symbol, and may share a tensor's name: that is no read of it)."""
    found = {i.base.label.name for i in e.atoms(sp.Indexed)}
    wholes = (s for s in e.free_symbols if isinstance(s, sp.Symbol) and not s.is_integer)
    found |= {s.name for s in wholes if s.name in tensors and not tensors[s.name].dims}
    return found


class LangError(Exception):
    """Raised inside parsing helpers; :func:`~derive.language.parse.parse` adds the op and
    the definition."""
