"""Parsing: an :class:`~derive.language.graph.Op` (strings) becomes a
:class:`~derive.language.graph.Graph` (SymPy expressions). Any problem raises a
:class:`~derive.errors.DerivationError` that names the op and the definition; the constructs
are listed in :mod:`derive.language`.

Every definition's body goes through the identity table's definition rules
(:data:`derive.identities.DEFINITION_RULES`) as it is read, so ``1/(1 + exp(-z))`` is
``sigmoid(z)`` from here on.
"""

from __future__ import annotations

import ast
import functools
import math
import re

import sympy as sp
from sympy.parsing.sympy_parser import parse_expr, standard_transformations

from derive.errors import DerivationError
from derive.functions import ALIASES, CONSTANTS, FUNCTIONS
from derive.functions import known as known_names
from derive.identities import read_definition
from derive.language.affine import check_affine_params, check_ranges_used, parse_ranges
from derive.language.conditions import NAMESPACE as RELATION_CALLS
from derive.language.conditions import relations_as_calls
from derive.language.constants import taken_in
from derive.language.graph import (
    BATCH_INDEX,
    BATCH_SIZE,
    Definition,
    Graph,
    LangError,
    Op,
    ReduceMax,
    Tensor,
    View,
    field_problem,
    may_be_infinite,
    name_problem,
    tensor_reads,
)
from derive.language.logs import Logged, exp_logs
from derive.language.logsumexp import shifted_logsumexps
from derive.language.ranges import (
    Ranges,
    kept_nested,
    lang_max,
    lang_sum,
    lift_maxes,
    range_of,
    subscript_ranges,
)
from derive.language.sizes import check_infinities, derived_size, parse_size_expr
from derive.language.text import (
    bare_subscripts,
    bracket_problem,
    keyword_problem,
    syntax_problem,
)
from derive.names import did_you_mean

# SymPy's relations as calls, which a user may write for a comparison: Ne(t[n], -1)
SYMPY_RELATIONS = {"Eq": "==", "Ne": "!=", "Lt": "<", "Le": "<=", "Gt": ">", "Ge": ">="}


def exact_decimal(text: str | float, *args) -> sp.Float | sp.Rational:
    """A decimal literal: an integer (``-10000.0`` is -10000) or one of magnitude at least
    :data:`EXACT_FROM` as the exact number it writes (``1000.5`` is 2001/2), else a Float.

    SymPy takes a term of an exponent out of its exp as a factor the moment its exp is a
    number, and a Float's always is: a BERT mask, ``s = x + (1 - keep) * -10000.0``, made a
    softmax's ``exp(s - m)`` the float ``1e-4343`` times ``exp(x + 10000 keep - m)``, and
    the backward computed ``0 * inf`` (NaN gradients at unit-scale inputs; found by probing).
    ``exp(-10000)`` of an integer stays in the exp it was written in, and python rounds a
    quotient ``p / q`` once, to the float the literal is. Small fractions (GELU's 0.044715)
    stay Floats: exp of one is a factor near 1, and as fractions SymPy would clear their
    denominators (``26829 x**2 + 200000``) into the code."""
    if not isinstance(text, str):
        return sp.Float(text, *args)
    exact = sp.Rational(text)
    return exact if exact.is_Integer or abs(exact) >= EXACT_FROM else sp.Float(text, *args)


EXACT_FROM = 64  # exp(64) ~ 6e27: a Float term past it moves a factor that far out of its exp


# What parse_expr may build besides our names: numbers and symbols, never SymPy's namespace
# (which would let erf(), floor() or oo through to fail later, far from the op file).
_PARSER_GLOBALS = {
    "Integer": sp.Integer,
    "Float": exact_decimal,
    "Rational": sp.Rational,
    "Symbol": sp.Symbol,
    "Function": sp.Function,
}


_INPUT = re.compile(r"^\s*(\w+)\s*\[([^\]]*)\]\s*(?::\s*(\w+))?\s*$|^\s*(\w+)\s*(?::\s*(\w+))?\s*$")
_DEF = re.compile(r"^\s*(\w+)\s*(?:\[([^\]]*)\])?\s*=(.+)$", re.S)
_VIEW = re.compile(r"^\s*view\(\s*(\w+)\s*,(.+)\)\s*$", re.S)


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
            raise LangError(
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


def _written_ranges(text: str, g: Graph, sizes: dict[str, sp.Symbol]) -> dict:
    """index -> size for each bare index the text writes as a subscript of a tensor above it
    (``x[n, t]``: n over x's first axis), where every such use agrees on the size."""
    found: dict[sp.Symbol, set] = {}
    for name, inside in re.findall(r"\b([A-Za-z_]\w*)\s*\[([^\[\]]*)\]", text):
        t = g.tensors.get(name)
        parts = [p.strip() for p in inside.split(",")]
        if t is None or len(parts) != len(t.dims):
            continue
        for part, size in zip(parts, t.dims, strict=True):
            known = part in sizes or part in g.tensors or sp.Symbol(part, real=True) in g.params
            if part == "...":  # the batch axes, flattened into one (x[..., m])
                found.setdefault(BATCH_INDEX, set()).add(size)
            elif re.fullmatch(r"[a-z_]\w*", part) and not known:
                found.setdefault(_index(part), set()).add(size)
    return {i: next(iter(s)) for i, s in found.items() if len(s) == 1}


def _size_order(derived: dict[str, str]) -> list[str]:
    """The derived sizes' names, each after the sizes it reads (``{"P": "(K - 1) // 2", "L":
    "T + 2*P - K + 1"}``: P first), ties by name: the forward binds them in this order. Sizes
    that read each other are refused (one reading itself: its own message, at its parse)."""
    reads = {
        n: {w for w in re.findall(r"[A-Za-z_]\w*", str(t)) if w in derived and w != n}
        for n, t in derived.items()
    }
    order: list[str] = []
    while len(order) < len(derived):
        ready = sorted(n for n in derived if n not in order and reads[n] <= set(order))
        if not ready:
            left = sorted(n for n in derived if n not in order)
            raise LangError(
                f"sizes {', '.join(repr(n) for n in left)} read each other: a derived size reads "
                "the inputs' sizes, int params and other derived sizes, none of them in a cycle"
            )
        order.append(ready[0])
    return order


def _parse_input(text: str, sizes: dict[str, sp.Symbol]) -> Tensor:
    m = _INPUT.match(text)
    if not m:
        raise LangError(f"cannot read input '{text}': expected 'name[D1, D2]' or 'name[N]: int64'")
    name = m.group(1) or m.group(4)
    dtype = m.group(3) or m.group(5)
    _check_name(name, "input")
    if dtype not in (None, "int64", "float"):
        raise LangError(f"input '{name}': dtype must be int64 or float, not '{dtype}'")
    dims, batched = _parse_dims(m.group(2) or "", sizes)
    if dtype == "int64" and not dims:
        raise LangError(
            f"input '{name}': an int64 input is a data index, read as a subscript, and needs an "
            f"axis ('{name}[N]: int64'); a 0-d input is a float, read whole"
        )
    return Tensor(name, dims, integer=dtype == "int64", batched=batched)


def _check_data_use(body: sp.Expr, g: Graph) -> None:
    """An int64 tensor is a data index: it may stand only inside a subscript (x[t[n]])."""

    def walk(e: sp.Basic) -> None:
        if isinstance(e, sp.core.relational.Relational):
            return  # a where() condition may compare int data: where(t[n] >= 0, ..., 0)
        if isinstance(e, (sp.floor, sp.ceiling, sp.Mod)):  # no kernel: t // 2 of an index
            raise LangError(
                f"'{e}' divides with a floor or takes a remainder (// or %): the op language "
                "reads indices and sizes as numbers only in sums and products (2*t + 1, t/T)"
            )
        if isinstance(e, sp.Indexed):
            t = g.tensors.get(e.base.label.name)
            if t is not None and t.integer:
                raise LangError(
                    f"int64 tensor '{t.name}' is a data index: use it only as a subscript, "
                    f"e.g. x[{t.name}[...]] (declare it float to use its values)"
                )
            return  # a subscript may hold data indices
        for a in e.args:
            walk(a)

    walk(body)
    _check_numbers(body)
    check_infinities(body)


def _check_numbers(body: sp.Expr) -> None:
    """Constants SymPy has already evaluated to no real number: each would reach the module as
    a bare zoo, nan or complex value (or stop the lowering with a traceback)."""
    if body.has(sp.zoo):
        raise LangError("it divides by zero or takes log(0): SymPy reads that as complex infinity")
    if body.has(sp.nan):
        raise LangError("it has an undefined constant (0/0, 0*inf or inf - inf)")
    if body.has(sp.I) or any(n.is_extended_real is False for n in body.atoms(sp.Number)):
        raise LangError(
            "it has an imaginary constant: the square root or log of a negative number "
            "(sqrt(-1) = I); the op language is real"
        )
    for f in sp.preorder_traversal(body):
        arg = _out_of_domain(f)
        if arg is not None:
            raise LangError(
                f"it takes {'the log' if isinstance(f, sp.log) else 'a real power'} of "
                f"{arg}, which is negative for every value: the op is not real"
            )


def _out_of_domain(f: sp.Basic) -> sp.Expr | None:
    """The argument of a log, or the base of a power that is no whole number (sqrt, ``(-1) **
    x[n]``), that SymPy knows is negative for every real value of what it reads (``-x**2 -
    1``, ``-exp(x)``, -1), else None; ``(-1) ** t`` of an index t is real.
    SymPy rewrites such a call with I (``log(-exp(x))`` is ``x + I pi``, the derivative of
    ``sqrt(-x**2 - 1)`` is ``I x / sqrt(x**2 + 1)``), and the lowering stopped at the complex
    number with a traceback (found by probing)."""
    if isinstance(f, sp.log) and f.args[0].is_extended_negative:
        return f.args[0]
    if isinstance(f, sp.Pow) and f.base.is_extended_negative and not f.exp.is_integer:
        # a fractional power, or a real power (-1)**x[n]: real only at whole exponents
        if f.exp.is_Rational or f.exp.atoms(sp.Indexed) or f.exp.free_symbols:
            return f.base
    return None


def _defined_names(texts: list[str]) -> dict[str, bool]:
    """The names the definitions ``texts`` define, each with whether it has indices."""
    found = {}
    for text in texts:
        m = _DEF.match(text)
        if m:
            found.setdefault(m.group(1), bool((m.group(2) or "").strip()))
    return found


def _check_order(name: str, rhs: str, ahead: dict[str, bool], g: Graph) -> None:
    """A definition reads inputs and earlier definitions only: name a read of itself or of a
    later definition (a cycle), which the parser would call an unknown tensor or index."""
    as_index = _subscripts(rhs)
    for word in dict.fromkeys(re.findall(r"\b([A-Za-z_]\w*)\b", rhs)):
        if word in g.tensors or word not in ahead:
            continue
        view = _VIEW.match(rhs)
        subscripted = bool(re.search(rf"\b{word}\s*\[", rhs)) or bool(view and view[1] == word)
        if not (subscripted if ahead[word] else word not in as_index):
            continue  # an index that shares a later tensor's name, or a call
        if word == name:
            raise LangError(f"'{name}' reads itself: a definition reads inputs and earlier ones")
        raise LangError(
            f"'{word}' is defined later: definitions are read in order, so each reads only "
            "the inputs and the definitions above it (no cycles)"
        )


def _check_index_names(inside: list[str], g: Graph) -> None:
    """A param is a number: named as an index (x[k] beside params={'k': 2}) it is neither.
    It may stand in an affine subscript (x[S*t + k - P]), but not as a subscript alone."""
    params = {p.name for p in g.params}
    clash = sorted({p.strip() for part in inside for p in part.split(",")} & params)
    if clash:
        raise LangError(
            f"param '{clash[0]}' is used as an index (a subscript); rename the param or the index"
        )


def _check_tensors_as_indices(text: str, g: Graph) -> None:
    """A tensor's name written bare in a subscript (``x[s]``, ``Sum(x[s], s)`` below a
    definition ``s[n] = ...``) is an index there: the parser would read the tensor, and the
    user would hear that a Sum reduces over indices, not 's'."""
    both = sorted(w for w in bare_subscripts(text) if w in g.tensors and g.tensors[w].dims)
    if both:
        raise LangError(
            f"'{both[0]}' is both a tensor and an index: a tensor is read as {both[0]}[...], "
            "so rename the index"
        )


# SymPy's logic and piecewise functions a user may reach for, and what the language writes
_LOGIC = {"And", "Or", "Not", "Xor"}
_BRANCHES = {"Piecewise", "ITE"}


def _unknown_functions(names: list[str]) -> str:
    """The message for calls of functions the language does not have, with what to write."""
    hints = []
    spelt = [f"{SYMPY_RELATIONS[f]} for {f}" for f in names if f in SYMPY_RELATIONS]
    if spelt:
        hints.append(f"write the comparison with its operator ({', '.join(spelt)})")
    if _LOGIC & set(names):
        hints.append("nest where() to combine conditions (where(a < b, where(c < d, x, y), y))")
    if _BRANCHES & set(names):
        hints.append("write branches with where(c, a, b), nested for more than two")
    hint = "".join(f"; {h}" for h in hints)
    return f"unknown function {', '.join(names)} (known: {known_names()}){hint}"


def _called(text: str) -> set[str]:
    """The names ``text`` calls as functions, read off Python's syntax tree before anything
    else reads the text: ``Piecewise((x, c), (y, True))`` is an unknown function, not a misused
    keyword ``True`` (found by probing), and ``And(a > 0, b > 0)`` not a comparison outside a
    where(). Empty where the text is no Python expression (the parser says why)."""
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError:
        return set()
    return {
        n.func.id
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
    }


def _check_free_outputs(lhs: tuple[sp.Symbol, ...], body: sp.Expr) -> None:
    """out[n] = Max(x[n], n): n is summed or maxed away, so the output has no axis n (the
    module returned a 0-d tensor). An output index must stay free on the right."""
    ranges = subscript_ranges(body)
    for i in lhs:
        if i not in body.free_symbols and ranges.get(i):
            raise LangError(
                f"index {i} is on the left-hand side, but the right-hand side sums or maxes over "
                "it: an output index must stay free (rename the reduced one)"
            )


def _check_view(source: str, dims: tuple[sp.Expr, ...], g: Graph, sizes: dict) -> None:
    """A view keeps every element: its dimensions are sizes, params and positive integers
    whose product is the source's (derived sizes replaced by what they are: D = C / n_head)."""
    known = set(sizes.values()) | set(g.params)
    for d in dims:
        if BATCH_INDEX in d.free_symbols:  # "..." reads as the batch index here
            raise LangError(
                f"a view of {source} with '...' in it: a view names every dimension of what "
                "it views, so it takes no batch dimensions (write the input's dimensions out)"
            )
        unknown = sorted(map(str, d.free_symbols - known))
        if unknown or not (d.free_symbols or (d.is_Integer and d > 0)):
            what = f"'{unknown[0]}' is not a size or param" if unknown else "not a positive int"
            raise LangError(f"view dimension '{d}' of {source}: {what}")
        floats = sorted(
            str(p) for p in d.free_symbols & set(g.params) if not isinstance(g.params[p], int)
        )
        if floats:
            raise LangError(f"view dimension '{d}' of {source}: param '{floats[0]}' is not an int")
        if not d.is_polynomial(*d.free_symbols) or sp.fraction(sp.together(d))[1] != 1:
            raise LangError(
                f"view dimension '{d}' of {source} divides: declare it as a size "
                f'(sizes={{"P": "{d}"}}, then view({source}, ..., P, ...)), so the forward checks '
                "that the division is whole"
            )

    def count(shape: tuple[sp.Expr, ...]) -> sp.Expr:
        total = sp.Mul(*shape)
        for _ in range(len(g.derived) + 1):
            total = total.xreplace(g.derived)
        return total

    got, want = count(dims), count(g.tensors[source].dims)
    if sp.simplify(got - want) != 0:
        shown = ", ".join(map(str, dims))
        raise LangError(
            f"view({source}, {shown}) has {got} elements, but {source} has {want}: a view keeps "
            "every element"
        )


def _check_name(name: str, role: str) -> None:
    problem = name_problem(name)
    if problem is not None:
        raise LangError(f"{role} name '{name}' {problem}")


def _parse_params(op: Op, g: Graph, sizes: dict[str, sp.Symbol]) -> dict[sp.Symbol, float | int]:
    params = {}
    for key, v in op.params.items():  # in the order declared: Function.apply takes them so
        _check_name(key, "param")
        if key in g.tensors:
            raise LangError(f"param '{key}' has the name of an input")
        if key in sizes:  # the forward binds N = x.shape[0] over the argument: silently unused
            raise LangError(f"param '{key}' has the name of a size; rename one of them")
        if isinstance(v, str) and v.isidentifier():  # an earlier param's: stride=kernel_size
            earlier = sp.Symbol(v, real=True)
            if earlier not in params:
                why = (
                    f"which is declared after it: declare '{v}' first"
                    if v in op.params
                    else "which is no param declared before it (a default is a number, or the "
                    "name of an earlier param)"
                )
                raise LangError(f"param '{key}' defaults to '{v}', {why}")
            params[sp.Symbol(key, real=True)] = params[earlier]
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise LangError(f"param '{key}' must be a number, got {type(v).__name__} {v!r}")
        if isinstance(v, float) and not math.isfinite(v):  # the module would hold a bare nan
            raise LangError(f"param '{key}' must be finite, got {v!r}")
        if isinstance(v, int) and v.bit_length() > 63:
            raise LangError(f"param '{key}' is an int of {v.bit_length()} bits; at most 63")
        # an int stays an int (it may set a size: n_head), so the signature reads n_head=4
        params[sp.Symbol(key, real=True)] = v if isinstance(v, int) else float(v)
    return params


def _namespace(
    tensors: dict[str, Tensor], sizes: dict[str, sp.Symbol], params: dict, declared: dict
) -> dict[str, object]:
    ns: dict[str, object] = {name: _checked_call(f) for name, f in FUNCTIONS.items()}
    for name in ("maximum", "minimum"):  # a nested one kept as written (ranges.nested)
        f = FUNCTIONS[name]
        ns[name] = _checked_call(f, kept_nested(f.make, f.node))
    ns.update({alias: ns[name] for alias, name in ALIASES.items()})
    ns.update(batch=BATCH_INDEX, Batch=BATCH_SIZE)
    ns.update(
        Sum=functools.partial(lang_sum, declared=declared),
        Max=functools.partial(lang_max, declared=declared),
    )
    ns.update({p.name: p for p in params})
    ns.update(sizes)
    ns.update({t.name: t.base if t.dims else t.whole for t in tensors.values()})
    return ns


def _checked_call(f, make=None):
    make = make or f.make

    def call(*args):
        if len(args) != f.arity:
            raise LangError(f"{f.name}() takes {f.arity} argument(s), got {len(args)}")
        return make(*args)

    return call


def _subscripts(text: str) -> set[str]:
    """Lower-case names used inside [...], at any depth: indices for sure (``e`` there is not
    Euler's e, nor in ``C[a[n], e]`` after a nested subscript, where a pattern for the
    innermost brackets missed it and Sum over e was refused as over 'E': found by probing)."""
    return {w for part in bracket_parts(text) for w in re.findall(r"\b[a-z_]\w*", part)}


def bracket_parts(text: str) -> list[str]:
    """What each [...] of ``text`` holds itself, a nested [...] left out: ``C[a[n], e]`` holds
    ``a , e`` and ``n``."""
    parts: list[list[str]] = []
    open_: list[int] = []
    for ch in text:
        if ch == "[":
            parts.append([])
            open_.append(len(parts) - 1)
        elif ch == "]":
            if open_:
                open_.pop()
            if open_:
                parts[open_[-1]].append(" ")
        elif open_:
            parts[open_[-1]].append(ch)
    return ["".join(p) for p in parts]


def _parse_rhs(text: str, ns: dict[str, object], lhs: str = "") -> sp.Expr:
    shown = text.strip()
    text = relations_as_calls(text.replace("...", "batch"))  # == and != compare values
    local = dict(ns, **RELATION_CALLS)
    as_index = _subscripts(text + lhs)
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
    except LangError:
        raise
    except TypeError as exc:
        if "not subscriptable" in str(exc):
            raise LangError(_not_subscriptable(text, local)) from None
        raise LangError(f"cannot parse '{shown}': {exc}") from None
    except Exception as exc:  # SymPy's parser raises many types; the user needs one message
        if "Rank mismatch" in str(exc):
            raise LangError(f"wrong number of indices in '{shown}': one per dimension") from None
        if "slice" in str(exc):
            raise LangError(
                f"cannot parse '{shown}': a slice (':') is no index of the op language; name "
                "the index and sum over it (Sum(x[n, c], c))"
            ) from None
        raise LangError(f"cannot parse '{shown}': {exc}") from None
    if isinstance(expr, (tuple, list, dict, set, sp.Tuple)):  # (a, b), {a: 1}: python's
        raise LangError(f"cannot parse '{shown}': a {type(expr).__name__} is no expression")
    undefined = sorted(str(f.func) for f in expr.atoms(sp.core.function.AppliedUndef))
    if undefined:
        raise LangError(_unknown_functions(undefined))
    expr = sp.sympify(expr)
    bare = _bare_tensors(expr)
    if bare:
        rank = len(bare[0].shape)
        raise LangError(
            f"tensor '{bare[0]}' is read without its indices: it has {rank} "
            f"dimension{'s' if rank != 1 else ''}, so read it as {bare[0]}[...] with one index each"
        )
    return expr


def written_sums(text: str, ns: dict[str, object]) -> list[sp.Expr]:
    """The sums a definition's text adds as one, each as SymPy reads it: every ``a + b`` and
    ``a - b`` of the right-hand side, ``(x - y) + c`` giving ``x - y`` and the whole.

    SymPy flattens ``(x - y) + c`` into one sum of three terms and forgets which two the text
    adds first; torch, running the text, adds them in its order, and that order is what a
    user writes for accuracy: ``expm1(d) - (y - x)`` with d = y - x is 5e-19 as written and 0
    added as ``(expm1(d) + x) - y``, a margin ``a - b + eps`` loses eps where a and b are
    large (found by probing). The lowering adds a written sum's terms first where a sum holds
    them (:func:`derive.lower.arithmetic.written_terms`). A part SymPy cannot read alone is
    left out: the order is a matter of rounding, never of value."""
    m = _DEF.match(text)
    if not m:
        return []
    rhs = relations_as_calls(m.group(3).replace("...", "batch"))
    lhs = f"[{m.group(2)}]" if m.group(2) else ""
    try:
        tree = ast.parse(rhs.strip(), mode="eval")
    except SyntaxError:
        return []
    sums = []
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
            try:
                e = read_definition(_parse_rhs(ast.unparse(node), ns, lhs))
            except (LangError, DerivationError, RecursionError):
                continue
            if isinstance(e, sp.Add):
                sums.append(e)
    return sums


def _exp_logs(text: str, ns: dict[str, object], g: Graph) -> list[Logged]:
    """:func:`derive.language.logs.exp_logs` of a definition's text: the factors of each
    log it adds inside an exp, which SymPy takes out of the exp, read as SymPy first reads
    them (before any rule: ``log(sigmoid(z))`` is taken out before it is a softplus)."""
    m = _DEF.match(text)
    if not m:
        return []
    lhs = f"[{m.group(2)}]" if m.group(2) else ""
    rhs = relations_as_calls(m.group(3).replace("...", "batch"))
    definitions = {s.name: s for s in g.steps if isinstance(s, Definition)}
    return exp_logs(rhs, lambda part: _parse_rhs(part, ns, lhs), definitions)


def _named(dim: sp.Expr, g: Graph) -> sp.Expr:
    """A view's dimension as the derived size it equals, where one does (``view(x, N, A*B)``
    beside ``sizes={"F": "A*B"}`` and ``W[F, H]``: one size, where an index over both was
    refused as running over two, A*B and F; found by probing)."""
    for size, value in g.derived.items():
        if not isinstance(dim, sp.Integer) and sp.expand(dim - value) == 0:
            return size
    return dim


def _bare_tensors(e: sp.Expr) -> list[sp.IndexedBase]:
    """The tensors ``e`` names without subscripts (``x[n, m] ** x``, ``out = x``): SymPy
    reads a bare IndexedBase as a symbol, which the checks below called an unknown name and
    the lowering could not lower, naming no definition."""
    if isinstance(e, sp.Indexed):
        return [b for sub in e.indices for b in _bare_tensors(sub)]
    if isinstance(e, sp.IndexedBase):
        return [e]
    found = []
    for arg in e.args:
        found += [b for b in _bare_tensors(arg) if b not in found]
    return found


def _not_subscriptable(text: str, names: dict[str, object]) -> str:
    """Why ``text`` subscripts something that is not a tensor: the first name before a '['
    that is no tensor with dimensions. A misspelled tensor is the commonest case, so the
    message names it and the closest known tensor, instead of SymPy's TypeError."""
    tensors = sorted(k for k, v in names.items() if isinstance(v, sp.IndexedBase))
    for word in re.findall(r"\b([A-Za-z_]\w*)\s*\[", text):
        known = names.get(word)
        if isinstance(known, sp.IndexedBase):
            continue
        if isinstance(known, sp.Symbol) and not known.is_integer:
            return f"'{word}' is 0-d (a 0-d tensor or a param): read it whole, without [...]"
        if isinstance(known, sp.Symbol) and known.is_positive:
            return f"'{word}' is a size, not a tensor: it takes no subscript"
        hint = did_you_mean(word, tensors)
        return f"unknown tensor '{word}': not an input or a definition above this one{hint}"
    return f"something subscripted in '{text.strip()}' is not a tensor"


def _rebound(s: sp.Symbol, lhs: tuple[sp.Symbol, ...], body: sp.Expr) -> str:
    """Why ``s`` is free where a Sum around it sums over an index of the left-hand side
    instead (``out[n] = Sum(x[n, m], n)``: inside, n is the Sum's own, and m is left
    over): the likelier slip is the Sum's index, so the hint names both; '' otherwise."""
    for total in body.atoms(sp.Sum):
        bound = [lim[0] for lim in total.limits if lim[0] in lhs]
        if bound and s in total.function.free_symbols:
            names = ", ".join(str(b) for b in bound)
            written = f"Sum({sp.sstr(total.function)}, {names})"
            return (
                f": {written} sums over {names}, which the left-hand side names too (inside "
                f"the Sum it is the Sum's own index); to sum over {s}, write Sum(..., {s})"
            )
    return ""


def _check_indices(lhs: tuple[sp.Symbol, ...], body: sp.Expr, known: set) -> None:
    free = {s for s in body.free_symbols if s not in known and not isinstance(s, sp.Indexed)}
    free -= {s for ind in body.atoms(sp.Indexed) for s in [ind.base.label]}
    used = {s for ind in body.atoms(sp.Indexed) for s in ind.indices if isinstance(s, sp.Symbol)}
    for s in sorted(free - set(lhs), key=str):
        if s.name[:1].isupper():
            raise LangError(f"unknown size '{s}': sizes are named in the inputs' shapes")
        if s not in used:
            raise LangError(
                f"unknown name '{s}': not an input, param, constant or index "
                f"(an index must subscript a tensor; functions: {known_names()})"
            )
        if s == BATCH_INDEX:  # the user wrote "...", never "batch"
            raise LangError(
                "'...' (the batch dimensions) is on the right-hand side but not on the left: "
                "write out[...] = ..., or Sum over '...' to reduce it"
            )
        raise LangError(
            f"index {s} is neither on the left-hand side nor summed{_rebound(s, lhs, body)}"
        )
    if len(set(lhs)) != len(lhs):
        raise LangError("an index appears twice on the left-hand side")


def _parse_definition(
    text: str, g: Graph, ns: dict, sizes: dict, ahead: dict[str, bool]
) -> Definition | View:
    problem = bracket_problem(text)
    if problem is not None:
        raise LangError(f"the definition has an {problem}")
    m = _DEF.match(text)
    if not m:
        raise LangError("expected 'name[i, j] = expression' or 'name = expression'")
    name, lhs_text, rhs = m.group(1), m.group(2), m.group(3)
    _check_name(name, "definition")
    called = _called(rhs)
    tensors = sorted(called & set(g.tensors))
    if tensors:  # x(n): SymPy's "'IndexedBase' object is not callable"
        raise LangError(
            f"'{tensors[0]}' is a tensor, read with brackets ({tensors[0]}[...]), not called"
        )
    unknown = called - set(ns) - set(RELATION_CALLS) - set(_PARSER_GLOBALS) - {"view"}
    if unknown:
        raise LangError(_unknown_functions(sorted(unknown)))
    problem = keyword_problem(text) or syntax_problem(text)
    if problem is not None:
        raise LangError(problem)
    if name in g.tensors:
        raise LangError(f"'{name}' is already defined")
    if name in sizes or sp.Symbol(name, real=True) in g.params:  # which would a read mean?
        kind = "size" if name in sizes else "param"
        raise LangError(f"definition '{name}' has the name of a {kind}; rename one of them")
    _check_order(name, rhs, ahead, g)
    view = _VIEW.match(rhs)
    if view:
        source = view.group(1)
        if source not in g.tensors:
            raise LangError(f"view of unknown tensor '{source}'")
        if not g.tensors[source].dims:
            raise LangError(f"view of a 0-d tensor '{source}': read it whole instead")
        dims = tuple(_named(_parse_rhs(d, ns), g) for d in view.group(2).split(","))
        _check_view(source, dims, g, sizes)
        g.tensors[name] = Tensor(name, dims, unbounded=g.tensors[source].unbounded)
        return View(name, source, text.strip())
    written = [s.strip() for s in (lhs_text or "").split(",") if s.strip()]
    odd = [s for s in written if s != "..." and not re.fullmatch(r"[A-Za-z_]\w*", s)]
    if odd:  # out[n, t + p] was an index named 't + p', "neither on the left-hand side..."
        raise LangError(
            f"the left-hand side's subscripts are index names (out[n, t]), not '{odd[0]}': "
            "shift the read on the right instead (out[n, t] = x[n, t - p])"
        )
    lhs = tuple(_index(s) for s in written)
    lhs = tuple(BATCH_INDEX if s.name == "..." else s for s in lhs)
    inside = bracket_parts(f"{rhs}[{lhs_text or ''}]")
    subscripts = {w for part in inside for w in re.findall(r"\b[A-Za-z_]\w*", part)}
    _check_index_names(inside, g)
    whole = sorted(w for w in subscripts if w in g.tensors and not g.tensors[w].dims)
    if whole:  # x[s], or out[n] beside a 0-d tensor n: a tensor's value is never an index
        raise LangError(
            f"'{whole[0]}' is a 0-d tensor, read whole: it cannot be a subscript or an index "
            "(rename the index)"
        )
    _check_tensors_as_indices(text, g)
    body = read_definition(_parse_rhs(rhs, ns, f"[{lhs_text}]" if lhs_text else ""))
    wholes = {t.whole for t in g.tensors.values() if not t.dims}  # 0-d tensors, read whole
    _check_indices(lhs, body, set(sizes.values()) | set(g.params) | wholes)
    _check_free_outputs(lhs, body)
    _check_data_use(body, g)
    check_affine_params(body, g.params)
    dims = tuple(range_of(i, body, g.ranges) for i in lhs)
    batched, unbounded = bool(lhs) and lhs[0] == BATCH_INDEX, may_be_infinite(body, g.tensors)
    g.tensors[name] = Tensor(name, dims, batched=batched, unbounded=unbounded)
    return Definition(name, lhs, body, text.strip())


def parse(op: Op, text_ranges: bool = True) -> Graph:
    """Parse an :class:`Op` into a :class:`Graph`; raise DerivationError on any problem.
    ``text_ranges=False``: no index's range read off the text where SymPy's evaluation cancels
    its read (:func:`_written_ranges`), as the language was when the fuzzer's seeds were
    drawn (it draws again where such an op is refused, so each seed keeps its op)."""
    problem = field_problem(op)
    if problem is not None:
        shown = op.name if isinstance(op.name, str) and len(op.name) <= 80 else "?"
        raise DerivationError(shown, problem)
    sizes: dict[str, sp.Symbol] = {}
    g = Graph(op, [], {}, {}, [], [], "")
    current = None
    try:
        for text in op.inputs:
            current = text
            t = _parse_input(text, sizes)
            if t.name in g.tensors:
                raise LangError(f"input '{t.name}' is declared twice")
            g.tensors[t.name] = t
            g.inputs.append(t.name)
        current = None
        clash = [t for t in g.inputs if t in sizes]
        if clash:  # the forward binds each size from a shape: it would replace the input
            raise LangError(f"input '{clash[0]}' has the name of a size; rename one of them")
        g.params = _parse_params(op, g, sizes)
        for name in _size_order(op.sizes):
            text = op.sizes[name]
            current = f"{name} = {text}"
            size = derived_size(name, text, sizes, g)
            g.derived[size] = parse_size_expr(text, sizes, g)
            if size in g.derived[size].free_symbols:
                raise LangError(f"size '{name}' = {text} reads itself")
        current = None
        g.ranges = parse_ranges(op.ranges, sizes)
        constants: dict[str, Definition] = {}  # definitions that read no tensor (constants)
        sums: list[sp.Expr] = []
        logs: list[Logged] = []
        declared = g.ranges
        for k, text in enumerate(op.definitions):
            current = text
            # an index's range as the text subscripts it, where SymPy's evaluation drops the
            # read (x[n] - (x[n] - 1) is 1: "cannot infer the range of n", found by probing)
            written = _written_ranges(text, g, sizes) if text_ranges else {}
            g.ranges = Ranges(written, declared)
            ns = _namespace(g.tensors, sizes, g.params, g.ranges)
            try:
                step = _parse_definition(text, g, ns, sizes, _defined_names(op.definitions[k:]))
            finally:
                g.ranges = declared
            if isinstance(step, Definition):
                sums += written_sums(text, ns)
                logs += _exp_logs(text, ns, g)
            if isinstance(step, View) and step.source in constants:
                raise LangError(
                    f"'{step.source}' reads no tensor, a constant taken into its readers: "
                    "read it with indices instead of a view"
                )
            if isinstance(step, Definition):
                body = taken_in(step.body, constants, g.tensors)
                maxima = [
                    s.name for s in g.steps if isinstance(getattr(s, "body", None), ReduceMax)
                ]
                body = shifted_logsumexps(body, g.tensors, maxima)
                took, step = body != step.body, Definition(step.name, step.indices, body, step.text)
                if not tensor_reads(body, g.tensors):
                    if k == len(op.definitions) - 1:
                        only = ", only definitions that read none" if took else ""
                        raise LangError(
                            f"the right-hand side reads no tensor{only}: nothing to differentiate"
                        )
                    constants[step.name] = step
                    continue
            g.steps.extend(lift_maxes(step, g, set(sizes.values())))
        current = None
        check_ranges_used(g.ranges, g.steps + list(constants.values()))
        for name in constants:  # no step computes them: their readers hold their values
            del g.tensors[name]
        g.taken = tuple(constants.values())
        g.sums = tuple(dict.fromkeys(sums))
        g.logs = tuple(dict.fromkeys(logs))
    except LangError as exc:
        raise DerivationError(op.name, str(exc), current) from None
    except RecursionError:  # SymPy's parser and printer recurse once per term or parenthesis
        raise DerivationError(op.name, "too deeply nested to read; split it", current) from None
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
