"""The logs a definition's text adds inside an exp: ``exp(x + log(keep) - m)``.

SymPy takes a term out of an exp the moment that term's exp evaluates, and ``exp(log(u))``
is u: the masked softmax written ``exp(x + log(keep) - m)`` is ``keep exp(x - m)`` to SymPy,
the moment it is read or a definition ``s = x + log(keep)`` is inlined into ``exp(s - m)``.
The two are equal as real numbers, not as floats: where keep = 0 the text's exp is
``exp(-inf) = 0``, and SymPy's product is ``0 * inf = nan`` once ``x - m > 709`` (a masked
logit of 1e4; found by probing). Where u is tiny and x - m large, the text's exp is finite
and the product ``u * inf``.

:func:`exp_logs` records each such u, a factor of the logged expression at a time (``log(u
v)`` gives u and v: SymPy takes out ``u v``), with the tensors the rest of that exp's
argument reads; the lowering puts u back in an exp that reads them
(:func:`derive.lower.logged.logged_exps`; the saving keeps such an exp beside its factor,
:mod:`derive.symbolic.saving`): ``u**c exp(a)`` computed as ``sign(u)**c exp(a + c log|u|)``,
``exp(a + c log(u))`` where u is known nonnegative. Equal to the product for every real u,
so a u the text logs under a guard, ``where(k > 0, exp(x + log(k)), k exp(x))`` (which SymPy
merges into ``k exp(x)``), keeps its sign where it is negative (found by probing the rule).
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping

import sympy as sp

from derive.language.graph import Definition, ReduceMax

Logged = tuple[sp.Expr, frozenset[str]]  # a logged factor, the tensors its exp reads besides


def exp_logs(
    rhs: str,
    read: Callable[[str], sp.Expr],
    definitions: Mapping[str, Definition],
) -> list[Logged]:
    """Each factor u of every ``log(u)`` that ``rhs`` (a definition's right-hand side) adds
    into an exp's argument, ``c log(u)`` for a number c included, with the tensors the rest
    of that argument reads: written there, or added by a definition the argument reads
    (``exp(s - m)`` with ``s = x + log(keep)``, or ``s = log(keep)``), through any chain of
    them. ``read`` parses a part of the text as SymPy reads it, no rule applied (an
    exception: a part it cannot read alone is skipped, the order of evaluation is a matter
    of range, never of value)."""
    try:
        tree = ast.parse(rhs.strip(), mode="eval")
    except SyntaxError:
        return []
    found: list[Logged] = []
    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "exp"
            and len(node.args) == 1
        ):
            continue
        try:
            arg = read(ast.unparse(node.args[0]))
        except Exception:  # noqa: BLE001 (the parser's many types; see the docstring)
            continue
        logs, rest = added_logs(arg, definitions)
        found += [(u, read_names(rest)) for u in logs]
    return found


def added_logs(
    e: sp.Expr, definitions: Mapping[str, Definition], depth: int = 0
) -> tuple[list[sp.Expr], sp.Expr]:
    """The factors of each term ``c log(u)`` of the sum ``e``, and of the definitions whose
    tensors ``e`` adds (their indices put in), to a depth of 32 definitions; and the sum of
    ``e``'s other terms, those definitions' read through."""
    logs: list[sp.Expr] = []
    rest: list[sp.Expr] = []
    for term in sp.Add.make_args(e):
        c, part = term.as_coeff_Mul()
        if isinstance(part, sp.log):
            logs += [f.as_base_exp()[0] for f in sp.Mul.make_args(part.args[0])]
            continue
        step = _definition_read(part, definitions)
        if step is None or depth >= 32:
            rest.append(term)
            continue
        indices = part.indices if isinstance(part, sp.Indexed) else ()
        body = step.body.xreplace(dict(zip(step.indices, indices, strict=True)))
        inner, left = added_logs(body, definitions, depth + 1)
        logs += inner
        rest.append(c * left)
    return [u for u in logs if not u.is_number], sp.Add(*rest)


def _definition_read(e: sp.Expr, definitions: Mapping[str, Definition]) -> Definition | None:
    """The definition ``e`` reads whole (``s[n, c]`` of ``s[n, c] = ..``, a 0-d ``s``), but a
    Max; else None."""
    if isinstance(e, sp.Indexed):
        step = definitions.get(e.base.label.name)
        if step is None or len(step.indices) != len(e.indices):
            return None
    elif isinstance(e, sp.Symbol):
        step = definitions.get(e.name)
        if step is None or step.indices:
            return None
    else:
        return None
    return None if isinstance(step.body, ReduceMax) else step


def logged_key(u: sp.Expr) -> sp.Expr:
    """``u`` with its indices renamed in the order they first subscript (``keep[n, c]`` and
    ``keep[n, k]`` are one key): a factor of a derived product is the text's u under other
    index names. Sizes (positive) keep their names."""
    seen: list[sp.Symbol] = []
    for node in sp.preorder_traversal(u):
        if isinstance(node, sp.Indexed):
            for i in node.indices:
                for s in sorted(i.free_symbols, key=str):
                    if isinstance(s, sp.Symbol) and not s.is_positive and s not in seen:
                        seen.append(s)
    return u.xreplace({s: sp.Symbol(f"_i{k}", integer=True) for k, s in enumerate(seen)})


def read_names(e: sp.Expr) -> frozenset[str]:
    """The tensors ``e`` reads, by subscript or whole (a 0-d one); indices and sizes, whose
    names differ from one statement to the next, are no reads."""
    return frozenset(i.base.label.name for i in e.atoms(sp.Indexed)) | {
        s.name for s in e.atoms(sp.Symbol) if not s.is_integer
    }


def logged_factors(
    e: sp.Mul, logged: Mapping[sp.Expr, list[frozenset[str]]], exp: sp.Expr | None
) -> list[tuple[sp.Expr, sp.Expr]]:
    """``(factor, base)`` for each factor ``base**c`` (c a number) of the product ``e`` whose
    base is :func:`logged_key`-among ``logged``, where ``exp`` (an exp factor beside it;
    None: any exp) reads every tensor the text's exp read besides the log."""
    if not logged:
        return []
    reads = read_names(exp.args[0]) if exp is not None else None
    out = []
    for f in e.args:
        base = f.as_base_exp()[0] if isinstance(f, sp.Pow) and f.exp.is_number else f
        if base.is_number or isinstance(base, sp.exp):
            continue
        # |u| too: an exp taken back in, exp(a + log|u|), rebuilt by SymPy is |u| exp(a)
        inner = base.args[0] if isinstance(base, sp.Abs) else base
        wanted = logged.get(logged_key(inner))
        if wanted is None:
            continue
        if reads is None or any(w <= reads for w in wanted):
            out.append((f, base))
    return out
