"""Forward mode in the module: the derived tangent map lowered into ``_jvp``.

:mod:`derive.symbolic.forward_mode` states the tangent of every tensor; here the tangent graph
(the forward's steps, then the tangent steps) is lowered as a forward is, into one function

    _jvp(*inputs, *tangents, **params) -> the output's tangent

which the template's ``Function.jvp`` calls (``torch.func.jvp``, ``jacfwd``, ``hessian``,
``torch.autograd.forward_ad``). It runs the forward again rather than read saved tensors: a
tangent is asked for right after the forward, and a function of the inputs alone is one every
transform may differentiate again. An op whose tangent cannot be derived gets a module that
says so, and whose ``jvp`` raises one line naming the op.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field

import sympy as sp

from derive.emit.checks import (
    data_index_ranges,
    elementwise,
    first_float,
    input_checks,
    live_bindings,
    output_expr,
    param_signature,
)
from derive.emit.double import _tuple
from derive.emit.statements import names_read
from derive.errors import DerivationError, EngineBug
from derive.ir.printer import called_helpers
from derive.language import BATCH_SIZE, Definition, ReduceMax
from derive.language.argmax import Digits
from derive.language.guards import data_guards, guarded_data
from derive.lower.lowerer import Lowerer
from derive.symbolic.derivation import Derivation
from derive.symbolic.forward_mode import Tangents, tangent_graph
from derive.symbolic.seeds import gated_tangents


@dataclass
class JvpData:
    """What the template's ``_jvp`` and ``Function.jvp`` need, as code strings."""

    error: str  # why forward mode was not derived ("" when it was)
    inputs: list[str]  # the op's inputs, in order
    tangents: list[int] = field(default_factory=list)  # positions of the inputs with a tangent
    params: list[str] = field(default_factory=list)
    signature: str = ""
    check_lines: list[str] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    output: str = ""
    steps: list = field(default_factory=list)  # the tangent steps, Definitions and Views
    helpers: set[str] = field(default_factory=set)
    modules: set[str] = field(default_factory=set)
    present: bool = False  # whether ``_jvp`` takes ``present``: a term only some tangents reach

    @property
    def formulas(self) -> list[str]:
        """The tangent steps as the module's docstring lists them."""
        return [s.text for s in self.steps]

    @property
    def call(self) -> str:
        """``_jvp``'s arguments inside ``Function.jvp``: the inputs, each float input's tangent
        (zeros where the caller gave none), the params, and which tangents were given where
        ``_jvp`` reads a term only some reach (:func:`~derive.symbolic.seeds.gated_tangents`)."""
        tangents = [f"_tangent({k}, {self.inputs[k]}, tangents)" for k in self.tangents]
        params = [f"{p}=ctx.params[{k}]" for k, p in enumerate(self.params)]
        given = [f"tangents[{k}] is not None" for k in self.tangents]
        present = [f"present={_tuple(given)}"] if self.present else []
        return ", ".join([*self.inputs, *tangents, *params, *present])


def max_ranges(steps: list, argmaxes: Mapping[str, str]) -> dict[str, sp.Expr | Digits]:
    """Each saved argmax's largest value: a Max over ``c = 0..hi`` is taken by torch's
    ``.max`` along an axis of hi + 1 entries, whose index lies in ``0..hi`` (a Max from another
    low bound is left out). ``argmaxes``: a Max definition's name -> its argmax tensor's. The
    backward's lowering and the tangent's both read it: a window read at ``S*i + argmax`` is
    then shown inside x, no clamp, no mask. A Max over several indices gives the largest value
    of each digit of its argmax (:class:`~derive.language.argmax.Digits`)."""
    ranges: dict[str, sp.Expr | Digits] = {}
    for step in steps:
        if isinstance(step, Definition) and isinstance(step.body, ReduceMax):
            if step.name not in argmaxes:
                continue
            if len(step.body.limits) > 1:  # one int over several indices: each digit's range
                ranges[argmaxes[step.name]] = Digits.of(step.body)
                continue
            _var, lo, hi = step.body.limits[0]
            if lo == 0:
                ranges[argmaxes[step.name]] = hi
    return ranges


def _lines(tg: Tangents, flat: bool) -> tuple[list[str], Lowerer]:
    g = tg.graph
    known = set(g.tensors) | {s.name for s in g.sizes} | {p.name for p in g.params}
    scalars = {s.name for s in g.sizes} | {p.name for p in g.params}
    lw = Lowerer(
        g.op.name,
        known,
        {},
        scalars=scalars,
        device_of=first_float(g),
        guarded=guarded_data(g),
        derived=g.derived,
        data_ranges=max_ranges(tg.graph.steps, tg.argmaxes),
        checked=set(data_index_ranges(g)),
        integers={n for n, t in g.tensors.items() if t.integer} | set(tg.argmaxes.values()),
        finite=set(g.inputs),
        params={p.name: v for p, v in g.params.items()},
        steps=g.steps,
        sums=g.sums,
        logs=g.logs,
    )
    lw.share([s.body for s in g.steps if isinstance(s, Definition)])
    for step in g.steps:
        t = g.tensors[step.name]
        if not isinstance(step, Definition):
            lw.reshape(step.name, step.source, t.dims)
        elif isinstance(step.body, ReduceMax):
            argmax = tg.argmaxes.get(step.name)
            lw.reduce_max(step.name, step.body, step.indices, t.dims, argmax, step.text)
        else:
            lw.assign(step.name, step.body, step.indices, t.dims)
    lw.returns(output_expr(g, flat).reads)
    return lw.lines, lw


def _lowered(tg: Tangents) -> tuple[bool, list[str], Lowerer]:
    flat = not elementwise(tg.graph)
    lines, lw = _lines(tg, flat)
    if not flat and BATCH_SIZE.name in set().union(*map(names_read, lines)):
        flat = True  # the code names the flattened batch size after all
        lines, lw = _lines(tg, flat)
    return flat, lines, lw


def jvp_data(d: Derivation) -> JvpData:
    """Derive the tangent map of ``d`` and lower it; on failure, the reason in one line."""
    g = d.graph
    base = JvpData("", list(g.inputs), params=[p.name for p in g.params])
    try:
        shown = tangent_graph(d)  # the steps as math; the lowering reads them given
        tg, present = _given_tangents(shown, len(g.inputs))
        # the data's guards are the forward's: a tangent reads a guarded pick times its mask
        tg.graph.guarded = data_guards(g)
        flat, lines, lw = _lowered(tg)
    except (DerivationError, EngineBug) as exc:
        reason = str(exc).split(": ", 1)[-1] if str(exc).startswith("op '") else str(exc)
        return dataclasses.replace(base, error=reason.splitlines()[0][:300])
    # the checks of the forward's own steps (sizes, ranges), over the inputs and the tangents
    checked = dataclasses.replace(tg.graph, steps=list(d.forward))
    checks, _ = input_checks(checked, flat, lw.wrapping)
    output = output_expr(tg.graph, flat)
    checks = live_bindings(checks, lines + [output])
    params = param_signature(g)
    n = len(tg.graph.inputs) - len(g.inputs)
    params += [f"present={_tuple(['True'] * n)}"] if present else []
    signature = ", ".join(tg.graph.inputs) + (", *, " + ", ".join(params) if params else "")
    helpers = {f for line in checks for f in names_read(line) if f.startswith("_check_")}
    helpers |= called_helpers(lines)
    return dataclasses.replace(
        base,
        tangents=[k for k, x in enumerate(g.inputs) if not g.tensors[x].integer],
        signature=signature,
        check_lines=checks,
        lines=lines,
        output=output,
        steps=list(shown.steps),
        helpers=helpers,
        modules=set(lw.modules),
        present=present,
    )


def _given_tangents(tg: Tangents, n_inputs: int) -> tuple[Tangents, bool]:
    """``tg`` with each term that some input tangents alone reach given on them (torch hands
    None for an input that carries no tangent: :func:`~derive.symbolic.seeds.gated_tangents`),
    and whether anything was given."""
    g = tg.graph
    tangents = {t: k for k, t in enumerate(g.inputs[n_inputs:])}
    steps, changed = gated_tangents(tg.steps, tangents, g.output)
    if not changed:
        return tg, False
    by_name = {s.name: s for s in steps}
    graph = dataclasses.replace(g, steps=[by_name.get(s.name, s) for s in g.steps])
    return dataclasses.replace(tg, graph=graph, steps=steps), True
