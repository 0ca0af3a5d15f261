"""``python -m bench.hvp``: a Hessian-vector product through the generated MLP, measured.

The makemore MLP's loss as a function of its parameters (embedding -> linear -> batchnorm with
the n-1 variance -> tanh -> linear -> cross-entropy), its HVP ``H v`` taken five ways:

- **T** ``torch.func.jvp(torch.func.grad(loss))`` on the model in plain torch ops (the reference);
- **G** the same forward-over-reverse through the generated modules' ``Function.apply``;
- **GR** reverse over reverse through the generated modules (``create_graph=True``, then the
  gradient of ``<g, v>``): the derived double backward;
- **TR** reverse over reverse on the torch-ops model (autograd's own double backward);
- **J** ``jax.jit(jax.jvp(jax.grad(loss)))`` on the same model, where JAX is installed.

Every variant's gradient and HVP must equal T's in float64 (relative 1e-8) before anything is
timed; the timed runs are float32. One process, rounds interleaved with the order rotated each
round, per-round ratios to T summarised by median and quartiles. One core: torch runs one
thread and the process is pinned to one core (``--core``) before JAX starts its thread pools;
XLA_FLAGS' ``--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1`` left jax
0.11.2 using 13 of 16 cores, so the flags alone do not pin it. Each block records the CPU
seconds this process got per wall second: a round where any block got less than 0.9 of its core
was shared with other processes, and the report says how many were.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from bench.machine import cpu_model
from bench.outputs import OutputError, claim, write
from bench.timing import QUIET, Round, Spread, time_rotated
from generated import batchnorm, cross_entropy, embedding, linear, tanh

EPS = 1e-5  # batchnorm's eps, the generated module's default and makemore's
TOL = 1e-8  # float64 agreement, relative to the largest entry of T's result
NAMES = {
    "T": "torch.func jvp(grad), torch ops",
    "G": "torch.func jvp(grad), generated",
    "GR": "grad of grad, generated (derived)",
    "TR": "grad of grad, torch ops (autograd)",
    "J": "JAX jit(jvp(grad))",
}


@dataclass(frozen=True)
class Size:
    name: str
    block: int
    emb: int
    hidden: int
    vocab: int
    batch: int


SIZES = {
    "makemore": Size("makemore", block=3, emb=10, hidden=200, vocab=27, batch=32),
    "large": Size("large", block=3, emb=64, hidden=1024, vocab=27, batch=512),
}


def problem(size: Size, dtype: torch.dtype, device: str, seed: int = 0):
    """(params, v, X, Y): makemore-style initial parameters, a random direction, a random batch."""
    g = torch.Generator().manual_seed(seed)
    T, E, H, V, N = size.block, size.emb, size.hidden, size.vocab, size.batch

    def randn(*shape, scale=1.0, shift=0.0):
        return (torch.randn(*shape, generator=g, dtype=torch.float64) * scale + shift).to(
            device=device, dtype=dtype
        )

    params = (
        randn(V, E),  # C
        randn(T * E, H, scale=(5 / 3) / math.sqrt(T * E)),  # W1
        randn(H, scale=0.01),  # b1
        randn(H, scale=0.1, shift=1.0),  # bngain
        randn(H, scale=0.1),  # bnbias
        randn(H, V, scale=0.1),  # W2
        randn(V, scale=0.01),  # b2
    )
    v = tuple(randn(*p.shape) for p in params)
    X = torch.randint(0, V, (N, T), generator=g).to(device)
    Y = torch.randint(0, V, (N,), generator=g).to(device)
    return params, v, X, Y


def loss_generated(params, X, Y):
    """The MLP step's loss, every op a generated ``Function``."""
    C, W1, b1, bngain, bnbias, W2, b2 = params
    emb = embedding.Function.apply(X, C)
    hprebn = linear.Function.apply(emb.reshape(X.shape[0], -1), W1, b1)
    h = tanh.Function.apply(batchnorm.Function.apply(hprebn, bngain, bnbias, EPS))
    return cross_entropy.Function.apply(linear.Function.apply(h, W2, b2), Y)


def loss_torch(params, X, Y):
    """The same loss in plain torch ops; batchnorm by hand with the unbiased (n-1) variance."""
    C, W1, b1, bngain, bnbias, W2, b2 = params
    hprebn = C[X].reshape(X.shape[0], -1) @ W1 + b1
    bnvar_inv = torch.rsqrt(hprebn.var(0, correction=1) + EPS)
    hpreact = bngain * (hprebn - hprebn.mean(0)) * bnvar_inv + bnbias
    return F.cross_entropy(torch.tanh(hpreact) @ W2 + b2, Y)


def forward_over_reverse(loss: Callable) -> Callable:
    """(grad, H v) by torch.func: the tangent of the gradient along v."""

    def hvp(params, v, X, Y):
        return torch.func.jvp(lambda p: torch.func.grad(loss)(p, X, Y), (params,), (v,))

    return hvp


def reverse_over_reverse(loss: Callable) -> Callable:
    """(grad, H v) by autograd: the gradient of <grad, v>, grad taken with create_graph."""

    def hvp(params, v, X, Y):
        params = tuple(p.detach().requires_grad_() for p in params)
        grads = torch.autograd.grad(loss(params, X, Y), params, create_graph=True)
        dot = sum((g * t).sum() for g, t in zip(grads, v))
        hv = torch.autograd.grad(dot, params, allow_unused=True, materialize_grads=True)
        return tuple(g.detach() for g in grads), hv

    return hvp


def jax_hvp() -> Callable | None:
    """J as a function of torch tensors (its results stay JAX arrays, copied back by nobody
    while timed), or None where JAX is not installed."""
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None
    jax.config.update("jax_enable_x64", True)  # float64 for the check; float32 stays float32
    jax.config.update("jax_default_matmul_precision", "highest")  # no TF32 on GPUs, as torch

    def loss(params, X, Y):
        C, W1, b1, bngain, bnbias, W2, b2 = params
        hprebn = C[X].reshape(X.shape[0], -1) @ W1 + b1
        bnvar_inv = jax.lax.rsqrt(jnp.var(hprebn, axis=0, ddof=1) + EPS)
        hpreact = bngain * (hprebn - hprebn.mean(0)) * bnvar_inv + bnbias
        logprobs = jax.nn.log_softmax(jnp.tanh(hpreact) @ W2 + b2)
        return -jnp.take_along_axis(logprobs, Y[:, None], axis=1).mean()

    compiled = jax.jit(lambda p, v, X, Y: jax.jvp(lambda q: jax.grad(loss)(q, X, Y), (p,), (v,)))
    cache: dict[int, tuple] = {}  # torch arguments -> jax arrays, converted once, not timed

    def hvp(params, v, X, Y):
        key = id(params)
        if key not in cache:
            to_jax = lambda ts: tuple(jnp.asarray(t.cpu().numpy()) for t in ts)  # noqa: E731
            cache.clear()
            cache[key] = (params, to_jax(params), to_jax(v), *to_jax((X, Y)))
        _, p, t, x, y = cache[key]
        return jax.block_until_ready(compiled(p, t, x, y))

    return hvp


def variants(names: list[str]) -> dict[str, Callable]:
    """The HVP of each named variant; J left out where JAX is not installed."""
    made = {
        "T": lambda: forward_over_reverse(loss_torch),
        "G": lambda: forward_over_reverse(loss_generated),
        "GR": lambda: reverse_over_reverse(loss_generated),
        "TR": lambda: reverse_over_reverse(loss_torch),
        "J": jax_hvp,
    }
    built = {name: made[name]() for name in names}
    return {name: f for name, f in built.items() if f is not None}


def _flat(arrays) -> torch.Tensor:
    """Torch tensors or JAX arrays as one float64 CPU vector."""
    as_torch = (
        a.detach().cpu() if isinstance(a, torch.Tensor) else torch.tensor(np.asarray(a))
        for a in arrays
    )
    return torch.cat([a.double().reshape(-1) for a in as_torch])


def relative_difference(got, want) -> float:
    """Largest |got - want| over every tensor, relative to the largest |want|."""
    got, want = _flat(got), _flat(want)
    return ((got - want).abs().max() / want.abs().max()).item()


def check(hvps: dict[str, Callable], size: Size, device: str, dtype=torch.float64) -> dict:
    """Each variant's largest relative difference from T in its gradient and its HVP."""
    params, v, X, Y = problem(size, dtype, device)
    grad, hv = hvps["T"](params, v, X, Y)
    found = {}
    for name, hvp in hvps.items():
        g, h = hvp(params, v, X, Y)
        found[name] = max(relative_difference(g, grad), relative_difference(h, hv))
    return found


def summarise(measured: list[Round], names: list[str]) -> dict[str, dict]:
    """Per variant: ms per call (median), ratio to T (per-round median, quartiles), cores."""
    rows = {}
    for name in names:
        rows[name] = {
            "ms": Spread.of([m.blocks[name][0] * 1e3 for m in measured]).median,
            "ratio": Spread.of([m.blocks[name][0] / m.blocks["T"][0] for m in measured]),
            "cores": Spread.of([m.blocks[name][1] for m in measured]).median,
        }
    return rows


def bench_size(size: Size, names: list[str], args: argparse.Namespace) -> dict:
    """Check in float64 (and float32 against it), then time in float32."""
    hvps = variants(names)
    found = check(hvps, size, args.device)
    wrong = {name: d for name, d in found.items() if not d <= TOL}
    if wrong:
        raise SystemExit(f"{size.name}: HVPs disagree with T in float64 (relative): {wrong}")
    params, v, X, Y = problem(size, torch.float32, args.device)
    # the float32 problem's own HVP in float64: what is left is float32 arithmetic
    want = hvps["T"](tuple(p.double() for p in params), tuple(t.double() for t in v), X, Y)[1]
    f32 = {name: relative_difference(hvp(params, v, X, Y)[1], want) for name, hvp in hvps.items()}
    runs = {name: (lambda hvp=hvp: hvp(params, v, X, Y)) for name, hvp in hvps.items()}
    measured = time_rotated(runs, args.rounds, args.block_s, args.device)
    quiet = [m for m in measured if not m.shared]
    return {
        "size": size,
        "float64": found,
        "float32": f32,
        "all": summarise(measured, list(hvps)),
        "quiet": summarise(quiet, list(hvps)) if len(quiet) >= 3 else None,
        "rounds": measured,
    }


def header(args: argparse.Namespace, names: list[str]) -> str:
    """What was pinned and where: a ratio means little without it."""
    if "J" in names:
        import jax

        jax_line = f"jax {jax.__version__} ({jax.default_backend()})"
    else:
        jax_line = "J not measured (JAX not installed or not asked for)"
    affinity = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else "?"
    return (
        f"{cpu_model()}, {os.cpu_count()} cores (this process may run on {affinity}); "
        f"torch {torch.__version__}, torch.set_num_threads({torch.get_num_threads()}), "
        f"device {args.device}; {jax_line}; {args.rounds} rounds, order rotated each round, "
        f"blocks of ~{args.block_s * 1e3:.0f} ms; checked in float64, timed in float32"
    )


def _cell(row: dict) -> str:
    r = row["ratio"]
    return f"{r.median:.2f} ({r.q1:.2f}-{r.q3:.2f}), {row['ms']:.3g} ms"


def markdown(results: list[dict], args: argparse.Namespace) -> str:
    """The ratio table over sizes, then per size: agreement, cores used and load."""
    sizes = [res["size"] for res in results]
    names = list(results[0]["all"])
    lines = [header(args, names), ""]
    title = " | ".join(f"{s.name} (B {s.batch}, E {s.emb}, H {s.hidden})" for s in sizes)
    lines += [f"| variant | {title} |", "|---" * (len(sizes) + 1) + "|"]
    for name in names:
        cells = " | ".join(_cell(res["all"][name]) for res in results)
        lines.append(f"| {name} {NAMES[name]} | {cells} |")
    for res in results:
        lines += ["", f"{res['size'].name}: " + _details(res, names)]
    return "\n".join(lines)


def _details(res: dict, names: list[str]) -> str:
    rounds, quiet = res["rounds"], res["quiet"]
    loads = [m.load_avg for m in rounds]
    others = [m.others for m in rounds if m.others is not None]
    agree = ", ".join(f"{n} {res['float64'][n]:.1e}" for n in names)
    f32 = ", ".join(f"{n} {res['float32'][n]:.1e}" for n in names)
    cores = ", ".join(f"{n} {res['all'][n]['cores']:.2f}" for n in names)
    text = (
        f"float64 relative difference from T (gradient and HVP): {agree}; float32 HVP from "
        f"the float64 HVP of the same float32 problem: {f32}. Share of its core this process "
        f"got while timing (median): {cores}; {sum(m.shared for m in rounds)} of {len(rounds)} "
        f"rounds had a block below {QUIET}. Load average (1 min) {min(loads):.2f}-"
        f"{max(loads):.2f}; other processes kept {min(others, default=float('nan')):.2f}-"
        f"{max(others, default=float('nan')):.2f} of {os.cpu_count()} cores busy."
    )
    if quiet:
        text += f" Ratios over the {len([m for m in rounds if not m.shared])} unshared rounds: "
        text += ", ".join(f"{n} {quiet[n]['ratio'].median:.2f}" for n in names) + "."
    return text


def pin(core: str) -> None:
    """Pin this thread, and every thread started later (JAX's pools), to one core."""
    if core != "none" and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {max(os.sched_getaffinity(0)) if core == "last" else int(core)})


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.hvp", description=__doc__.splitlines()[0]
    )
    add = parser.add_argument
    add("--sizes", default="makemore,large", help=f"comma list of {', '.join(SIZES)}")
    add("--variants", default=",".join(NAMES), help="comma list of T G GR TR J (T always runs)")
    add("--rounds", type=int, default=9, help="timed rounds per size")
    add("--block-s", type=float, default=0.1, help="seconds each variant runs in a round")
    add("--threads", type=int, default=1, help="torch threads")
    add(
        "--core", default="last", help="pin the process to this core (last: the last allowed; none)"
    )
    add("--device", default="cpu", help="cpu or cuda (J then runs on JAX's default backend)")
    add("--out", type=Path, default=Path("runs/bench"), help="folder for hvp.md and hvp.json")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        claim(args.out / "hvp.md", args.out / "hvp.json")
    except OutputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    pin(args.core)  # before JAX is imported: its thread pools inherit the affinity
    torch.set_num_threads(args.threads)
    names = ["T"] + [n for n in args.variants.split(",") if n and n != "T"]
    results = []
    for size_name in args.sizes.split(","):
        print(f"{size_name}: checking in float64, then timing ...", flush=True)
        results.append(bench_size(SIZES[size_name], names, args))
    report = markdown(results, args)
    print(report)
    write(args.out / "hvp.md", report + "\n")
    write(args.out / "hvp.json", json.dumps([_jsonable(res) for res in results], indent=1))
    return 0


def _jsonable(res: dict) -> dict:
    return {
        "size": asdict(res["size"]),
        "float64": res["float64"],
        "float32": res["float32"],
        "rows": {n: {**row, "ratio": asdict(row["ratio"])} for n, row in res["all"].items()},
        "rounds": [asdict(m) for m in res["rounds"]],
    }


if __name__ == "__main__":
    sys.exit(main())
