"""One row of ``python -m bench.ops``: build its variants, check them, time them, measure memory.

Variants, each a forward and backward of the row's function (``bench.op_cases``):
**A** autograd through the decomposed forward (the reference every ratio divides by),
**F** autograd through torch's fused op, **AC** autograd through ``torch.compile`` of the
decomposed forward (AOTAutograd compiles its backward too), **G** the generated forward and
backward chained by hand, **GC** ``torch.compile`` of G's whole forward and backward, **J**
``jax.jit`` of ``jax.vjp`` of the decomposed forward (``bench.jax_peer``), where JAX imports,
**T** tensorgrad's derivation of the row compiled to torch (``bench.tensorgrad_peer``), where
tensorgrad imports and the row is written in it.

Each variant's output and gradients are compared with A's in float64 and then in float32 (the
graphs that are timed; a compiled variant compiles per dtype), relative to A's largest entry
(``bench.check.TOLERANCE``); one that disagrees is WRONG and one that raises is an ERROR: neither
is timed. The rest run in rotated rounds (``bench.timing.time_rotated``); a cell is the median
of the per-round ratio to A, with quartiles.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from bench import memory
from bench.check import TOLERANCE
from bench.op_cases import Case, Inputs
from bench.timing import Round, Spread, time_rotated

VARIANTS = {
    "A": "autograd, decomposed torch ops",
    "F": "fused torch op",
    "AC": "autograd compiled",
    "G": "generated eager",
    "GC": "generated compiled",
    "J": "JAX jit",
    "T": "tensorgrad",
}
COMPILED = ("AC", "GC")
Run = Callable[[], tuple]  # run() -> (out, gradients of the floats)
Prepare = Callable[[Inputs], Run]


@dataclass
class Outcome:
    """One cell: a variant of one row. status: ok, wrong, error or skipped (``note`` says why)."""

    status: str
    note: str = ""
    diff: dict[str, float] = field(default_factory=dict)  # dtype -> relative difference from A
    ratio: Spread | None = None
    ms: float | None = None
    peak_bytes: int | None = None


@dataclass
class OpsConfig:
    """How long to time and where; ``skip_notes``: why a variant asked for is not built."""

    rounds: int = 9
    block_s: float = 0.1
    device: str = "cpu"
    compile_options: dict = field(default_factory=dict)
    memory: bool = True
    skip_notes: dict[str, str] = field(default_factory=dict)


@dataclass
class RowResult:
    key: str
    title: str
    fused_label: str
    outcomes: dict[str, Outcome]
    rounds: list[Round] = field(default_factory=list)


def autograd(forward: Callable) -> Prepare:
    """Fresh leaves once; a run is the forward and ``torch.autograd.grad`` along the cotangent."""

    def prepare(inputs: Inputs) -> Run:
        leaves = tuple(t.detach().clone().requires_grad_() for t in inputs.floats)

        def run() -> tuple:
            out = forward(*leaves, *inputs.others)
            return out.detach(), torch.autograd.grad(out, leaves, inputs.cotangent)

        return run

    return prepare


def chained(fwd_bwd: Callable) -> Prepare:
    """G, GC and J take (floats, others, cotangent) and return (out, grads) themselves."""
    return lambda inputs: lambda: fwd_bwd(inputs.floats, inputs.others, inputs.cotangent)


def build(
    case: Case, names: list[str], jax_peer, cfg: OpsConfig, tensorgrad_peer=None
) -> dict[str, Prepare]:
    """The variants asked for, less those ``cfg.skip_notes`` leaves out (J without JAX) and T
    where tensorgrad has no program for the row."""
    options = cfg.compile_options
    made = {
        "A": lambda: autograd(case.decomposed),
        "F": lambda: autograd(case.fused),
        "AC": lambda: autograd(torch.compile(case.decomposed, dynamic=False, **options)),
        "G": lambda: chained(case.generated),
        "GC": lambda: chained(torch.compile(case.generated, dynamic=False, **options)),
        "J": lambda: chained(jax_peer.fwd_bwd(case.jax(jax_peer))),
        "T": lambda: tensorgrad_peer.prepare(case.key),
    }
    built = {name: made[name]() for name in names if name not in cfg.skip_notes}
    return {name: prepare for name, prepare in built.items() if prepare is not None}


def _flat(arrays) -> torch.Tensor:
    """Torch tensors or JAX arrays as one float64 CPU vector."""
    as_torch = (
        a.detach().cpu() if isinstance(a, torch.Tensor) else torch.from_numpy(np.array(a))
        for a in arrays
    )
    return torch.cat([a.double().reshape(-1) for a in as_torch])


def relative_difference(got: tuple, want: tuple) -> float:
    """max(|grads - A's| / max |A's grads|, |out - A's| / max(1, max |A's out|)); NaN stays NaN."""
    out, grads = _flat([got[0]]), _flat(got[1])
    want_out, want_grads = _flat([want[0]]), _flat(want[1])
    grad = (grads - want_grads).abs().max() / want_grads.abs().max()
    value = (out - want_out).abs().max() / max(1.0, want_out.abs().max().item())
    return max(grad.item(), value.item()) if not (grad.isnan() or value.isnan()) else float("nan")


def _one_line(exc: Exception) -> str:
    return f"{type(exc).__name__}: {exc}".strip().splitlines()[0][:160]


def check(prepared: dict[str, Prepare], inputs: Inputs) -> dict[str, Outcome]:
    """float64, then float32: every variant against A on the same inputs."""
    outcomes = {name: Outcome("ok") for name in prepared}
    for dtype in (torch.float64, torch.float32):
        cast = inputs.to(dtype)
        try:
            want = prepared["A"](cast)()
        except Exception as exc:  # no reference: nothing can be checked, nothing is timed
            note = f"A raised {_one_line(exc)}"
            return {name: Outcome("error", note) for name in prepared}
        for name, prepare in prepared.items():
            outcome = outcomes[name]
            if outcome.status != "ok":
                continue
            try:
                got = prepare(cast)()
            except Exception as exc:  # a variant that cannot run is reported, not fatal
                outcome.status, outcome.note = "error", _one_line(exc)
                continue
            key = str(dtype).removeprefix("torch.")
            outcome.diff[key] = relative_difference(got, want)
            if not outcome.diff[key] <= TOLERANCE[dtype]:  # NaN fails too
                outcome.status = "wrong"
    return outcomes


def _unbuilt(name: str) -> str:
    return "not written in tensorgrad" if name == "T" else "not run"


def run_row(
    case: Case,
    names: list[str],
    jax_peer,
    cfg: OpsConfig,
    extra: dict | None = None,
    tensorgrad_peer=None,
) -> RowResult:
    """Check (float64, float32), time the variants that agree (float32), then their peaks.

    ``extra``: more variants, name -> make(case) -> Prepare (tests: a deliberately wrong one).
    """
    torch._dynamo.reset()  # each row compiles its own static graphs
    built = {name: make(case) for name, make in (extra or {}).items()}
    prepared = {**build(case, names, jax_peer, cfg, tensorgrad_peer), **built}
    inputs = case.make(cfg.device)
    checked = check(prepared, inputs)
    outcomes = {
        name: checked.get(name) or Outcome("skipped", cfg.skip_notes.get(name) or _unbuilt(name))
        for name in [*names, *built]
    }
    result = RowResult(case.key, case.title, case.fused_label, outcomes)
    timed = {n: prepared[n] for n, o in outcomes.items() if o.status == "ok"}
    if "A" not in timed:
        return result
    f32 = inputs.to(torch.float32)
    runs = {name: prepare(f32) for name, prepare in timed.items()}
    rounds = time_rotated(runs, cfg.rounds, cfg.block_s, cfg.device)
    for name in runs:
        outcome = outcomes[name]
        outcome.ratio = Spread.of([r.blocks[name][0] / r.blocks["A"][0] for r in rounds])
        outcome.ms = Spread.of([r.blocks[name][0] * 1e3 for r in rounds]).median
        if name != "J" and cfg.memory:
            outcome.peak_bytes = memory.peak_allocated_bytes(runs[name], cfg.device)
    result.rounds = rounds
    return result
