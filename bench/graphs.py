"""How a step splits into graphs under torch.compile (``torch._dynamo.explain``).

A graph break costs a return to Python and splits the fusion, so the generated code should
compile into one graph; when it does not, the break reasons point at the line that stops it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from bench.problem import Problem
from bench.variants import Variant


@dataclass
class GraphReport:
    """Graphs and breaks dynamo saw in one step, each reason once with where it happened."""

    graphs: int
    breaks: int
    reasons: list[str] = field(default_factory=list)
    error: str | None = None


def _where(reason) -> str:
    frame = reason.user_stack[-1] if reason.user_stack else None
    place = f" ({'/'.join(frame.filename.split('/')[-2:])}:{frame.lineno})" if frame else ""
    first_line = reason.reason.strip().splitlines()[0] if reason.reason.strip() else "?"
    return f"{first_line}{place}"


def explain(variant: Variant, problem: Problem, lr: float) -> GraphReport:
    """Trace the eager step the compiled variant wraps; resets dynamo afterwards."""
    assert variant.eager_step is not None
    params = problem.copy_params(variant.autograd)
    X, Y = problem.batches[0]
    try:
        out = torch._dynamo.explain(variant.eager_step)(params, X, Y, lr)
    except Exception as exc:  # explain is diagnostics: never fatal for the benchmark
        return GraphReport(0, 0, error=f"{type(exc).__name__}: {exc}".splitlines()[0][:200])
    finally:
        torch._dynamo.reset()
    reasons = list(dict.fromkeys(_where(r) for r in out.break_reasons))
    return GraphReport(out.graph_count, out.graph_break_count, reasons)
