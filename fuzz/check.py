"""Judge one op: derive and emit its module, run it, compare with the reference interpreter.

The verdict compares, in float64, the generated forward's output and every float input's
gradient (a random ``grad_out``) with ``derive.verify.reference`` differentiated by torch
autograd, and for stepwise modules every intermediate's gradient too. Two input draws per op:
sizes all different (a transpose changes the shape) and sizes at random in 1..4 (size-1
broadcasting).
An error is relative to the reference tensor's scale: max|mine - ref| <= 1e-10 * max(1, max|ref|).

The module is loaded as the template renders it, before black lays it out
(``module_program``): the same syntax tree as the generated file's, in a third of the time.
A line number in a verdict ("in the generated module, line N") is the unformatted text's;
black runs on every module ``generate`` writes (in the suite: the catalogue and the fuzz ops
of tests/modules/test_regenerate.py, and every module whose text a test reads or edits).
"""

from __future__ import annotations

import contextlib
import random
import signal
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import sympy as sp
import torch

from derive.emit.generate import module_program
from derive.errors import DerivationError, EngineBug
from derive.language import Graph, Op, parse
from derive.language.guards import data_guards
from derive.language.ranges import entries_read
from derive.verify.check import ignored_as, index_limits, needs_alone, with_derived
from derive.verify.check import load_module as load_path
from derive.verify.oracle import (
    oracle_gradients,
    oracle_second_order,
    oracle_tangent,
    second_order,
    tangent,
)
from derive.verify.reference import autograd_reference, evaluate

RTOL = 1e-10
SECOND_NOT_DERIVED = "second order not derived"  # a refusal, counted apart from wrong
JVP_NOT_DERIVED = "forward mode not derived"  # likewise
RTOL_SECOND = 1e-8  # the double backward: products of two derivatives, and a sum more
RTOL_DIFFERENCE = 1e-4  # a central difference's truncation and rounding, eps 1e-5 or 1e-7
VALUE_LIMIT = 1e4  # inputs are ill-conditioned for a 1e-10 check when values grow past this
GRAD_LIMIT = 1e6
KINK_MARGIN = 1e-6  # abs/relu/max arguments at least this far from their kink


@dataclass
class Outcome:
    status: str  # passed | refused | wrong | skipped
    kind: str = ""  # what failed: "forward value", "gradient shape", "exception KeyError", ...
    detail: str = ""
    seconds: float = 0.0

    def line(self) -> str:
        what = f"{self.kind}: {self.detail}" if self.kind else self.detail
        return f"{self.status.upper()}" + (f" ({what})" if what else "")


class CaseTimeout(BaseException):  # BaseException: no `except Exception` in sympy swallows it
    pass


@contextlib.contextmanager
def deadline(seconds: float | None):
    """Raise CaseTimeout after ``seconds`` of this process's CPU time (main thread only;
    elsewhere no limit). CPU time, not the clock's: on a shared machine a case that waits for
    a core is not slow, and a wall-clock limit judged such cases wrong (fuzz 540036: 27 s of
    CPU, 112 s on the clock beside three other jobs)."""
    if not seconds or threading.current_thread() is not threading.main_thread():
        yield
        return

    def _alarm(signum, frame):
        raise CaseTimeout()

    previous = signal.signal(signal.SIGPROF, _alarm)
    signal.setitimer(signal.ITIMER_PROF, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, previous)


def draw_inputs(graph: Graph, seed: int, distinct: bool) -> dict[str, torch.Tensor]:
    """Inputs of the declared shapes: floats uniform in [-1.5, 1.5], ints in their range, and
    -1 too where every read of the int tensor is guarded (``where(t[n] >= 0, x[n, t[n]], 0)``;
    drawn as the value a ``t[n] != -100`` ignores); in an op drawn ``--segments``, an int
    tensor no subscript reads in [-1, 6] (in [0, 2] as before elsewhere: a plain seed's
    inputs are the ones it always drew).
    Sizes are drawn again while a derived one is not positive (``L = T - K + 1``); distinct
    sizes (2 and up) for the first 100 tries, then any: ``J = floor((1 - V)/dil) + 1`` is
    positive only at V = 1 (fuzz --affine 2287 was skipped, never judged)."""
    gen = torch.Generator().manual_seed(seed)
    sizes = _draw_sizes(graph, seed, distinct)
    bounds = index_limits(graph, sizes)
    guarded = data_guards(graph)
    segments = "--segments" in (graph.op.doc or "")  # the mode the op was drawn in
    inputs = {}
    for name in graph.inputs:
        t = graph.tensors[name]
        # a derived size may be negative in a degenerate draw (R = (K - U) // stride + 1 over
        # an input idx[R]): no such tensor exists, an empty one stands in (--windows 13834)
        shape = tuple(max(0, int(sp.sympify(d).subs(sizes))) for d in t.dims)
        if t.integer and segments and name not in bounds and name not in guarded:
            # compared only (--segments' where(k[n] == g, ..)): entries past either end of
            # any axis of the sizes drawn, which match no index
            inputs[name] = torch.randint(-1, 7, shape, generator=gen)
        elif t.integer:
            low = -1 if name in guarded else 0
            drawn = torch.randint(low, max(1, bounds.get(name, 3)), shape, generator=gen)
            inputs[name] = ignored_as(drawn, guarded.get(name))
        else:
            inputs[name] = (torch.rand(shape, generator=gen, dtype=torch.float64) - 0.5) * 3
    return inputs


def _draw_sizes(graph: Graph, seed: int, distinct: bool) -> dict:
    rng = random.Random(seed)
    symbols = sorted((s for s in graph.sizes if s not in graph.derived), key=str)
    for k in range(200):  # again, from wider ranges, while a window is longer than its axis
        if distinct and len(symbols) <= 4 and k < 100:
            values = rng.sample(range(2, 6 + k // 20), len(symbols))
        else:
            values = [rng.randint(1, 4 + k // 20) for _ in symbols]
        sizes = with_derived(graph, dict(zip(symbols, values)))
        if all(sizes[d] > 0 for d in graph.derived):
            break
    return sizes


def degenerate_sizes(graph: Graph, seed: int, distinct: bool) -> list[str]:
    """The derived sizes that :func:`draw_inputs`'s draw leaves at 0 or below (no input sizes
    make them positive: ``D = (1 - step) // step + 1`` with the param step = 2), and the axes
    it leaves too short for an entry a definition reads (``h[b, 1, c]`` with T = 1)."""
    sizes = _draw_sizes(graph, seed, distinct)
    bad = [f"{d} = {sizes[d]}" for d in sorted(graph.derived, key=str) if sizes[d] <= 0]
    for size, need, ind, pos in entries_read(graph.steps):
        if int(size.subs(sizes)) < need:
            bad.append(f"{size} = {int(size.subs(sizes))}: {ind} reads entry {pos}")
    return bad


def load_module(text: str, name: str, folder: Path):
    """The module, its kernels written into their spare operands at every size: ``_into``
    takes a buffer only from ``INTO_LEAST`` entries on, which the fuzzer's small draws never
    reach, and a buffer wrongly taken (one still read) must show in the comparisons."""
    path = folder / f"{name}.py"
    path.write_text(text)
    module = load_path(path)
    if hasattr(module, "INTO_LEAST"):
        module.INTO_LEAST = 0
    return module


def rel_error(mine: torch.Tensor, ref: torch.Tensor) -> float:
    if not ref.numel():
        return 0.0
    diff = float((mine.detach() - ref).abs().max())
    return diff / max(1.0, float(ref.abs().max())) if diff == diff else float("inf")


@dataclass
class Reference:
    inputs: dict
    output: torch.Tensor
    grad_out: torch.Tensor
    grads: dict  # float inputs, and every definition's for stepwise ops
    text: tuple  # (output, gradients) of derive.verify.oracle: the strings, not the parse
    cotangents: dict  # v per float input, for the second order
    second: dict | None  # the text oracle's gradient of <v, backward> (inputs, "grad_out")
    alone: tuple[dict, dict] | None  # one input's v alone (the others None), and its second
    tangent: torch.Tensor | None  # the text oracle's output tangent along the cotangents


def reference(graph: Graph, seed: int, distinct: bool) -> Reference | None:
    """The reference for one draw of inputs, or None if that draw is ill-conditioned."""
    inputs = draw_inputs(graph, seed, distinct)
    kinks: list[float] = []
    with torch.no_grad():
        values = evaluate(graph, inputs, kinks)
    # an intermediate may hold -inf where a where() masks it (attention's scores); the output,
    # like every gradient, must be finite
    inner = [v for k, v in values.items() if k != graph.output]
    if min(kinks, default=1.0) < KINK_MARGIN or not (
        tame(inner, VALUE_LIMIT, masked=True) and tame([values[graph.output]], VALUE_LIMIT)
    ):
        return None
    out = values[graph.output]
    gen = torch.Generator().manual_seed(seed + 1)
    grad_out = torch.randn(out.shape, generator=gen, dtype=torch.float64)
    grads = autograd_reference(graph, inputs, grad_out, intermediates=graph.op.stepwise)
    if not tame(grads.values(), GRAD_LIMIT):
        return None
    text = oracle_gradients(graph.op, inputs, grad_out)
    if not tame(text[1].values(), GRAD_LIMIT):
        # the text read literally overflows where the parse, rewritten for range, does not
        # (s / exp(W) with exp(W) = inf: NaN through the quotient, 0 through exp(-W); seed
        # 620039): the draw is ill-conditioned for the text oracle, as for autograd above
        return None
    cotangents = {n: torch.randn(t.shape, generator=gen, dtype=t.dtype) for n, t in grads.items()}
    cotangents = {n: cotangents[n] for n in graph.inputs if n in cotangents}
    second = oracle_second_order(graph.op, inputs, grad_out, cotangents)
    if not tame(second.values(), GRAD_LIMIT):  # autograd's own double backward is not finite
        second = None  # (a masked -inf through cosh, seed 160920): no second-order verdict
    alone = None  # one cotangent given, the others None: the terms only they reach dropped
    if second is not None and len(cotangents) > 1:
        name = list(cotangents)[seed % len(cotangents)]
        given = {name: cotangents[name]}
        alone = given, oracle_second_order(graph.op, inputs, grad_out, given)
        alone = alone if tame(alone[1].values(), GRAD_LIMIT) else None
    # forward mode along the same v: torch's own tangent formulas through the text
    along = oracle_tangent(graph.op, inputs, cotangents)
    along = (
        along if tame([along], GRAD_LIMIT) and adjoint(along, text, grad_out, cotangents) else None
    )
    return Reference(inputs, out, grad_out, grads, text, cotangents, second, alone, along)


def adjoint(along: torch.Tensor, text: tuple, grad_out: torch.Tensor, v: dict) -> bool:
    """Whether torch's forward mode through the text (``along`` = J v) and its reverse mode
    (``text``'s gradients, J^T grad_out) keep the adjoint identity <grad_out, J v> = <J^T
    grad_out, v> to RTOL of the terms' magnitude. Where they do not, a forward-mode formula
    lost the digits, and the draw gives no tangent verdict. It was found through torch's jvp of
    ``minimum``, ``other_t + mask * (self_t - other_t)``, which an unselected tangent of 1e13
    rounds away (fuzz 1029546); the oracle now selects instead (derive.verify.oracle._select),
    because a loss in one entry hides in the sum (1080291), and the identity stays the net for
    any other formula of torch's that loses digits."""
    pairs = [(grad_out, along)] + [(g, v[n]) for n, g in text[1].items() if n in v]
    left, *right = ((a * b).sum() for a, b in pairs)
    scale = sum(float((a * b).abs().sum()) for a, b in pairs) / 2
    return abs(float(left - sum(right))) <= RTOL * max(scale, 1e-300)


def tame(tensors, limit: float, masked: bool = False) -> bool:
    """Every value finite and within ``limit``; ``masked``: -inf entries are let through."""
    for t in tensors:
        if t.is_floating_point() and masked:
            t = t[~torch.isneginf(t)]
        if t.is_floating_point() and t.numel():
            if not bool(torch.isfinite(t).all()) or float(t.abs().max()) > limit:
                return False
    return True


def compare(module, graph: Graph, ref: Reference) -> tuple[str, str] | None:
    """The first disagreement of the module with the reference: (kind, detail), or None."""
    params = {p.name: v for p, v in graph.params.items()}
    out, saved = module.forward(*[ref.inputs[n] for n in graph.inputs], **params)
    found = _judge("forward", graph.output, out, ref.output)
    if found:
        return found
    grads = module.backward(ref.grad_out.clone(), saved)
    if len(grads) != len(graph.inputs):
        return "gradient count", f"{len(grads)} gradients for {len(graph.inputs)} inputs"
    alone = needs_alone(module, graph, ref.grad_out, saved, grads)
    if alone:
        return "needs", alone
    for name, mine in zip(graph.inputs, grads):
        if not graph.tensors[name].integer:
            found = _judge("gradient", f"d{name}", mine, ref.grads[name])
            if found:
                return found
    text_out, text_grads = ref.text  # the definitions' text read without the parse
    found = _judge("forward (text oracle)", graph.output, out, text_out)
    for name, mine in zip(graph.inputs, grads):
        if not found and not graph.tensors[name].integer:
            found = _judge("gradient (text oracle)", f"d{name}", mine, text_grads[name])
    if found:
        return found
    found = _tangent(module, graph, ref) or _second_order(module, graph, ref)
    if found:
        return found
    if graph.op.stepwise and hasattr(module, "backward_all"):
        for name, mine in module.backward_all(ref.grad_out.clone(), saved).items():
            if name in ref.grads and name not in graph.inputs:
                found = _judge("intermediate gradient", f"d{name}", mine, ref.grads[name])
                if found:
                    return found
    return None


def _second_order(module, graph: Graph, ref: Reference) -> tuple[str, str] | None:
    """The double backward through ``Function`` (the derived second order) against the text
    oracle's, relative tolerance :data:`RTOL_SECOND`; where they differ and the text's own
    double backward lost its digits, against its first order's central difference
    (:func:`_by_difference`)."""
    if hasattr(module, "NOT_DERIVED"):  # refused in one line at run time: a gap, no number
        return SECOND_NOT_DERIVED, module.NOT_DERIVED
    if ref.second is None:
        return None
    inputs = {n: ref.inputs[n] for n in graph.inputs}
    checks = [(ref.cotangents, ref.second, "")]
    if ref.alone is not None:  # one input's v alone: the terms only the others reach dropped
        given, second = ref.alone
        checks.append((given, second, f", only {next(iter(given))}'s v given"))
    for given, want, only in checks:
        mine = second_order(module.Function.apply, inputs, ref.grad_out, given)
        for name in want:
            err = rel_error(mine[name], want[name])
            if not err <= RTOL_SECOND and not _by_difference(graph, ref, given, want, mine):
                return "second order value", f"d2/d{name} off by {err:.3g} (relative){only}"
    return None


def _by_difference(graph: Graph, ref: Reference, given: dict, text: dict, mine: dict) -> bool:
    """Whether ``mine`` is the second order where the text oracle's is not: both measured
    against the central difference of the text's first order along v (its gradients at
    x + eps v and x - eps v over 2 eps, and its output's for ``grad_out``: H v and J v), to
    :data:`RTOL_DIFFERENCE`, at eps 1e-5 or 1e-7. The text read literally can keep its first
    order and lose its second: ``log1p(3 H exp(t))`` at t = 480 has the gradient y / (1 + y)
    = 1, while autograd's double backward of it subtracts g y / (1 + y) from itself through
    (1 + y)**2 = inf and is left with g (fuzz 12300714, where the derived sigmoid(1 - sigmoid)
    is right). A module that differs from both is wrong, as is one that differs from a text
    that agrees with its own difference."""
    for eps in (1e-5, 1e-7):
        moved = [
            {n: t + s * eps * given[n] if n in given else t for n, t in ref.inputs.items()}
            for s in (1, -1)
        ]
        (out_plus, plus), (out_minus, minus) = (
            oracle_gradients(graph.op, m, ref.grad_out) for m in moved
        )
        slope = {n: (plus[n] - minus[n]) / (2 * eps) for n in plus}
        slope["grad_out"] = (out_plus - out_minus) / (2 * eps)
        names = [n for n in text if n in slope]
        if all(rel_error(mine[n], slope[n]) <= RTOL_DIFFERENCE for n in names) and any(
            rel_error(text[n], slope[n]) > RTOL_DIFFERENCE for n in names
        ):
            return True
    return False


def _tangent(module, graph: Graph, ref: Reference) -> tuple[str, str] | None:
    """The derived tangent (``Function.jvp`` under torch's dual numbers) against torch's
    forward mode through the text oracle, along the same v as the second order."""
    if hasattr(module, "JVP_NOT_DERIVED"):  # refused in one line at run time
        return JVP_NOT_DERIVED, module.JVP_NOT_DERIVED
    if ref.tangent is None:
        return None
    inputs = {n: ref.inputs[n] for n in graph.inputs}
    return _judge(
        "tangent",
        "t_" + graph.output,
        tangent(module.Function.apply, inputs, ref.cotangents),
        ref.tangent,
    )


def _judge(what: str, name: str, mine, ref: torch.Tensor) -> tuple[str, str] | None:
    if mine is None:
        return None if not bool(ref.any()) else (f"{what} missing", f"{name} is None")
    if not isinstance(mine, torch.Tensor):
        return f"{what} type", f"{name} is {type(mine).__name__}"
    if tuple(mine.shape) != tuple(ref.shape):
        return f"{what} shape", f"{name} has shape {tuple(mine.shape)}, want {tuple(ref.shape)}"
    err = rel_error(mine, ref)
    if not err <= RTOL:
        return f"{what} value", f"{name} off by {err:.3g} (relative)"
    return None


def run_case(
    op: Op, seed: int, timeout: float | None = 60.0, source: Callable = module_program
) -> Outcome:
    """Derive, emit, load and judge ``op`` on two draws of inputs seeded by ``seed``.

    ``source(op, folder)`` renders the module text (a test may hand in a broken one).
    """
    return timed(_run, op, seed, timeout, source)


def timed(run: Callable[..., Outcome], *args) -> Outcome:
    """``run(*args)``'s outcome with the seconds it took."""
    start = time.perf_counter()
    outcome = run(*args)
    outcome.seconds = time.perf_counter() - start
    return outcome


def drawn(op: Op, seed: int) -> tuple[Graph, list[Reference] | Degenerate] | Outcome:
    """``op`` parsed and its draws' references (:func:`references`), or the outcome that ends
    the case before anything is derived (the parse refused, no draw to judge)."""
    try:
        graph = parse(op)
    except DerivationError as exc:
        return Outcome("refused", "parse", str(exc))
    refs = references(graph, seed)
    return refs if isinstance(refs, Outcome) else (graph, refs)


def _run(op: Op, seed: int, timeout: float | None, source: Callable) -> Outcome:
    case = drawn(op, seed)
    if isinstance(case, Outcome):
        return case
    graph, refs = case
    if isinstance(refs, Degenerate):
        return judged(op, timeout, source, lambda module: refuses(module, graph, refs))

    def judge(module) -> Outcome:
        for ref in refs:
            found = compare(module, graph, ref)
            if found:
                refused = found[0] in (SECOND_NOT_DERIVED, JVP_NOT_DERIVED)
                return Outcome("refused" if refused else "wrong", *found)
        return Outcome("passed")

    return judged(op, timeout, source, judge)


DEGENERATE = "degenerate sizes refused"  # a pass: no draw's sizes could be computed with


@dataclass(frozen=True)
class Degenerate:
    """A draw whose derived sizes no input sizes make positive: the module has nothing to
    compute, and must refuse the inputs in one line naming the op and the size."""

    inputs: dict
    sizes: list[str]


def references(graph: Graph, seed: int) -> list[Reference] | Degenerate | Outcome:
    """The references of the case's well-conditioned input draws; else a degenerate draw to
    be refused, or the skip saying why there is neither. Decided before anything is derived:
    a case's skip is the reference's alone."""
    refs, degenerate = [], None
    for k in range(2):
        draw, distinct = seed * 2 + k, k == 0
        bad = degenerate_sizes(graph, draw, distinct)
        if bad:  # the reference cannot evaluate it (a size of 0 or below)
            degenerate = degenerate or Degenerate(draw_inputs(graph, draw, distinct), bad)
            continue
        try:
            refs.append(reference(graph, draw, distinct))
        except Exception as exc:  # the reference's problem, not the engine's: never a verdict
            return Outcome("skipped", "reference", f"{type(exc).__name__}: {exc}")
    refs = [r for r in refs if r is not None]
    if refs:
        return refs
    if degenerate:
        return degenerate
    return Outcome("skipped", "ill-conditioned", "no input draw is well-conditioned")


def refuses(module, graph: Graph, d: Degenerate) -> Outcome:
    """The forward given sizes it cannot run must raise one ValueError naming the op."""
    params = {p.name: v for p, v in graph.params.items()}
    try:
        module.forward(*[d.inputs[n] for n in graph.inputs], **params)
    except ValueError as exc:
        if str(exc).startswith(f"{graph.op.name}: "):
            return Outcome("passed", DEGENERATE, str(exc))
        return Outcome("wrong", "degenerate sizes refused unclearly", raised_at(exc))
    return Outcome("wrong", "degenerate sizes run", f"{', '.join(d.sizes)}: the forward ran")


def judged(
    op: Op, timeout: float | None, source: Callable, judge: Callable[..., Outcome]
) -> Outcome:
    """Render ``op``'s module with ``source``, load it and return ``judge(module)``, all under a
    deadline: a refusal is ``refused``; the engine's invariant check (EngineBug), a refusal
    naming another op, a timeout or any exception are ``wrong`` (the value and range modes
    share this)."""
    try:
        with deadline(timeout), tempfile.TemporaryDirectory() as folder:
            try:
                text = source(op, folder)
            except EngineBug as exc:  # the engine's own invariant check: a wrong result
                return Outcome("wrong", "engine bug", str(exc))
            except DerivationError as exc:
                if exc.op != op.name:
                    return Outcome("wrong", "refusal names another op", str(exc))
                return Outcome("refused", "derivation", str(exc))
            return judge(load_module(text, op.name, Path(folder)))
    except CaseTimeout:
        return Outcome("wrong", "timeout", f"no result within {timeout:g} s of CPU")
    except Exception as exc:
        return Outcome("wrong", f"exception {type(exc).__name__}", raised_at(exc))


def raised_at(exc: Exception) -> str:
    """The message's first line and the innermost frame of the engine that raised it."""
    message = str(exc).splitlines()[0][:300] if str(exc) else ""
    frames = traceback.extract_tb(exc.__traceback__)
    ours = [f for f in frames if "/derive/" in f.filename]
    generated = [f for f in frames if f.filename.startswith(tempfile.gettempdir())]
    if generated:
        message += f" (in the generated module, line {generated[-1].lineno})"
    elif ours:
        path = Path(ours[-1].filename)
        message += f" (at {path.parent.name}/{path.name}:{ours[-1].lineno})"
    return message
