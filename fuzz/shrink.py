"""Shrink a wrong case to a minimal op that still fails the same way.

Greedy, first improvement: try dropping the tail of the op (an earlier definition becomes the
output), dropping one definition, and in each definition's body replacing one node by one of its
operands (drop a term of a sum or a factor of a product, unwrap a function or a power); keep
the first candidate whose verdict is still ``wrong`` with the same kind, and start again.
Inputs and params that nothing reads any more are dropped. Every candidate is re-parsed, so
a shrunk op is always a valid op file.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Callable, Iterator

import sympy as sp
from sympy.printing.str import StrPrinter

from derive.errors import DerivationError
from derive.language import Definition, Op, ReduceMax, parse
from fuzz.affine import in_text
from fuzz.check import Outcome, run_case
from fuzz.functions import elementwise_extremes


class OpPrinter(StrPrinter):
    """SymPy expressions back into the op language: ``Sum(f, k)``, ``Max(f, c)``."""

    def _print_Sum(self, e: sp.Sum) -> str:
        return f"Sum({self._print(e.function)}, {', '.join(str(v) for v, *_ in e.limits)})"

    def _print_ReduceMax(self, e: ReduceMax) -> str:
        return f"Max({self._print(e.function)}, {', '.join(str(v) for v, *_ in e.limits)})"

    def _print_Max(self, e: sp.Max) -> str:
        return self._extreme(e, 0)

    def _print_Min(self, e: sp.Min) -> str:
        return self._extreme(e, 1)

    def _extreme(self, e, which: int) -> str:
        name = elementwise_extremes()[which]  # (maximum, minimum)
        args = [self._print(a) for a in e.args]
        out = args[0]
        for a in args[1:]:
            out = f"{name}({out}, {a})"
        return out


def _print(expr: sp.Expr) -> str:
    return OpPrinter().doprint(expr)


def _lhs(text: str) -> str:
    return text.split("=", 1)[0].strip()


def _nodes(expr: sp.Basic) -> Iterator[sp.Basic]:
    yield expr
    for a in expr.args:
        if isinstance(a, sp.Basic) and not isinstance(a, (sp.Indexed, sp.Tuple)):
            yield from _nodes(a)


def _smaller(node: sp.Basic) -> Iterator[sp.Basic]:
    """What one node may be replaced by: an operand dropped, a function or power unwrapped."""
    if isinstance(node, (sp.Add, sp.Mul)):
        for i in range(len(node.args)):
            yield node.func(*(node.args[:i] + node.args[i + 1 :]))
    elif isinstance(node, sp.Pow):
        yield node.base
    elif isinstance(node, (sp.Function, sp.Max, sp.Min)):
        yield from node.args


def _replacements(body: sp.Expr) -> Iterator[sp.Expr]:
    """Bodies with one node replaced by something smaller. A replacement SymPy cannot build
    (a where()'s condition unwrapped into sin(): sin(x >= y)) is no candidate."""
    for node in _nodes(body):
        for small in _smaller(node):
            try:
                yield body.xreplace({node: small})
            except (AttributeError, TypeError, ValueError):
                continue


def _candidates(op: Op) -> Iterator[Op]:
    yield prune(op)
    defs = list(op.definitions)
    for k in range(len(defs) - 1):  # an earlier definition becomes the output
        yield in_text(dataclasses.replace(op, definitions=defs[: k + 1]))
    for k in range(len(defs) - 1):  # a range only the dropped one used goes with it
        yield in_text(dataclasses.replace(op, definitions=defs[:k] + defs[k + 1 :]))
    if op.stepwise:
        yield dataclasses.replace(op, stepwise=False)
    try:
        graph = parse(op)
    except DerivationError:
        return
    for k, step in enumerate(graph.steps):
        if not isinstance(step, Definition):
            continue
        seen = {step.body}
        for body in _replacements(step.body):
            if body in seen or body.is_number:
                continue
            seen.add(body)
            text = f"{_lhs(defs[k])} = {_print(body)}"
            yield in_text(dataclasses.replace(op, definitions=defs[:k] + [text] + defs[k + 1 :]))


def prune(op: Op) -> Op:
    """Drop inputs and params that no definition or derived size reads, declared ranges of
    indices no definition has, and derived sizes nothing names (a candidate: each may be
    needed after all)."""
    op = in_text(op)
    try:
        graph = parse(op)
    except DerivationError:
        return op
    read: set[str] = set()
    indices: set[str] = set()  # bound ones too
    for step in graph.steps:
        if isinstance(step, Definition):
            indices |= {s.name for s in step.body.atoms(sp.Symbol)}
            read |= {b.label.name for b in step.body.atoms(sp.IndexedBase)}
            read |= {s.name for s in step.body.free_symbols}
        else:
            read.add(step.source)
    inputs = [t for t, name in zip(op.inputs, graph.inputs) if name in read]
    read |= {s.name for size in graph.derived.values() for s in size.free_symbols}
    params = {k: v for k, v in op.params.items() if k in read}
    ranges = {i: s for i, s in op.ranges.items() if i in indices}
    words = set(re.findall(r"\w+", " ".join([*inputs, *ranges.values(), *op.definitions])))
    sizes = {k: v for k, v in op.sizes.items() if k in words}
    return dataclasses.replace(op, inputs=inputs, params=params, ranges=ranges, sizes=sizes)


def shrink(
    op: Op,
    seed: int,
    failure: Outcome,
    budget: float = 90.0,
    max_checks: int = 150,
    judge: Callable[..., Outcome] = run_case,
) -> tuple[Op, Outcome]:
    """The smallest op found that still fails as ``failure`` did (same status and kind) when
    ``judge`` (the value check, or range mode's) runs it."""
    start, checks, best, best_outcome = time.perf_counter(), 0, op, failure
    improved = True
    while improved and checks < max_checks and time.perf_counter() - start < budget:
        improved = False
        for cand in _candidates(best):
            if cand == best:
                continue
            checks += 1
            outcome = judge(cand, seed, timeout=30.0)
            if outcome.status == failure.status and outcome.kind == failure.kind:
                best, best_outcome, improved = cand, outcome, True
                break
            if checks >= max_checks or time.perf_counter() - start >= budget:
                break
    return best, best_outcome
