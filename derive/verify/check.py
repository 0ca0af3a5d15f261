"""Verify a generated module against an independent evaluation of its definitions.

The reference is :mod:`derive.verify.reference`, a naive torch interpreter of the op language that
shares nothing with the lowering; torch autograd through it gives the reference gradients. So
a wrong forward cannot pass (it is compared too), and neither can a backward that agrees only
with its own forward. Per float input the check reports the largest difference of the generated
gradient against autograd and against central finite differences, as the seeds'
``eval_numerical_gradients`` does, then runs ``torch.autograd.gradcheck`` on ``Function``.

Inputs are drawn where the op is defined: standard normal first; where the reference forward or
its gradients are not finite there (``log``, ``sqrt`` of a negative), uniform in (0.5, 2), then
(0.1, 1). Sizes are random in [2, 5] per seed; batched inputs get one or two leading dims.
"""

from __future__ import annotations

import importlib.util
import inspect
import random
import re
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import sympy as sp
import torch
from torch.autograd.gradcheck import GradcheckError

from derive.errors import CheckFailed
from derive.language import Graph, Op, View, parse
from derive.language.guards import Ignored, data_guards
from derive.verify.oracle import (
    OracleError,
    oracle_gradients,
    oracle_second_order,
    oracle_tangent,
    second_order,
    tangent,
)
from derive.verify.reference import autograd_reference, evaluate

AUTOGRAD_TOL = 1e-10  # float64, relative to max(1, |reference|)
SECOND_TOL = 1e-8  # the double backward: products of two derivatives, and a sum more
NUMERIC_TOL = 1e-6  # central differences with h = 1e-6 are good to ~1e-9; room for curvature
NOISE_TIMES = 16  # a forward's rounding is a few ulps of each output, not one: room for that
DRAWS = ("normal", "uniform(0.5, 2)", "uniform(0.1, 1)")


@dataclass
class Row:
    """One input's gradient, compared."""

    name: str
    shape: tuple[int, ...]
    autograd_abs: float
    autograd_rel: float
    numeric_abs: float
    numeric_rel: float

    @property
    def ok(self) -> bool:
        return self.autograd_rel <= AUTOGRAD_TOL and self.numeric_rel <= NUMERIC_TOL


def load_module(path: str | Path) -> ModuleType:
    path = Path(path)
    spec = importlib.util.spec_from_file_location(f"backgen_check_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def index_limits(g: Graph, sizes: dict) -> dict[str, int]:
    """For every int64 input: the size of the dimension its values index into."""
    limits: dict[str, int] = {}
    for step in g.steps:
        for ind in getattr(step, "body", sp.S.Zero).atoms(sp.Indexed):
            for pos, sub in enumerate(ind.indices):
                if isinstance(sub, sp.Indexed):
                    size = int(sp.sympify(ind.base.shape[pos]).subs(sizes))
                    name = sub.base.label.name
                    limits[name] = min(limits.get(name, size), size)
    return limits


def _draw_sizes(g: Graph, rng: random.Random, scale: int = 1) -> dict[sp.Symbol, int]:
    """Random sizes in [2, 5] (times ``scale``), made whole for the derived ones
    (:func:`with_derived`); drawn again (from a range growing by one every 20 draws) until
    every derived size is positive (a convolution's L = T - K + 1)."""
    for k in range(200):
        drawn = {s: scale * rng.randint(2, 5 + k // 20) for s in g.sizes if s not in g.derived}
        sizes = with_derived(g, drawn)
        if all(sizes[d] > 0 for d in g.derived):
            return sizes
    return sizes


def with_derived(g: Graph, sizes: dict[sp.Symbol, int]) -> dict[sp.Symbol, int]:
    """``sizes`` (the inputs') with every derived size added: a size a derived one or a view's
    dimension divides (C in D = C / n_head; the first size of a product, C in K = C * L /
    groups, a group norm's) is first scaled by the divisor, so each is whole."""
    sizes = dict(sizes)
    ints = {p: v for p, v in g.params.items() if isinstance(v, int)}
    views = [sp.sympify(d) for v in g.steps if isinstance(v, View) for d in g.tensors[v.name].dims]
    for expr in [*g.derived.values(), *views]:  # view(x, N, k, T/k) divides T too
        num, den = sp.fraction(expr)
        divisor = sp.sympify(den).subs(ints).subs(sizes)
        factors = sorted((f for f in sp.Mul.make_args(num) if f in sizes), key=str)
        if factors and divisor.is_Integer:
            sizes[factors[0]] *= int(divisor)
    for size, expr in g.derived.items():
        sizes[size] = int(sp.sympify(expr).subs(ints).subs(sizes))
    return sizes


def _draw(shape: tuple, how: str, gen: torch.Generator, dtype: torch.dtype) -> torch.Tensor:
    if how == "normal":
        return torch.randn(shape, generator=gen, dtype=dtype)
    lo, hi = (float(v) for v in how[len("uniform(") : -1].split(","))
    return lo + (hi - lo) * torch.rand(shape, generator=gen, dtype=dtype)


def random_inputs(
    op: Op | Graph,
    seed: int = 0,
    dtype: torch.dtype = torch.float64,
    how: str = "normal",
    scale: int = 1,
    counts_from: int = 0,
) -> list[torch.Tensor]:
    """Inputs of the declared shapes with random sizes in [2, 5] (each times ``scale``: the
    same draw, larger, for how a cost grows); int64 inputs index in range, and one that is no
    subscript (compared only, a count such as ``where(j < lens[b], s, -inf)``) is drawn in
    [counts_from, 3)."""
    g = op if isinstance(op, Graph) else parse(op)
    rng = random.Random(seed)
    gen = torch.Generator().manual_seed(seed)
    sizes = _draw_sizes(g, rng, scale)
    lead = tuple(scale * rng.randint(1, 3) for _ in range(rng.randint(1, 2)))
    if lead and any(t.batched for t in g.tensors.values()):
        sizes = {s: v for s, v in sizes.items() if s.name != "Batch"}
        sizes[sp.Symbol("Batch", integer=True, positive=True)] = int(torch.tensor(lead).prod())
    limits = index_limits(g, sizes)
    guarded = data_guards(g)
    out = []
    for name in g.inputs:
        t = g.tensors[name]
        dims = t.dims[1:] if t.batched else t.dims
        shape = (lead if t.batched else ()) + tuple(int(sp.sympify(d).subs(sizes)) for d in dims)
        if t.integer:
            # a guarded index (where(t >= 0, ..)) gets its ignored entries too: -1, or the
            # value a t != -100 ignores
            low = -1 if name in guarded else 0 if name in limits else counts_from
            drawn = torch.randint(low, limits.get(name, 3), shape, generator=gen)
            out.append(ignored_as(drawn, guarded.get(name)))
        else:
            out.append(_draw(shape, how, gen, dtype))
    return out


def ignored_as(drawn: torch.Tensor, ignored: Ignored | None) -> torch.Tensor:
    """``drawn``'s -1 entries as the value its guard ignores (the same draw serves ``t >= 0``
    and ``t != -100``)."""
    if ignored is None or ignored.drawn == -1:
        return drawn
    return drawn.masked_fill(drawn == -1, ignored.drawn)


def _finite(values) -> bool:
    return all(bool(torch.isfinite(v).all()) for v in values if v.is_floating_point())


SEEDS = 8  # seeds tried: an int draw may read a masked entry at one (pos[i] = i of NT-Xent)


def defined_inputs(g: Graph, seed: int, scale: int = 1) -> tuple[list[torch.Tensor], str]:
    """The first draw of :data:`DRAWS` where the definitions and their gradients are finite;
    then the same with the int inputs that are no subscript drawn from 1: a length of 0 in
    ``where(j < lens[b], s, -inf)`` masks a whole row of a softmax (0 / 0, as in torch), and
    a correct key-padding attention had no draw to check (found by probing); then all of it
    again at the next seeds: an NT-Xent loss's partner index drawn as the row itself reads its
    masked diagonal, and one seed gave -inf at every draw (found by probing)."""
    subscripts = {
        sub.base.label.name
        for step in g.steps
        for ind in getattr(step, "body", sp.S.Zero).atoms(sp.Indexed)
        for sub in ind.indices
        if isinstance(sub, sp.Indexed)
    }
    counts = any(g.tensors[n].integer and n not in subscripts for n in g.inputs)
    first = None  # what was not finite at the first draw, for the message
    ways = [(0, how) for how in DRAWS] + [(1, how) for how in DRAWS] * counts
    for attempt in range(SEEDS):
        for counts_from, how in ways:
            inputs = random_inputs(g, seed + attempt, how=how, scale=scale, counts_from=counts_from)
            named = dict(zip(g.inputs, inputs, strict=True))
            values = evaluate(g, named)
            grad_out = torch.ones_like(values[g.output])
            # an intermediate may be -inf (a masked score, where(c, s, -inf)); never NaN
            bad = [
                n
                for n, v in values.items()
                if v.is_floating_point()
                and (bool(torch.isnan(v).any()) or (n == g.output and not _finite([v])))
            ]
            if not bad and _finite(autograd_reference(g, named, grad_out).values()):
                return inputs, how
            first = first or (bad[0] if bad else "a gradient")
    raise CheckFailed(
        f"op '{g.op.name}': no draw of {DRAWS} over {SEEDS} seeds gives finite values to check "
        f"({first} is not finite at the first)"
    )


def _numeric(
    module: ModuleType, inputs: list, k: int, grad_out: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """d(out . grad_out)/d input k by central differences, h = 1e-6, and each entry's
    rounding noise.

    The two outputs are differenced before they are weighted and summed: entries the nudged
    element does not reach cancel exactly, so the rounding noise is that of the entries it
    reaches, not eps * sum|out| / h (an op whose other outputs are ~1e7 would otherwise read
    noise of ~1e-3 into a gradient of order 1). That noise is returned beside the gradient,
    ``eps * sum_j (|f+_j| + |f-_j|) |g_j| / 2h`` over the reached entries j: where they are
    large themselves (a 0-d loss of ~1e3, a gradient entry near 0 judged against 1) it is
    ~1e-6, the tolerance itself, and a correct module failed (found by probing: a gated
    recurrence's squared sum)."""
    h, x = 1e-6, inputs[k]
    grad, noise = torch.zeros_like(x), torch.zeros_like(x)
    flat, flat_noise = grad.view(-1), noise.view(-1)
    eps = torch.finfo(x.dtype).eps if x.is_floating_point() else 0.0
    for i in range(x.numel()):
        plus, minus = x.clone(), x.clone()
        plus.view(-1)[i] += h
        minus.view(-1)[i] -= h
        f = [module.forward(*(inputs[:k] + [v] + inputs[k + 1 :]))[0] for v in (plus, minus)]
        flat[i] = float(((f[0] - f[1]) * grad_out).sum()) / (2 * h)
        reached = (f[0] != f[1]).to(grad_out.dtype)
        size = ((f[0].abs() + f[1].abs()) * grad_out.abs() * reached).sum()
        flat_noise[i] = eps * float(size) / (2 * h)
    return grad, noise


def _numeric_diff(mine: torch.Tensor, numeric: torch.Tensor, noise: torch.Tensor) -> tuple:
    """:func:`_diff` against central differences, each entry's error less ``NOISE_TIMES``
    its rounding noise (see :func:`_numeric`): the absolute error, and the relative error
    beyond the noise."""
    if numeric.numel() == 0:
        return 0.0, 0.0
    err = (mine.detach() - numeric).abs()
    beyond = (err - NOISE_TIMES * noise).clamp(min=0)
    scale = numeric.abs().clamp(min=1.0)
    return float(err.max()), float((beyond / scale).max())


def _diff(mine: torch.Tensor, ref: torch.Tensor) -> tuple[float, float]:
    if ref.numel() == 0:
        return 0.0, 0.0
    err = (mine.detach() - ref.detach()).abs()
    scale = ref.detach().abs().clamp(min=1.0)
    return float(err.max()), float((err / scale).max())


def check_seed(module: ModuleType, g: Graph, seed: int) -> tuple[list[Row], str]:
    """Forward against the reference (a wrong forward fails here), then every float gradient."""
    inputs, how = defined_inputs(g, seed)
    named = dict(zip(g.inputs, inputs, strict=True))
    want = evaluate(g, named)[g.output]
    out, saved = module.forward(*inputs)
    if tuple(out.shape) != tuple(want.shape):
        raise CheckFailed(
            f"op '{g.op.name}': forward returns shape {tuple(out.shape)}, the definitions "
            f"give {tuple(want.shape)} (seed {seed})"
        )
    f_abs, f_rel = _diff(out, want)
    if f_rel > AUTOGRAD_TOL:
        raise CheckFailed(
            f"op '{g.op.name}': forward differs from the definitions by {f_abs:.3g} "
            f"(relative {f_rel:.3g}) at shape {tuple(out.shape)} (seed {seed})"
        )
    grad_out = torch.randn(
        out.shape, generator=torch.Generator().manual_seed(seed), dtype=out.dtype
    )
    derived = module.backward(grad_out, saved)
    alone = needs_alone(module, g, grad_out, saved, derived)
    if alone:
        raise CheckFailed(f"op '{g.op.name}': {alone} (seed {seed})")
    reference = autograd_reference(g, named, grad_out)
    rows = []
    for k, name in enumerate(g.inputs):
        if g.tensors[name].integer:
            continue
        mine = derived[k]
        if tuple(mine.shape) != tuple(inputs[k].shape):
            raise CheckFailed(
                f"op '{g.op.name}': the gradient of {name} has shape {tuple(mine.shape)}, "
                f"but {name} has shape {tuple(inputs[k].shape)} (seed {seed})"
            )
        numeric, noise = _numeric(module, inputs, k, grad_out)
        rows.append(
            Row(
                name,
                tuple(mine.shape),
                *_diff(mine, reference[name]),
                *_numeric_diff(mine, numeric, noise),
            )
        )
    if all(row.ok for row in rows):  # a failing row is reported first, against autograd
        _against_the_text(g, named, grad_out, out, derived, seed)
    return rows, how


def needs_alone(module: ModuleType, g: Graph, grad_out, saved, derived) -> str | None:
    """Where ``backward`` takes ``needs``: each float input's gradient asked for alone is
    the one computed with all the others, bit for bit (the same statements, the rest
    skipped), and every gradient not asked for is None; what differs, else None."""
    if "needs" not in inspect.signature(module.backward).parameters:
        return None
    n = len(g.inputs)
    for k, name in enumerate(g.inputs):
        if g.tensors[name].integer:
            continue
        alone = module.backward(grad_out.clone(), saved, tuple(j == k for j in range(n)))
        mine, want = alone[k], derived[k]
        if (mine is None) != (want is None) or (
            mine is not None and not torch.equal(mine.nan_to_num(), want.nan_to_num())
        ):
            return f"the gradient of {name} asked for alone (needs) differs from it among all"
        others = [g.inputs[j] for j, t in enumerate(alone) if j != k and t is not None]
        if others:
            return f"needs asked for {name} alone, but the gradients of {others} came back too"
    return None


def _against_the_text(g: Graph, named: dict, grad_out, out, derived, seed: int) -> None:
    """The module against :mod:`derive.verify.oracle`, which reads the definition strings
    without the parse: a misreading of the text by the parse cannot agree with itself here."""
    try:
        text_out, text_grads = oracle_gradients(g.op, named, grad_out)
    except (OracleError, RuntimeError, IndexError, KeyError) as exc:
        raise CheckFailed(
            f"op '{g.op.name}': the text oracle cannot evaluate the definitions: {exc}"
        ) from None
    found = [("forward", out, text_out)] + [
        (f"the gradient of {name}", derived[k], text_grads[name])
        for k, name in enumerate(g.inputs)
        if not g.tensors[name].integer
    ]
    for what, mine, want in found:
        if tuple(mine.shape) != tuple(want.shape) or _diff(mine, want)[1] > AUTOGRAD_TOL:
            raise CheckFailed(
                f"op '{g.op.name}': {what} differs from the definitions' text read "
                f"independently of the parse (derive.verify.oracle; seed {seed}): "
                + (
                    f"shape {tuple(mine.shape)} against {tuple(want.shape)}"
                    if tuple(mine.shape) != tuple(want.shape)
                    else f"by {_diff(mine, want)[0]:.3g}"
                )
            )


FULL_GRADCHECK = 256  # float entries up to which gradcheck builds the whole Jacobian
GRADCHECK_EPS, GRADCHECK_ATOL = 1e-6, 1e-5  # torch.autograd.gradcheck's own defaults


def _gradcheck(module: ModuleType, g: Graph, seed: int) -> str | None:
    """gradcheck on ``Function``: the whole Jacobian for small inputs; past
    :data:`FULL_GRADCHECK` entries its fast mode (one random projection, against the same
    finite differences), as attention's full Jacobian took minutes per seed. None if it
    passes, else which input's gradient failed.

    Its absolute tolerance grows with the output: a central difference of f at a step eps
    carries f's rounding, about |f| 2**-52 / eps, and a loss of 1e5 (a Gaussian NLL whose
    variance is clamped at eps = 1e-6) put that at 1.5e-5, past gradcheck's default 1e-5, on
    Jacobian entries the derived backward had right to 1e-16 (found by probing). The rows of
    :func:`check_seed` hold every gradient to autograd at 1e-10 already."""
    inputs, _ = defined_inputs(g, seed)
    leaves = [t.clone().requires_grad_(t.is_floating_point()) for t in inputs]
    entries = sum(t.numel() for t in inputs if t.is_floating_point())
    with torch.no_grad():
        out, _ = module.forward(*inputs)
    rounding = 64 * float(out.abs().max()) * torch.finfo(out.dtype).eps / GRADCHECK_EPS
    try:
        torch.autograd.gradcheck(
            module.Function.apply,
            leaves,
            eps=GRADCHECK_EPS,
            atol=max(GRADCHECK_ATOL, rounding),
            fast_mode=entries > FULL_GRADCHECK,
        )
    except GradcheckError as exc:
        first = str(exc).splitlines()[0].rstrip(",")
        floats = [n for n, t in zip(g.inputs, inputs, strict=True) if t.is_floating_point()]
        found = re.search(r"with respect to input (\d+)", first)
        if found and int(found.group(1)) < len(floats):
            return f"the gradient of {floats[int(found.group(1))]}: {first}"
        return first
    return None


def check_module(path: str | Path, op: Op, seeds: int = 3) -> str:
    """The report of :func:`check_seed` over ``seeds`` seeds; CheckFailed on any disagreement."""
    module, g = load_module(path), parse(op)
    worst: dict[str, Row] = {}
    draws = set()
    for seed in range(seeds):
        rows, how = check_seed(module, g, seed)
        draws.add(how)
        for row in rows:
            if row.name not in worst or row.autograd_rel + row.numeric_rel > (
                worst[row.name].autograd_rel + worst[row.name].numeric_rel
            ):
                worst[row.name] = row
            if not row.ok:
                raise CheckFailed(_failure(g, row, seed))
        failed = _gradcheck(module, g, seed)
        if failed is not None:
            raise CheckFailed(
                f"op '{g.op.name}': torch.autograd.gradcheck fails (seed {seed}), {failed}"
            )
    return (
        _report(g, list(worst.values()), seeds, sorted(draws))
        + "\n"
        + second_order_report(module, g)
        + "\n"
        + jvp_report(module, g)
    )


def second_order_report(module: ModuleType, g: Graph, seed: int = 0) -> str:
    """The derived double backward against autograd's through the text oracle, then
    gradgradcheck; the report's last line. A module that refuses it says why."""
    if hasattr(module, "NOT_DERIVED"):
        return f"  second order: not derived ({module.NOT_DERIVED}); a double backward raises"
    inputs, _ = defined_inputs(g, seed)
    named = dict(zip(g.inputs, inputs, strict=True))
    gen = torch.Generator().manual_seed(seed + 7)
    out, _ = module.forward(*inputs)
    grad_out = torch.randn(out.shape, generator=gen, dtype=out.dtype)
    floats = {n: t for n, t in named.items() if t.is_floating_point()}
    v = {n: torch.randn(t.shape, generator=gen, dtype=t.dtype) for n, t in floats.items()}
    worst = 0.0
    # every cotangent, then each alone: autograd gives the others as None (a gradient penalty
    # on x alone), and the double backward drops the terms only they reach
    alone = [{n: t} for n, t in v.items()] if len(v) > 1 else []
    for given in [v, *alone]:
        mine = second_order(module.Function.apply, named, grad_out, given)
        want = oracle_second_order(g.op, named, grad_out, given)
        which = "" if given is v else f" with only {next(iter(given))}'s cotangent given"
        for name, ref in want.items():
            err, rel = _diff(mine[name], ref)
            worst = max(worst, err)
            if rel > SECOND_TOL:
                raise CheckFailed(
                    f"op '{g.op.name}': the second derivative d2/d{name}{which} differs from "
                    f"autograd's through the definitions by {err:.3g} (relative {rel:.3g}; "
                    f"seed {seed})"
                )
    leaves = [t.clone().requires_grad_(t.is_floating_point()) for t in inputs]
    if not torch.autograd.gradgradcheck(
        module.Function.apply, leaves, fast_mode=True, raise_exception=False
    ):
        raise CheckFailed(f"op '{g.op.name}': torch.autograd.gradgradcheck fails (seed {seed})")
    each = f", and with each input's cotangent alone ({len(alone)})" if alone else ""
    return (
        f"  second order vs autograd through the definitions{each}: max abs {worst:.2e} "
        f"(tolerance {SECOND_TOL:g} relative); gradgradcheck passed"
    )


def jvp_report(module: ModuleType, g: Graph, seed: int = 0) -> str:
    """The derived tangent (``Function.jvp``, by torch's dual numbers) against torch's own
    forward mode through the text oracle; the report's last line. A module that refuses
    forward mode says why."""
    if hasattr(module, "JVP_NOT_DERIVED"):
        return f"  forward mode: not derived ({module.JVP_NOT_DERIVED}); a jvp raises"
    inputs, _ = defined_inputs(g, seed)
    named = dict(zip(g.inputs, inputs, strict=True))
    gen = torch.Generator().manual_seed(seed + 11)
    tangents = {
        n: torch.randn(t.shape, generator=gen, dtype=t.dtype)
        for n, t in named.items()
        if t.is_floating_point()
    }
    err, rel = _diff(
        tangent(module.Function.apply, named, tangents), oracle_tangent(g.op, named, tangents)
    )
    if rel > AUTOGRAD_TOL:
        raise CheckFailed(
            f"op '{g.op.name}': the tangent (jvp) differs from torch's forward mode through the "
            f"definitions by {err:.3g} (relative {rel:.3g}; seed {seed})"
        )
    return (
        f"  tangent (jvp) vs torch's forward mode through the definitions: max abs {err:.2e} "
        f"(tolerance {AUTOGRAD_TOL:g} relative)"
    )


def _failure(g: Graph, row: Row, seed: int) -> str:
    against = "autograd" if row.autograd_rel > AUTOGRAD_TOL else "finite differences"
    abs_, rel = (
        (row.autograd_abs, row.autograd_rel)
        if against == "autograd"
        else (row.numeric_abs, row.numeric_rel)
    )
    return (
        f"op '{g.op.name}': the gradient of {row.name} differs from {against} through the "
        f"definitions by {abs_:.3g} (relative {rel:.3g}) at shape {row.shape} (seed {seed})"
    )


def _report(g: Graph, rows: list[Row], seeds: int, draws: list[str]) -> str:
    lines = [f"checked {g.op.name}: forward matches the definitions; {seeds} seeds, inputs {draws}"]
    for r in rows:
        lines.append(
            f"  d{r.name:<10} vs autograd: max abs {r.autograd_abs:.2e} rel {r.autograd_rel:.2e}"
            f" | vs finite differences: max abs {r.numeric_abs:.2e} rel {r.numeric_rel:.2e}"
        )
    lines.append(
        f"  gradcheck passed; tolerances: autograd {AUTOGRAD_TOL:g}, finite differences "
        f"{NUMERIC_TOL:g} (relative to max(1, |reference|); the differences' rel is beyond "
        f"{NOISE_TIMES}x their rounding noise)"
    )
    return "\n".join(lines)
