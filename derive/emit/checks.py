"""The input checks of a generated forward, as data for the template.

In: the parsed :class:`~derive.language.Graph`; out: the lines forward() runs before any
kernel (dtype, rank and size checks, each size bound to a name once, positivity of divisors,
ranges of data indices), each a :class:`~derive.emit.statements.Code` that says what it
writes and reads, and which of them survive: a size binding nothing reads is dropped, decided
on those declared names, never by reading the text back.
"""

from __future__ import annotations

from collections.abc import Iterable

import sympy as sp

from derive.emit.sizes import floor_parts, size_code
from derive.emit.statements import Code, names_read, size_binding
from derive.emit.window_checks import param_checks, window_sizes
from derive.language import Definition, Graph, ReduceMax, Tensor
from derive.language.argmax import radix_checks
from derive.language.guards import Ignored, data_guards
from derive.language.ranges import entries_read
from derive.names import BATCH_SHAPE


def rest_dims(t: Tensor) -> tuple:
    return t.dims[1:] if t.batched else t.dims


def elementwise(g: Graph) -> bool:
    """Every tensor is the ``...`` axis alone, nothing reduces or indexes by data.

    Then the code works on any shape as it is and the flatten/unflatten reshapes are skipped.
    """
    if not all(t.batched and len(t.dims) == 1 for t in g.tensors.values()):
        return False
    for step in g.steps:
        if not isinstance(step, Definition) or step.body.has(sp.Sum, ReduceMax):
            return False
        subscripts = [i for ind in step.body.atoms(sp.Indexed) for i in ind.indices]
        if not all(isinstance(i, sp.Symbol) for i in subscripts):
            return False
    return True


def output_expr(g: Graph, flat: bool) -> Code:
    # the saved tensors stay flat; only the returned output gets the caller's batch shape back
    if g.tensors[g.output].batched and flat:
        code = f"{g.output}.reshape(tuple({BATCH_SHAPE}) + tuple({g.output}.shape[1:]))"
        return Code(code, reads={g.output, BATCH_SHAPE})
    return Code(g.output, reads={g.output})


def _sizes(*exprs: sp.Expr | str) -> set[str]:
    """The names a size expression's code reads: its symbols (a string is one name)."""
    names: set[str] = set()
    for e in exprs:
        names |= {e} if isinstance(e, str) else {s.name for s in sp.sympify(e).free_symbols}
    return names


def _call(helper: str, args: str, *reads: sp.Expr | str) -> Code:
    """``helper(args)``, a check the module defines, reading ``reads``."""
    return Code(f"{helper}({args})", reads=_sizes(helper, *reads))


def first_float(g: Graph) -> str:
    """The input other inputs must match in dtype and device, and new tensors are made like."""
    return next(n for n in g.inputs if not g.tensors[n].integer)


def param_signature(g: Graph) -> list[str]:
    """The params as a signature declares them, ``eps=1e-05``; one whose default is an earlier
    param's (:meth:`~derive.language.Op.defaults_from`) as ``stride=None``, which
    :func:`default_lines` and ``_bound`` resolve."""
    taken = g.op.defaults_from()
    return [f"{p.name}={'None' if p.name in taken else repr(v)}" for p, v in g.params.items()]


def param_values(g: Graph) -> list[str]:
    """Each param's value once bound, as one expression of the arguments: its name, or
    ``kernel_size if stride is None else stride`` where its default is an earlier param's,
    that one's own expression where it has a default of the kind too (c defaulting to b
    defaulting to a: ``(a if b is None else b) if c is None else c``)."""
    taken, values = g.op.defaults_from(), {}
    for p in g.params:
        if p.name in taken:
            earlier = values[taken[p.name]]
            earlier = f"({earlier})" if " " in earlier else earlier
            values[p.name] = f"{earlier} if {p.name} is None else {p.name}"
        else:
            values[p.name] = p.name
    return list(values.values())


def default_lines(g: Graph) -> list[Code]:
    """``stride = kernel_size if stride is None else stride``, first in a function that takes
    the params: torch's pools take the stride from the kernel unless it is given."""
    return [
        Code(f"{k} = {v} if {k} is None else {k}", {k}, {k, v})
        for k, v in g.op.defaults_from().items()
    ]


def input_checks(
    g: Graph, flat: bool, wrapping: set[str] = frozenset()
) -> tuple[list[Code], dict[sp.Symbol, str]]:
    """Type, shape and size checks for the inputs; binds every size symbol to a name.

    Int inputs read by advanced indexing (``wrapping``: it wraps negative indices silently)
    are range-checked on every device; the others only where no kernel rejects a bad index.
    """
    lines, bound, have_batch, composite, like = default_lines(g), {}, False, [], []
    first = first_float(g)
    for name in g.inputs:
        t = g.tensors[name]
        rest = len(rest_dims(t))
        args = f"{name!r}, {name}, {rest}, {t.integer}, {t.batched}"
        lines.append(_call("_check_input", args, name))
        if name != first:  # mixed dtypes or devices: say so here, not in a kernel's words
            args = f"{name!r}, {name}, {first!r}, {first}, {not t.integer}"
            like.append(_call("_check_like", args, name, first))
        if t.batched:
            shape = f"{name}.shape[: {name}.dim() - {rest}]" if rest else f"{name}.shape"
            if have_batch:
                lines.append(
                    _call("_check_batch", f"{name!r}, {shape}, {BATCH_SHAPE}", name, BATCH_SHAPE)
                )
            else:
                lines.append(Code(f"{BATCH_SHAPE} = {shape}", {BATCH_SHAPE}, {name}, binds=True))
                have_batch = True
            # the batch size by number: (-1, 0) is ambiguous when a size is 0 (softmax's C = 0);
            # math.prod, not Size.numel(): under torch.export a dynamic batch stays symbolic
            tail = f"(math.prod({BATCH_SHAPE}),) + tuple({name}.shape[{name}.dim() - {rest}:])"
            tail = tail if rest else "-1"
            if flat:
                reads = {name, BATCH_SHAPE} if rest else {name}
                lines.append(Code(f"{name} = {name}.reshape({tail})", {name}, reads))
        for pos, dim in enumerate(t.dims):
            if not flat and t.batched and pos == 0:
                continue  # the batch axes stay as they are
            if not isinstance(dim, sp.Symbol) or dim in g.derived:
                composite.append((name, pos, dim))  # checked once its sizes are bound
                continue
            if dim in bound:
                args = f"{name!r}, {pos}, {name}.shape[{pos}], {dim.name!r}, {dim}"
                lines.append(_call("_check_size", args, name, dim))
            else:
                lines.append(Code(f"{dim} = {name}.shape[{pos}]", {dim.name}, {name}, binds=True))
                bound[dim] = dim.name
    lines += [_call("_check_param", f"{p.name!r}, {p.name}", p) for p in g.params]
    lines += param_checks(g)
    # sizes of params alone first (H = n_head), so that a product with one (x[N, H*D]) gives
    # the other; a NameError at every call before (found by probing)
    early: list[sp.Symbol] = []  # in g.derived's order, each after the sizes it reads
    for d, e in g.derived.items():
        if e.free_symbols <= set(g.params) | set(bound) | set(early):
            early.append(d)
    lines += _derived_lines(g, early)
    bound.update({d: d.name for d in early})
    lines += _solved_sizes(composite, bound, set(g.params))
    lines += _derived_lines(g, [d for d in g.derived if d not in early])
    lines += like
    for name, pos, dim in composite:  # e.g. W1[T*E, H]: checked once T and E are known
        shown = f"{dim} = {size_code(g.derived[dim])}" if dim in g.derived else str(dim)
        args = f"{name!r}, {pos}, {name}.shape[{pos}], {shown!r}, {size_code(dim)}"
        lines.append(_call("_check_size", args, name, dim))
    for size, why in _positive_sizes(g):
        lines.append(_call("_check_positive", f"{str(size)!r}, {size_code(size)}, {why!r}", size))
    guarded = data_guards(g)
    for name, size in data_index_ranges(g):
        lines.append(_range_line(name, size, name not in wrapping, guarded.get(name)))
    return lines, bound


def _range_line(name: str, size: sp.Expr, before: bool, ignored: Ignored | None) -> Code:
    """``_check_range``: before the kernels only where none would reject a bad entry (see the
    helper), and on every device where the read is clamped to hide one: the exact values a
    ``t != -1`` ignores admit a -2 to no kernel (a clamp reads it as 0)."""
    flags = ""
    if ignored is not None and ignored.negative:
        flags = ", guarded=True"
    elif ignored:
        flags, before = f", ignored={tuple(sorted(ignored.values))!r}", False
    flags = (", before=True" if before else "") + flags
    return _call(
        "_check_range", f"{name!r}, {name}, {str(size)!r}, {size_code(size)}{flags}", name, size
    )


def _derived_line(
    size: sp.Symbol, text: str, num, den, num_text: str, den_text: str, reads: Iterable[str]
) -> Code:
    """``size = num / den`` (``num``, ``den`` reading ``reads``), checked a positive whole
    number by the module's helper."""
    code = (
        f"{size} = _check_derived({size.name!r}, {text!r}, {size_code(num)}, {size_code(den)}, "
        f"{num_text!r}, {den_text!r})"
    )
    return Code(code, {size.name}, {"_check_derived", *reads})


def _solved_sizes(composite: list, bound: dict, params: set) -> list[Code]:
    """A size seen only inside a product (M of ``x[N, 3*M]``) is the dimension divided by the
    rest of the product (numbers, bound sizes, int params), checked whole like a derived
    size."""
    lines = []
    for name, pos, dim in composite:
        unknown = [s for s in dim.free_symbols if s not in bound]
        if len(unknown) != 1 or not isinstance(dim, sp.Mul):
            continue
        (size,) = unknown
        rest = dim / size
        known = bound.keys() | params
        if rest.has(size) or not all(f.is_Integer or f in known for f in sp.Mul.make_args(rest)):
            continue
        got = f"{name}.shape[{pos}]"
        text = f"{got} / {rest}"
        lines.append(_derived_line(size, text, got, rest, got, str(rest), _sizes(name, rest)))
        bound[size] = size.name
    return lines


def _derived_lines(g: Graph, sizes: list[sp.Symbol]) -> list[Code]:
    """``D = C / n_head`` for each of ``sizes``, bound once the sizes it reads are: a positive
    whole number, or one line naming the op (``C = 10 is not divisible by n_head = 3``)."""
    lines = []
    for size in sizes:
        expr = g.derived[size]
        if isinstance(expr, sp.Add) or expr.has(sp.floor):  # L = (T - K) // S + 1
            code = size_code(expr)
            for f in sorted(expr.atoms(sp.floor), key=str):  # (T - K) // S: S > 0 first
                den = floor_parts(f)[1]
                if not den.is_Integer and den not in g.params:  # a param's: param_checks
                    why = f"it divides in {size} = {code}"
                    args = f"{str(den)!r}, {size_code(den)}, {why!r}"
                    lines.append(_call("_check_positive", args, den))
            lines.append(Code(f"{size} = {code}", {size.name}, _sizes(expr)))
            args = f"{size.name!r}, {size}, {f'{size} = {code}'!r}"
            lines.append(_call("_check_positive", args, size))
            continue
        num, den = sp.fraction(expr)
        text = str(expr).replace("/", " / ")
        lines.append(_derived_line(size, text, num, den, str(num), str(den), _sizes(expr)))
    return lines


def _positive_sizes(g: Graph) -> list[tuple[sp.Expr, str]]:
    """Size expressions that must be positive at run time: divisors (batchnorm's N - 1, a
    mean's N), the extent of a Max, what a window reads (:mod:`.window_checks`), and an axis
    one entry of which is read (``h[b, 1, c]``: S - 1). torch would give NaN or a kernel's
    error instead."""
    sizes, found, entries = set(g.sizes), {}, {}
    for step in g.steps:
        if not isinstance(step, Definition):
            continue
        for p in sorted(step.body.atoms(sp.Pow), key=sp.default_sort_key):
            polynomial = p.base.is_polynomial(*sizes) and not p.base.atoms(sp.Function)
            if (
                p.exp.is_negative
                and p.base.free_symbols
                and p.base.free_symbols <= sizes
                and polynomial
            ):
                found.setdefault(p.base, "it divides")
        for r in sorted(step.body.atoms(ReduceMax), key=sp.default_sort_key):
            for _, lo, hi in r.limits:
                found.setdefault(hi - lo + 1, "a Max runs over it")
            for gap, radix, extent in radix_checks(r):  # W - K + 1: two positions, one argmax
                why = f"a Max's argmax counts in {radix}, so its window ({extent}) must fit in it"
                found.setdefault(gap, why)
    for size, need, ind, pos in entries_read(g.steps):  # h[b, 1, c], h[b, S - 2, c]: S >= 2
        if need > entries.get(size, (0, ""))[0]:
            entries[size] = (need, f"{ind} reads entry {pos} of an axis of size {size}")
    for size, (need, why) in entries.items():
        found.setdefault(size - need + 1, why)
    for size, why in window_sizes(g).items():
        found.setdefault(size, why)
    return sorted(found.items(), key=lambda item: str(item[0]))


def range_checks(g: Graph) -> list[Code]:
    """The checks forward() runs when an index kernel fails, to name the bad input."""
    guarded = data_guards(g)
    return [_range_line(n, s, False, guarded.get(n)) for n, s in data_index_ranges(g)]


def data_index_ranges(g: Graph) -> list[tuple[str, sp.Expr]]:
    """(integer input, the size its values index into), from every data-dependent subscript."""
    found = []
    for step in g.steps:
        if not isinstance(step, Definition):
            continue
        for ind in sorted(step.body.atoms(sp.Indexed), key=sp.default_sort_key):
            for pos, sub in enumerate(ind.indices):
                if (
                    isinstance(sub, sp.Indexed)
                    and (sub.base.label.name, ind.base.shape[pos]) not in found
                ):
                    found.append((sub.base.label.name, ind.base.shape[pos]))
    return found


def live_bindings(checks: list[Code], later: list) -> list[Code]:
    """Drop size and batch-shape bindings (``E = C.shape[1]``, ``batch_shape = x.shape``) that
    no later check, forward line, output or saved name reads: decided on the names each line
    says it reads, not by matching text."""
    read = [names_read(line) for line in checks + later]
    kept = []
    for k, line in enumerate(checks):
        bound = size_binding(line)
        if bound is None or any(bound in names for names in read[k + 1 :]):
            kept.append(line)
    return kept
