"""The double backward in the module: the second-order op derived, lowered, and wired up.

:mod:`derive.symbolic.second_order` states the op ``pair = <v, backward(x, grad_out)>``; here it
is derived and lowered like any op, its forward and backward emitted as ``_forward_double`` and
``_backward_double`` beside the first ones, and the template's ``_Backward`` node calls them
when autograd differentiates the first backward (``create_graph=True``). An op whose second
order cannot be derived gets a module that says so, and whose double backward raises one line
naming the op, never a number computed on constants.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from derive.errors import DerivationError, EngineBug
from derive.language.guards import data_guards
from derive.progress import Stage, silent
from derive.symbolic.derivation import Derivation, derive
from derive.symbolic.second_order import second_order_graph
from derive.symbolic.seeds import gated


@dataclass
class DoubleData:
    """What the template's ``_Backward`` node needs, as code strings."""

    module: object | None  # the second-order op's ModuleData (None: not derived)
    error: str  # why not, when not
    inputs: list[str]  # the first op's inputs, in order
    differentiable: list[int]  # positions of the inputs the first backward returns a grad for
    argmax_saved: list[int]  # positions in saved of the argmaxes the second order reads
    params: list[str]  # the op's params, in signature order
    derivation: Derivation | None = None  # the second-order op's, as derived (for show)

    @property
    def grads(self) -> str:
        """What ``_Backward.forward`` returns: the first backward's float gradients."""
        return _tuple([f"grads[{k}]" for k in self.differentiable])

    @property
    def targets(self) -> str:
        """The inputs the cotangents belong to (a missing cotangent is their zeros)."""
        return _tuple([self.inputs[k] for k in self.differentiable])

    @property
    def kept(self) -> str:
        """What ``_Backward`` keeps of the forward's saved tuple for its backward: the argmaxes
        the second order reads, each in its place (``None`` elsewhere), or nothing."""
        if not self.argmax_saved:
            return "None"
        return f"_only(_saved, {_tuple([str(k) for k in self.argmax_saved])})"

    @property
    def call(self) -> str:
        """``_double_forward``'s arguments: inputs, grad_out, cotangents, argmaxes, params."""
        argmaxes = [f"ctx.saved[{k}]" for k in self.argmax_saved]
        params = [f"{p}=ctx.params[{k}]" for k, p in enumerate(self.params)]
        return ", ".join([*self.inputs, "grad_out", "*cotangents", *argmaxes, *params])

    @property
    def returns(self) -> str:
        """``Function.backward``'s: each input's gradient from ``_Backward``, None for the
        others and for the params."""
        slots = {k: f"grads[{n}]" for n, k in enumerate(self.differentiable)}
        entries = [slots.get(k, "None") for k in range(len(self.inputs))]
        return _tuple(entries + ["None"] * len(self.params))


def _tuple(items: list[str]) -> str:
    return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"


def double_data(
    d: Derivation, source: str, command: str, lower, stage: Stage = silent
) -> DoubleData:
    """Derive the second order of ``d`` and lower it with ``lower`` (``module_data``);
    ``stage`` hears when the lowering starts."""
    g = d.graph
    differentiable = [k for k, t in enumerate(g.inputs) if t in d.final]
    base = DoubleData(
        None,
        "",
        list(g.inputs),
        differentiable,
        [],
        [p.name for p in g.params],
    )
    try:
        so = second_order_graph(d)
        so.graph.guarded = data_guards(g)  # the data's guards are the forward's
        second = derive(so.graph, lambda what: stage(f"the double backward, {what}"))
        stage("the double backward, lowering")
        data = lower(*_given_cotangents(second, so.cotangents), source, command)
    except (DerivationError, EngineBug) as exc:
        reason = str(exc).split(": ", 1)[-1] if str(exc).startswith("op '") else str(exc)
        return dataclasses.replace(base, error=reason.splitlines()[0][:300])
    return dataclasses.replace(
        base,
        module=data,
        argmax_saved=[d.saved.index(a) for a in so.argmaxes],
        derivation=second,
    )


def _given_cotangents(second: Derivation, cotangents: list[str]) -> tuple[Derivation, int]:
    """``second`` with each term that some cotangents alone reach given on them (autograd's
    None for a cotangent drops its chain instead of multiplying it by zeros:
    :mod:`derive.symbolic.seeds`), and how many ``present`` flags its backward then takes
    (0: nothing was given, the backward takes none)."""
    adj = second.adjoints
    final, changed = gated(
        second.order,
        second.final,
        adj.names,
        adj.views,
        {v: k for k, v in enumerate(cotangents)},
        [t for t in second.graph.inputs if t not in cotangents],
    )
    if not changed:
        return second, 0
    return dataclasses.replace(second, final=final), len(cotangents)
