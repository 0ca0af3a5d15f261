"""The op language's data: an :class:`Op` as its author writes it (strings) and the
:class:`Graph` that parsing makes of it (SymPy expressions, one :class:`Definition` or
:class:`View` per step, forward order). Every later stage reads a Graph.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import sympy as sp
from sympy.concrete.expr_with_limits import ExprWithLimits

from derive.functions import ALIASES, FUNCTIONS
from derive.names import identifier_problem, value_name_problem

if TYPE_CHECKING:
    from derive.language.guards import Ignored

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
    ranges: dict[str, str] = field(default_factory=dict)  # index -> size: {"t": "L"}

    def defaults_from(self) -> dict[str, str]:
        """The params whose default is another's, declared before it, by name: torch's
        ``max_pool2d(x, kernel_size, stride=None)``, whose stride is the kernel's unless given,
        is ``params={"kernel_size": 2, "stride": "kernel_size"}``."""
        return {k: v for k, v in self.params.items() if isinstance(v, str) and v.isidentifier()}

    def param_values(self) -> dict[str, object]:
        """The params' default values, one naming an earlier param read as that one's (a name
        that is none stays as written: :func:`derive.language.parse` refuses it)."""
        values: dict[str, object] = {}
        for key, v in self.params.items():
            values[key] = values.get(v, v) if isinstance(v, str) else v
        return values


def name_problem(name: str) -> str | None:
    """Why a tensor, size or param cannot have this name, or None: it must be a name the
    generated module can hold, and no function of the op language (a param ``exp`` would
    make ``exp(x[n])`` a call of a number)."""
    problem = value_name_problem(name)
    if problem is None and (name in FUNCTIONS or name in ALIASES or name in LANGUAGE_CALLS):
        problem = "is a function of the op language; rename it"
    if problem is None and name in PARSER_NAMES:
        problem = "is a name SymPy's parser writes numbers with; rename it"
    return problem


LANGUAGE_CALLS = ("Sum", "Max", "view")  # written like functions, read by the parser itself
# the parser writes 2 as Integer(2), 0.5 as Float('0.5'): a param named Integer was called
# ("'Symbol' object is not callable", found by probing)
PARSER_NAMES = ("Integer", "Float", "Rational", "Symbol", "Function")
IMPORTED = ("torch", "math", "sys", "contextlib", "hashlib")  # what a generated module imports
MAX_NAME = 100  # an op's name is a file name: <out>/<name>.py
MAX_TEXT = 10_000  # characters in one string of an op file: SymPy's parser recurses per term


def field_problem(op: Op) -> str | None:
    """What is wrong with the types of an Op's fields (one message per field), or None.

    Checked before anything reads them, so that ``inputs=[5]``, ``params=[1]`` or
    ``definitions="out = ..."`` are one line that names the field, not a traceback of ours.
    """
    problem = identifier_problem(op.name)
    if problem is None and len(op.name) > MAX_NAME:
        problem = f"is {len(op.name):,} characters long; at most {MAX_NAME}"
    if problem is not None:
        return f"the op name {problem}; it must name a Python module"
    if op.name in IMPORTED:
        return (
            f"the op name '{op.name}' is a module the generated code imports: {op.name}.py "
            "beside the other modules would shadow it; rename the op"
        )
    for name, value, what in (
        ("inputs", op.inputs, "'x[N, D]', 'targets[N]: int64'"),
        ("definitions", op.definitions, "'out[n] = tanh(x[n])'"),
    ):
        problem = _list_problem(name, value, what)
        if problem is not None:
            return problem
    for name, value, what in (
        ("params", op.params, "{'eps': 1e-5}"),
        ("sizes", op.sizes, "{'D': 'C / n_head'}"),
        ("ranges", op.ranges, "{'t': 'L'}"),
    ):
        problem = _dict_problem(name, value, what, text_values=name != "params")
        if problem is not None:
            return problem
    for name, value in (("doc", op.doc), ("source", op.source)):
        problem = _text_problem(value)
        if problem is not None:
            return f"{name} {problem}"
    if "\n" in op.source or "\r" in op.source:
        return "source (the op file's path) contains a line break"
    if not isinstance(op.stepwise, bool):
        return f"stepwise must be True or False, got {type(op.stepwise).__name__}"
    return None


def _text_problem(value: object) -> str | None:
    if not isinstance(value, str):
        return f"must be a string, got {type(value).__name__}"
    if len(value) > MAX_TEXT:
        return f"is {len(value):,} characters long; at most {MAX_TEXT:,}"
    return None


def _list_problem(name: str, value: object, example: str) -> str | None:
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        return f"{name} must be a list of strings ({example}), got {type(value).__name__}"
    for k, item in enumerate(value):
        problem = _text_problem(item)
        if problem is None and not item.strip():
            problem = "is empty"
        if problem is not None:
            return f"{name}[{k}] {problem}"
    return None


def _dict_problem(name: str, value: object, example: str, text_values: bool) -> str | None:
    if not isinstance(value, Mapping):
        return f"{name} must be a dict ({example}), got {type(value).__name__}"
    for key, item in value.items():
        if not isinstance(key, str):
            return f"{name} key {key!r} must be a string, got {type(key).__name__}"
        problem = _text_problem(item) if text_values else None  # params: parse checks numbers
        if problem is not None:
            return f"{name}[{key!r}] {problem}"
    return None


@dataclass(frozen=True)
class Tensor:
    name: str
    dims: tuple[sp.Expr, ...]
    integer: bool = False
    batched: bool = False  # leading ``...`` flattened into one Batch axis
    # may hold -inf (a where() branch, a Max of one, arithmetic on one): its entries are
    # extended reals, so SymPy takes exp of one for no positive number (exp(-oo) = 0)
    unbounded: bool = False

    @property
    def _kind(self) -> dict[str, bool]:
        if self.integer:
            return {"integer": True}
        return {"extended_real": True} if self.unbounded else {"real": True}

    @functools.cached_property
    def base(self) -> sp.IndexedBase:  # made once: SymPy builds an IndexedBase slowly
        return sp.IndexedBase(self.name, shape=self.dims or None, **self._kind)

    @functools.cached_property
    def whole(self) -> sp.Symbol:
        """A 0-d tensor as a definition reads it: a real symbol of its name (the adjoints and
        the forward's left-hand sides name 0-d tensors so too); extended real if unbounded."""
        return sp.Symbol(
            self.name, **({"extended_real": True} if self.unbounded else {"real": True})
        )


def may_be_infinite(body: sp.Expr, tensors: Mapping[str, Tensor]) -> bool:
    """Whether a definition may hold +-inf: its body has an infinity (``where(c, s, -inf)``)
    or reads a tensor that may (an input is finite: what a caller passes is its own)."""
    if body.has(sp.oo, -sp.oo, sp.zoo):
        return True
    read = {i.base.label.name for i in body.atoms(sp.Indexed)}
    read |= {s.name for s in body.free_symbols if isinstance(s, sp.Symbol)}
    return any(tensors[n].unbounded for n in read if n in tensors)


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
    # int inputs read clamped where negative, each with the entries outside its axis that its
    # where() ignores (see derive.language.guards), when set by the graph's maker
    # rather than found in its steps (the double backward's: its steps hold the first
    # backward's gated picks, whose guard is a product, not an enclosing where())
    guarded: Mapping[str, Ignored] | None = None
    ranges: dict[sp.Symbol, sp.Expr] = field(default_factory=dict)  # declared: t -> L
    # definitions that read no tensor, taken into their readers (derive.language.constants):
    # no step computes them; kept for the module's docstring
    taken: tuple[Definition, ...] = ()
    # the input the forward makes new tensors like, where not its first float input: the double
    # backward's grad_y, which torch.func's vmap batches where the op's inputs may not be (a
    # hessian's; a buffer a scatter fills in place is made like what it adds instead)
    like: str | None = None
    # float inputs whose gradient nobody asks for: the double backward's cotangents v, whose
    # gradient, d<v, B>/dv = B, is the first backward's own result (autograd never asks the
    # double backward for it). They get no adjoint, so nothing is saved to compute one
    constants: frozenset[str] = frozenset()
    # the output's value is never read, only its gradients at a cotangent of 1: the double
    # backward's pair <v, B>, which autograd differentiates and never looks at. The forward
    # computes what its backward saves and no more (the pair needs B, the first backward run
    # again), and the backward reads grad_out as the 1 it is
    gradient_only: bool = False
    # the sums the definitions' text adds as one, ``a - b`` of ``(a - b) + c`` as torch adds
    # them (derive.language.parse.written_sums): SymPy flattens them into one sum
    sums: tuple[sp.Expr, ...] = ()
    # each factor u of a log the text adds inside an exp, which SymPy takes out of it, with
    # the tensors the rest of that exp reads (derive.language.logs): the lowering puts it back
    logs: tuple[tuple[sp.Expr, frozenset[str]], ...] = ()

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
