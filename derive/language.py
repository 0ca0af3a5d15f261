"""The op language: how a forward op is written, element by element, in SymPy index notation.

An op is a small graph of named definitions. Everything a definition may use:

Inputs (``inputs=[...]``), one string each::

    "x[N, D]"            a float tensor; N, D are size symbols (any capitalised name)
    "targets[N]: int64"  an integer tensor: usable as a data-dependent index, never differentiated
    "idx[...]: int64"    ``...`` stands for any number of leading batch dimensions; the generated
                         module flattens them into one axis (size ``Batch``, index ``batch``)

Params (``params={"eps": 1e-5}``): python scalars passed to ``forward`` by keyword.

Derived sizes (``sizes={"H": "n_head", "D": "C / n_head"}``): a size computed from the inputs'
sizes and int params, multiplied or divided; the generated forward checks that it is a positive
whole number (``C = 10 is not divisible by n_head = 3``). A dimension may carry a number:
``"Wqkv[C, 3*C]"``, ``view(Wqkv, C, 3, H, D)``.

Definitions (``definitions=[...]``), one string each, in forward order; the last is the output::

    "out[n, m] = Sum(x[n, k] * W[k, m], k) + b[m]"   element-wise, with a contraction
    "loss = -Sum(logprobs[n, targets[n]], n) / N"     scalar; ``targets[n]`` is a data index
    "emb[n, t, e] = C[X[n, t], e]"                   gather through an integer tensor
    "maxes[n] = Max(logits[n, c], c)"                reduce-max over c (must be the whole RHS)
    "embcat = view(emb, N, T*E)"                     structural: same data, another shape

- Lower-case names that are not tensors, sizes or params are *indices*. An index on the left is
  an output axis; an index on the right must be on the left or bound by ``Sum``/``Max``. Its
  range is read off the tensor dimension it indexes.
- Functions: the rows of :data:`derive.functions.FUNCTIONS` (exp, log, sqrt, tanh, sigmoid,
  softplus, relu, erf, ..., ``maximum(a, b)``), plus + - * / and ``**``; constants ``pi`` and
  ``e`` (``e`` is an index where a definition subscripts with it). Any other name is refused.
- Sizes stay symbolic; ``N - 1`` is fine (Bessel's correction in batchnorm is written that way).
- A constant subscript picks a slice of a fixed-size axis: ``q[b, h, t, d] = Sum(x[b, t, c] *
  Wh[c, 0, h, d], c)`` reads the first of the three blocks of ``Wh = view(Wqkv, C, 3, H, D)``.
  ``view`` of an *input* works in every op (the input's gradient is the view's, reshaped); a
  view of an intermediate needs ``stepwise=True``.
- ``where(c, a, b)``: a where the comparison c holds, else b. c compares indices (``t2 <= t1``)
  or int64 data (``t[n] >= 0``); ``-inf`` (``inf``) may be a branch and nowhere else.

  Why a comparison, for the causal mask, rather than a mask input or a reduction over a
  bounded range ``Sum(e, (t2, 0, t1))``: the mask is a fact about indices, so it belongs in
  the definition, not in a tensor the caller must build and pass right; and a comparison
  keeps every Sum over a whole axis, so the simplifier's rules (delta elimination assumes an
  index is in its range by construction, alpha-equal sums merge) stay true unchanged, where a
  triangular range would need each rule to reason about bounds. ``where(t2 <= t1, s, -inf)``
  is what the softmax needs (exp(-inf) = 0, the row's Max skips it); SymPy differentiates it
  (d/ds = where(t2 <= t1, 1, 0)), and the simplifier drops that factor beside the softmax of
  the masked scores, which is 0 there already.

Parsing turns these strings into a :class:`Graph` of SymPy expressions; any problem raises a
:class:`~derive.errors.DerivationError` that names the op and the definition.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import sympy as sp
from sympy.concrete.expr_with_limits import ExprWithLimits
from sympy.parsing.sympy_parser import parse_expr, standard_transformations

from derive.errors import DerivationError
from derive.functions import ALIASES, CONSTANTS, FUNCTIONS, where
from derive.functions import known as known_names
from derive.identities import DEFINITION_RULES, rewrite
from derive.names import value_name_problem

BATCH_SIZE = sp.Symbol("Batch", integer=True, positive=True)
BATCH_INDEX = sp.Symbol("batch", integer=True)
# What parse_expr may build besides our names: numbers and symbols, never SymPy's namespace
# (which would let erf(), floor() or oo through to fail later, far from the op file).
_PARSER_GLOBALS = {
    "Integer": sp.Integer,
    "Float": sp.Float,
    "Rational": sp.Rational,
    "Symbol": sp.Symbol,
    "Function": sp.Function,
}


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

    @property
    def base(self) -> sp.IndexedBase:
        kind = {"integer": True} if self.integer else {"real": True}
        return sp.IndexedBase(self.name, shape=self.dims or None, **kind)


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

    def definition(self, name: str) -> Definition | View:
        return next(s for s in self.steps if s.name == name)


_INPUT = re.compile(r"^\s*(\w+)\s*\[([^\]]*)\]\s*(?::\s*(\w+))?\s*$|^\s*(\w+)\s*(?::\s*(\w+))?\s*$")
_DEF = re.compile(r"^\s*(\w+)\s*(?:\[([^\]]*)\])?\s*=(.+)$", re.S)
_VIEW = re.compile(r"^\s*view\(\s*(\w+)\s*,(.+)\)\s*$", re.S)


class _LangError(Exception):
    """Raised inside parsing helpers; :func:`parse` adds the op and definition."""


def _size(name: str) -> sp.Symbol:
    return sp.Symbol(name, integer=True, positive=True)


def _index(name: str) -> sp.Symbol:
    return sp.Symbol(name, integer=True)


def _parse_dims(text: str, sizes: dict[str, sp.Symbol]) -> tuple[tuple[sp.Expr, ...], bool]:
    parts = [p.strip() for p in text.split(",") if p.strip()]
    batched = bool(parts) and parts[0] == "..."
    if batched:
        parts = parts[1:]
        sizes[BATCH_SIZE.name] = BATCH_SIZE
    dims = []
    for p in parts:
        factors = [f.strip() for f in p.split("*")]
        if not all(re.fullmatch(r"[A-Z]\w*|[1-9]\d*", f) for f in factors):
            raise _LangError(
                f"dimension '{p}' must be a size symbol (a capitalised name) or a product "
                "of sizes and positive integers (3*C)"
            )
        for f in factors:
            if f != BATCH_SIZE.name and not f.isdigit():
                _check_name(f, "size")
        dims.append(
            sp.Mul(
                *[sp.Integer(f) if f.isdigit() else sizes.setdefault(f, _size(f)) for f in factors]
            )
        )
    return ((BATCH_SIZE,) if batched else ()) + tuple(dims), batched


def _parse_input(text: str, sizes: dict[str, sp.Symbol]) -> Tensor:
    m = _INPUT.match(text)
    if not m:
        raise _LangError(f"cannot read input '{text}': expected 'name[D1, D2]' or 'name[N]: int64'")
    name = m.group(1) or m.group(4)
    dtype = m.group(3) or m.group(5)
    _check_name(name, "input")
    if dtype not in (None, "int64", "float"):
        raise _LangError(f"input '{name}': dtype must be int64 or float, not '{dtype}'")
    dims, batched = _parse_dims(m.group(2) or "", sizes)
    return Tensor(name, dims, integer=dtype == "int64", batched=batched)


def _check_data_use(body: sp.Expr, g: Graph) -> None:
    """An int64 tensor is a data index: it may stand only inside a subscript (x[t[n]])."""

    def walk(e: sp.Basic) -> None:
        if isinstance(e, sp.core.relational.Relational):
            return  # a where() condition may compare int data: where(t[n] >= 0, ..., 0)
        if isinstance(e, sp.Indexed):
            t = g.tensors.get(e.base.label.name)
            if t is not None and t.integer:
                raise _LangError(
                    f"int64 tensor '{t.name}' is a data index: use it only as a subscript, "
                    f"e.g. x[{t.name}[...]] (declare it float to use its values)"
                )
            return  # a subscript may hold data indices
        for a in e.args:
            walk(a)

    walk(body)
    _check_infinities(body)
    if not body.atoms(sp.Indexed):
        raise _LangError("the right-hand side reads no tensor: nothing to differentiate")


def _check_infinities(body: sp.Expr) -> None:
    """``inf`` is a masked value, a branch of where() (exp(-inf) = 0, a Max skips it), and
    nothing else: exp(inf) or inf - inf would be NaN, with no gradient to derive."""
    branches = {a for w in body.atoms(where) for a in w.args[1:] if a in (sp.oo, -sp.oo)}
    rest = body.xreplace(
        {
            w: w.func(w.args[0], *(sp.S.Zero if a in branches else a for a in w.args[1:]))
            for w in body.atoms(where)
        }
    )
    if rest.has(sp.oo, -sp.oo, sp.zoo, sp.nan) or any(
        c.has(sp.oo, -sp.oo) for w in body.atoms(where) for c in w.args[:1]
    ):
        raise _LangError("inf may only be a branch of where(), e.g. where(t2 <= t1, s, -inf)")
    for w in body.atoms(where):
        if not isinstance(w.args[0], sp.core.relational.Relational):
            raise _LangError(
                f"the condition of {w} must be a comparison (t2 <= t1, t[n] >= 0), "
                f"not '{w.args[0]}'"
            )


def _check_name(name: str, role: str) -> None:
    problem = value_name_problem(name)
    if problem is not None:
        raise _LangError(f"{role} name '{name}' {problem}")


def _parse_params(op: Op, g: Graph) -> dict[sp.Symbol, float | int]:
    params = {}
    for key, v in sorted(op.params.items()):
        _check_name(key, "param")
        if key in g.tensors:
            raise _LangError(f"param '{key}' has the name of an input")
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise _LangError(f"param '{key}' must be a number, got {type(v).__name__} {v!r}")
        # an int stays an int (it may set a size: n_head), so the signature reads n_head=4
        params[sp.Symbol(key, real=True)] = v if isinstance(v, int) else float(v)
    return params


def _index_ranges(expr: sp.Expr) -> dict[sp.Symbol, set]:
    """Where each plain index is used as a tensor subscript: index -> {dimension sizes}."""
    ranges: dict[sp.Symbol, set] = {}
    for ind in expr.atoms(sp.Indexed):
        shape = ind.base.shape or ()
        if len(shape) != len(ind.indices):
            raise _LangError(
                f"{ind} has {len(ind.indices)} indices but {ind.base} has {len(shape)} dimensions"
            )
        for pos, size in zip(ind.indices, shape, strict=True):
            if isinstance(pos, sp.Symbol):
                ranges.setdefault(pos, set()).add(size)
            elif pos.is_Integer:  # q = Wqkv4[c, 0, h, d]: one slice of a fixed-size axis
                if not (size.is_Integer and 0 <= pos < size):
                    raise _LangError(
                        f"constant subscript {pos} of {ind}: the axis must have a fixed size "
                        f"above it (declare it as a number, e.g. view(W, C, 3, C)), not {size}"
                    )
            elif not (isinstance(pos, sp.Indexed) and pos.base.is_integer):
                raise _LangError(
                    f"subscript '{pos}' of {ind}: use an index, a constant or an entry of an "
                    "int64 tensor"
                )
    return ranges


def _range_of(index: sp.Symbol, expr: sp.Expr) -> sp.Expr:
    sizes = _index_ranges(expr).get(index)
    if not sizes:
        raise _LangError(f"cannot infer the range of index '{index}': it subscripts no tensor")
    if len(sizes) > 1:
        shown = ", ".join(sorted(map(str, sizes)))
        raise _LangError(f"index '{index}' is used over different sizes: {shown}")
    return next(iter(sizes))


def _limits(expr: sp.Expr, indices: tuple) -> list[tuple]:
    if not indices:
        raise _LangError("Sum/Max need at least one index to reduce over")
    for i in indices:
        if not isinstance(i, sp.Symbol):
            raise _LangError(f"Sum/Max reduce over indices, not '{i}'")
    return [(i, 0, _range_of(i, expr) - 1) for i in indices]


def _lang_sum(expr: sp.Expr, *indices: sp.Symbol) -> sp.Expr:
    return sp.Sum(expr, *_limits(sp.sympify(expr), indices))


def _lang_max(expr: sp.Expr, *indices: sp.Symbol) -> sp.Expr:
    return ReduceMax(expr, *_limits(sp.sympify(expr), indices))


def _namespace(
    tensors: dict[str, Tensor], sizes: dict[str, sp.Symbol], params: dict
) -> dict[str, object]:
    ns: dict[str, object] = {name: _checked_call(f) for name, f in FUNCTIONS.items()}
    ns.update({alias: ns[name] for alias, name in ALIASES.items()})
    ns.update(Sum=_lang_sum, Max=_lang_max, batch=BATCH_INDEX, Batch=BATCH_SIZE)
    ns.update({p.name: p for p in params})
    ns.update(sizes)
    ns.update({t.name: t.base for t in tensors.values()})
    return ns


def _checked_call(f):
    def call(*args):
        if len(args) != f.arity:
            raise _LangError(f"{f.name}() takes {f.arity} argument(s), got {len(args)}")
        return f.make(*args)

    return call


def _subscripts(text: str) -> set[str]:
    """Lower-case names used inside [...]: indices for sure (``e`` there is not Euler's e)."""
    parts = re.findall(r"\[([^\[\]]*)", text)
    return {w for part in parts for w in re.findall(r"\b[a-z_]\w*", part)}


def _parse_rhs(text: str, ns: dict[str, object], lhs: str = "") -> sp.Expr:
    text = text.replace("...", "batch")
    local = dict(ns)
    as_index = _subscripts(text + lhs)
    scalars = sorted(
        w
        for w in set(re.findall(r"\b([A-Za-z_]\w*)\b", text))
        if isinstance(ns.get(w), sp.IndexedBase) and not ns[w].shape
    )
    if scalars:  # reverse mode follows indexed tensors only: say so rather than lose a gradient
        raise _LangError(
            f"'{scalars[0]}' has no index: a definition cannot read a scalar tensor yet "
            f"(define it with an index, e.g. {scalars[0]}[n] over a size-1 axis)"
        )
    for word in re.findall(r"\b([a-z_]\w*)\b(?!\s*\()", text):
        if word in CONSTANTS and word not in as_index:
            local.setdefault(word, CONSTANTS[word])
        local.setdefault(word, _index(word))  # every other lower-case name is an index
    try:
        expr = parse_expr(
            text,
            local_dict=local,
            global_dict=dict(_PARSER_GLOBALS),
            transformations=standard_transformations,
        )
    except _LangError:
        raise
    except TypeError as exc:
        if "not subscriptable" in str(exc):
            raise _LangError(f"unknown tensor in '{text.strip()}' ({exc})") from None
        raise _LangError(f"cannot parse '{text.strip()}': {exc}") from None
    except Exception as exc:  # SymPy's parser raises many types; the user needs one message
        if "Rank mismatch" in str(exc):
            raise _LangError(
                f"wrong number of indices in '{text.strip()}': one per dimension"
            ) from None
        raise _LangError(f"cannot parse '{text.strip()}': {exc}") from None
    undefined = sorted(str(f.func) for f in expr.atoms(sp.core.function.AppliedUndef))
    if undefined:
        raise _LangError(f"unknown function {', '.join(undefined)} (known: {known_names()})")
    return sp.sympify(expr)


def _check_indices(lhs: tuple[sp.Symbol, ...], body: sp.Expr, known: set) -> None:
    free = {s for s in body.free_symbols if s not in known and not isinstance(s, sp.Indexed)}
    free -= {s for ind in body.atoms(sp.Indexed) for s in [ind.base.label]}
    used = {s for ind in body.atoms(sp.Indexed) for s in ind.indices if isinstance(s, sp.Symbol)}
    for s in sorted(free - set(lhs), key=str):
        if s.name[:1].isupper():
            raise _LangError(f"unknown size '{s}': sizes are named in the inputs' shapes")
        if s not in used:
            raise _LangError(
                f"unknown name '{s}': not an input, param, constant or index "
                f"(an index must subscript a tensor; functions: {known_names()})"
            )
        raise _LangError(f"index {s} is neither on the left-hand side nor summed")
    if len(set(lhs)) != len(lhs):
        raise _LangError("an index appears twice on the left-hand side")


def _parse_definition(text: str, g: Graph, ns: dict, sizes: dict) -> Definition | View:
    m = _DEF.match(text)
    if not m:
        raise _LangError("expected 'name[i, j] = expression' or 'name = expression'")
    name, lhs_text, rhs = m.group(1), m.group(2), m.group(3)
    _check_name(name, "definition")
    if name in g.tensors:
        raise _LangError(f"'{name}' is already defined")
    view = _VIEW.match(rhs)
    if view:
        source = view.group(1)
        if source not in g.tensors:
            raise _LangError(f"view of unknown tensor '{source}'")
        dims = tuple(_parse_rhs(d, ns) for d in view.group(2).split(","))
        g.tensors[name] = Tensor(name, dims)
        return View(name, source, text.strip())
    lhs = tuple(_index(s.strip()) for s in (lhs_text or "").split(",") if s.strip())
    lhs = tuple(BATCH_INDEX if s.name == "..." else s for s in lhs)
    body = rewrite(_parse_rhs(rhs, ns, f"[{lhs_text}]" if lhs_text else ""), DEFINITION_RULES)
    _check_indices(lhs, body, set(sizes.values()) | set(g.params))
    _check_data_use(body, g)
    dims = tuple(_range_of(i, body) for i in lhs)
    g.tensors[name] = Tensor(name, dims, batched=bool(lhs) and lhs[0] == BATCH_INDEX)
    return Definition(name, lhs, body, text.strip())


def _derived_size(name: str, text: str, sizes: dict[str, sp.Symbol], g: Graph) -> sp.Symbol:
    """``sizes={"D": "C / n_head"}``: a size computed from the inputs' sizes and int params."""
    if not re.fullmatch(r"[A-Z]\w*", name or ""):
        raise _LangError(f"derived size '{name}' must be a capitalised name")
    _check_name(name, "size")
    if name in sizes:
        raise _LangError(f"size '{name}' is already given by an input's shape")
    sizes[name] = _size(name)
    return sizes[name]


def _parse_size_expr(text: str, sizes: dict[str, sp.Symbol], g: Graph) -> sp.Expr:
    """A product of sizes and int params, each to the power +-1 (``C / n_head``, ``n_head``);
    the generated forward checks at run time that it is a positive integer."""
    ns = {**{p.name: p for p in g.params}, **sizes}
    try:
        expr = parse_expr(text, local_dict=ns, global_dict=dict(_PARSER_GLOBALS))
    except Exception as exc:  # noqa: BLE001  (SymPy's parser raises many types)
        raise _LangError(f"cannot parse size expression '{text}': {exc}") from None
    for factor in sp.Mul.make_args(sp.sympify(expr)):
        base, power = factor.as_base_exp()
        if factor.is_Integer and factor > 0:
            continue
        known = base in sizes.values() or base in g.params
        if not known or power not in (1, -1):
            raise _LangError(
                f"size expression '{text}': use sizes and int params, multiplied or divided "
                f"('C / n_head'); '{factor}' is neither"
            )
        if base in g.params and not isinstance(g.op.params[base.name], int):
            raise _LangError(f"param '{base}' sets a size, so its default must be an int")
    return expr


def _lift_maxes(step: Definition | View, g: Graph, sizes: set) -> list[Definition | View]:
    """A Max inside an expression, or over several indices, becomes a definition of its own.

    ``h[n] = exp(Max(x[n, c], c))`` -> ``h_max0[n] = Max(x[n, c], c)``, ``h[n] = exp(h_max0[n])``;
    ``m = Max(x[p, v], p, v)`` -> ``m_max0[p] = Max(x[p, v], v)``, ``m = Max(m_max0[p], p)``.
    Reverse mode then needs one rule: a definition that is one Max over one index.
    """
    if not isinstance(step, Definition) or not step.body.has(ReduceMax):
        return [step]
    lifted: list[Definition] = []

    def aux(node: ReduceMax) -> sp.Expr:
        free = tuple(
            sorted(
                (x for x in node.free_symbols if isinstance(x, sp.Symbol) and x.is_integer),
                key=str,
            )
        )
        free = tuple(
            i
            for i in free
            if i not in sizes and not any(i == ind.base.label for ind in node.atoms(sp.Indexed))
        )
        if not free:
            raise _LangError(
                "a Max over every index inside an expression: write it as its own definition"
            )
        name = f"{step.name}_max{len(lifted)}"
        g.tensors[name] = Tensor(name, tuple(_range_of(i, node) for i in free))
        lifted.append(Definition(name, free, node, f"{name}[...] = {node}  (from `{step.text}`)"))
        return g.tensors[name].base[free]

    def lift(e: sp.Basic, top: bool) -> sp.Basic:
        if not isinstance(e, sp.Basic) or not e.args:
            return e
        if isinstance(e, ReduceMax):
            f = lift(e.function, False)
            for lim in reversed(e.limits[1:]):  # Max over p, v = Max over p of Max over v
                f = aux(ReduceMax(f, lim))
            node = ReduceMax(f, e.limits[0])
            return node if top else aux(node)
        return e.func(*[lift(a, False) for a in e.args])

    body = lift(step.body, True)
    return [*lifted, Definition(step.name, step.indices, body, step.text)]


def parse(op: Op) -> Graph:
    """Parse an :class:`Op` into a :class:`Graph`; raise DerivationError on any problem."""
    sizes: dict[str, sp.Symbol] = {}
    g = Graph(op, [], {}, {}, [], [], "")
    current = None
    try:
        for text in op.inputs:
            current = text
            t = _parse_input(text, sizes)
            if t.name in g.tensors:
                raise _LangError(f"input '{t.name}' is declared twice")
            g.tensors[t.name] = t
            g.inputs.append(t.name)
        current = None
        g.params = _parse_params(op, g)
        for name, text in sorted(op.sizes.items()):
            current = f"{name} = {text}"
            g.derived[_derived_size(name, text, sizes, g)] = sp.sympify(
                _parse_size_expr(text, sizes, g)
            )
        for text in op.definitions:
            current = text
            step = _parse_definition(text, g, _namespace(g.tensors, sizes, g.params), sizes)
            g.steps.extend(_lift_maxes(step, g, set(sizes.values())))
    except _LangError as exc:
        raise DerivationError(op.name, str(exc), current) from None
    if not g.steps:
        raise DerivationError(op.name, "an op needs at least one definition")
    g.output = g.steps[-1].name
    if all(g.tensors[t].integer for t in g.inputs):
        raise DerivationError(op.name, "every input is int64: there is nothing to differentiate")
    if g.tensors[g.output].integer:
        raise DerivationError(op.name, "the output must be a float tensor", g.steps[-1].text)
    g.sizes = sorted(set(sizes.values()) | _batch_size(g), key=str)
    return g


def _batch_size(g: Graph) -> set:
    return {BATCH_SIZE} if any(t.batched for t in g.tensors.values()) else set()
