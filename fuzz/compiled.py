"""Compiled mode (``python -m fuzz --compiled``): the same random ops, each module run under
``torch.compile`` (Inductor, one graph) and judged against the reference interpreter.

The promise is that a generated op works wherever PyTorch's own ops do, and Inductor is where
eager-correct modules went wrong: a scatter's index stored at a wrong stride of a fused loop (a
wrong sum, or heap corruption), a vectorised atomic add that asserted on an index constant
along the inner loop, a 0-d int index read as a python int that ``fullgraph`` refuses (fuzz
1029546 and regressions 12400516, 226; found by compiling every module by hand, which the value
check never does). Here each case's module is compiled with ``fullgraph=True`` (a graph break
is a finding: nothing the compiled path must break on), shapes static on even seeds and
dynamic on odd ones, and run on the value check's well-conditioned draws
(:func:`fuzz.check.references`): the output and every float input's gradient (for the same
``grad_out``) against the definitions differentiated by autograd, relative :data:`RTOL`.

Statuses: passed, refused (the derivation's refusal, as in the value check), skipped (no
well-conditioned draw, or sizes the module must refuse), and wrong: a compiled value or shape
off, any exception while compiling or running (``compiled exception Unsupported``: a graph
break), or a timeout. Findings are recorded as ``tests/regressions/compiled_*_s<seed>.py``;
tests/modules/test_compiled.py compiles each again, and the value check runs them as every
regression.

Compiling costs seconds a case (Inductor writes and builds C++), so a run is a few cases a
minute a core; ``--timeout`` is the case's CPU time in this process, Inductor's compiler
subprocesses not counted.
"""

from __future__ import annotations

import logging
import sys
import traceback
from collections.abc import Callable
from pathlib import Path

import torch

from derive.emit.generate import module_program
from derive.language import Graph, Op
from fuzz.check import Degenerate, Outcome, Reference, drawn, judged, rel_error, timed

# Inductor sums in its own order and evaluates exp, log and tanh with its own vectorised
# routines, a rounding apart in float64; a wrong index or stride is off at order 1
RTOL = 1e-9


def run_compiled_case(
    op: Op, seed: int, timeout: float | None = 60.0, source: Callable = module_program
) -> Outcome:
    """Derive and emit ``op``, compile its ``Function.apply`` with Inductor in one graph and
    judge it on the value check's draws (see the module docstring)."""
    return timed(_run, op, seed, timeout, source)


def _run(op: Op, seed: int, timeout: float | None, source: Callable) -> Outcome:
    case = drawn(op, seed)
    if isinstance(case, Outcome):
        return case
    graph, refs = case
    if isinstance(refs, Degenerate):  # the value check judges the refusal; nothing to compile
        return Outcome("skipped", "degenerate", ", ".join(refs.sizes))
    dynamic = seed % 2 == 1

    def judge(module) -> Outcome:
        sys.modules[module.__name__] = module  # Dynamo resolves the Function by its module
        quiet = logging.root.manager.disable
        logging.disable(logging.CRITICAL)  # Inductor logs each failure's traceback: one line
        try:
            for ref in refs:
                found = compare(module, graph, ref, dynamic)
                if found:
                    return Outcome("wrong", *found)
            return Outcome("passed")
        except Exception as exc:  # compiling or running compiled (eager, the value check's)
            where = f"{raised_in(exc)}, {'dynamic' if dynamic else 'static'} shapes"
            return Outcome("wrong", f"compiled exception {type(exc).__name__}", where)
        finally:
            logging.disable(quiet)
            sys.modules.pop(module.__name__, None)
            torch._dynamo.reset()

    return judged(op, timeout, source, judge)


def compare(module, graph: Graph, ref: Reference, dynamic: bool) -> tuple[str, str] | None:
    """The compiled module's first disagreement with ``ref``: (kind, detail), or None."""
    torch._dynamo.reset()
    compiled = torch.compile(module.Function.apply, fullgraph=True, dynamic=dynamic)
    leaves = [
        ref.inputs[n].clone().requires_grad_(not graph.tensors[n].integer) for n in graph.inputs
    ]
    shapes = "dynamic" if dynamic else "static"
    with torch._inductor.config.patch(compile_threads=1):  # no pool: the case's CPU is ours
        out = compiled(*leaves)
    found = _judge("forward", graph.output, out, ref.output, shapes)
    if found:
        return found
    floats = [(n, t) for n, t in zip(graph.inputs, leaves) if t.requires_grad]
    if not floats or not out.requires_grad:
        return None
    grads = torch.autograd.grad(out, [t for _, t in floats], ref.grad_out, allow_unused=True)
    for (name, _), mine in zip(floats, grads, strict=True):
        want = ref.grads[name]
        found = _judge("gradient", f"d{name}", mine, want, shapes)
        if found:
            return found
    return None


def _judge(what: str, name: str, mine, ref: torch.Tensor, shapes: str) -> tuple[str, str] | None:
    if mine is None:
        found = None if not bool(ref.any()) else ("missing", f"{name} is None")
    elif tuple(mine.shape) != tuple(ref.shape):
        found = "shape", f"{name} is {tuple(mine.shape)}, want {tuple(ref.shape)}"
    else:
        err = rel_error(mine, ref)
        found = None if err <= RTOL else ("value", f"{name} off by {err:.3g} (relative)")
    return found and (f"compiled {what} {found[0]}", f"{found[1]}, {shapes} shapes")


def raised_in(exc: BaseException) -> str:
    """The message's first line and where the innermost cause was raised: torch's compiler
    wraps the error it met (InductorError around an AssertionError), and that frame, in
    torch or in the generated module, is the finding's address."""
    inner = exc
    while inner.__cause__ is not None:
        inner = inner.__cause__
    message = next(iter(str(exc).splitlines()), "")[:300]
    frames = traceback.extract_tb(inner.__traceback__)
    if not frames:
        return message
    path = Path(frames[-1].filename)
    parts = path.parts[path.parts.index("torch") :] if "torch" in path.parts else (path.name,)
    return f"{message} (at {'/'.join(parts)}:{frames[-1].lineno})"
