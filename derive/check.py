"""Verify a generated module on random inputs of its declared shapes.

The reference is torch autograd run through the module's *own generated forward*, so any op
(the user's too) can be checked without a hand-written reference: the forward is lowered from
the definitions, the backward is derived; autograd and ``gradcheck`` judge the backward.
"""

from __future__ import annotations

import importlib.util
import random
from pathlib import Path
from types import ModuleType

import sympy as sp
import torch

from derive.language import Definition, Op, parse


def load_module(path: str | Path) -> ModuleType:
    path = Path(path)
    spec = importlib.util.spec_from_file_location(f"backgen_check_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def random_inputs(op: Op, seed: int = 0, dtype: torch.dtype = torch.float64) -> list[torch.Tensor]:
    """Inputs of the declared shapes with random sizes in [2, 5]; int64 inputs index in range."""
    g = parse(op)
    rng = random.Random(seed)
    gen = torch.Generator().manual_seed(seed)
    sizes = {s: rng.randint(2, 5) for s in g.sizes}
    limits = {}
    for step in g.steps:
        if isinstance(step, Definition):
            for ind in step.body.atoms(sp.Indexed):
                for pos, sub in enumerate(ind.indices):
                    if isinstance(sub, sp.Indexed):
                        limits[sub.base.label.name] = int(ind.base.shape[pos].subs(sizes))
    out = []
    for name in g.inputs:
        t = g.tensors[name]
        shape = tuple(int(sp.sympify(d).subs(sizes)) for d in t.dims)
        if t.integer:
            out.append(torch.randint(0, limits.get(name, 3), shape, generator=gen))
        else:
            out.append(torch.randn(shape, generator=gen, dtype=dtype))
    return out


def check_module(path: str | Path, op: Op, seeds: int = 3) -> str:
    """Generated backward vs autograd (float64, max abs diff <= 1e-10) and gradcheck."""
    module = load_module(path)
    worst = 0.0
    for seed in range(seeds):
        inputs = random_inputs(op, seed)
        leaves = [t.clone().requires_grad_(t.is_floating_point()) for t in inputs]
        out, saved = module.forward(*leaves)
        grad_out = torch.randn_like(out)
        derived = module.backward(grad_out, saved)
        wanted = [t for t in leaves if t.requires_grad]
        reference = torch.autograd.grad(out, wanted, grad_out)
        mine = [g for g, t in zip(derived, leaves, strict=True) if t.requires_grad]
        for a, b in zip(mine, reference, strict=True):
            worst = max(worst, float((a - b).detach().abs().max()) if a.numel() else 0.0)
        fresh = [t.clone().requires_grad_(t.is_floating_point()) for t in inputs]
        if not torch.autograd.gradcheck(module.Function.apply, fresh):
            raise AssertionError(f"{op.name}: gradcheck failed (seed {seed})")
    if worst > 1e-10:
        raise AssertionError(f"{op.name}: backward differs from autograd by {worst:.3g}")
    return f"checked {op.name}: max |generated - autograd| = {worst:.3g}, gradcheck passed"
