"""``python -m bench.widest [OP_FILE ...]``: the widest tensor each derived double backward
makes, against autograd's through the definitions, and how each grows with the sizes.

A double backward that builds an (N, C, C) temporary where autograd's widest is (N, C) is
correct and passes every value check, but is quadratic in C: layernorm's was, 17 GB in float32
at (4096, 1024), found by a survey like this one. For each op (every file of ``ops/`` and
``tests/cases/`` by default), reverse over reverse (``derive.verify.oracle.second_order``:
the gradient of ``<v, d<grad_out, out>/dx>``) runs once through the generated
``Function.apply`` and once through torch autograd over the text oracle
(``derive.verify.oracle.oracle_output``), on the same inputs, recording the most entries of
any tensor an aten call returns (a ``TorchDispatchMode``, below autograd). It does so at the
checker's random sizes (each in [2, 5]) and at the same draw with every size doubled: the
growth ``log2(widest at 2x / widest at 1x)`` is the widest tensor's degree in the sizes, and
a generated degree above autograd's is a temporary that outgrows the problem.

Counts are deterministic (no timing, so no load to state). Rows are sorted by the degree
over autograd's, then by the ratio of the widest tensors at 2x.

``--fuzz MODE --first S -n N`` surveys the fuzzer's ops instead (value, affine or windows
mode; each under a CPU limit, ``--timeout``): the memory oracle the value checks lack, whose
finds are recorded as ``tests/regressions/memory_s<seed>.py`` (docs/fuzzing.md).
"""

from __future__ import annotations

import argparse
import functools
import glob
import math
import runpy
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from derive.emit.generate import module_program
from derive.language import Op, parse
from derive.verify.check import defined_inputs
from derive.verify.oracle import oracle_output, second_order
from fuzz.check import CaseTimeout, Outcome, deadline, load_module

REPO = Path(__file__).resolve().parent.parent
SCALES = (1, 2)


class Widest(TorchDispatchMode):
    """The most entries of any tensor an aten call returns while active."""

    def __init__(self) -> None:
        super().__init__()
        self.entries = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if isinstance(out, torch.Tensor):
            self.entries = max(self.entries, out.numel())
        return out


@dataclass(frozen=True)
class Row:
    """One op: the widest tensor of its double backward at each scale, generated and autograd."""

    name: str
    generated: tuple[int, ...]
    autograd: tuple[int, ...]

    @staticmethod
    def _degree(widest: tuple[int, ...]) -> float:
        return math.log2(max(widest[-1], 1) / max(widest[0], 1)) / math.log2(SCALES[-1])

    @property
    def excess_degree(self) -> float:
        """How much faster than autograd's the generated widest tensor grows (0: alike). A
        generated widest narrower than autograd's at the first scale counts as autograd's
        there: narrower at the start and no wider at the end is no faster growth (fuzz 15159's
        double backward lost a tensor of zeros nobody read, the widest at the checker's sizes,
        and was equal to autograd's at 2x, 3x and 4x but read as +0.97)."""
        start = max(self.generated[0], self.autograd[0])
        return self._degree((start, *self.generated[1:])) - self._degree(self.autograd)

    @property
    def ratio(self) -> float:
        return self.generated[-1] / max(self.autograd[-1], 1)


def _widest(apply, inputs: dict, grad_out: torch.Tensor, v: dict) -> int:
    with Widest() as w:
        second_order(apply, inputs, grad_out, v)
    return w.entries


def _oracle(op: Op, names: list[str]):
    """The op's output as its text defines it, a function of the inputs in order."""
    return lambda *tensors: oracle_output(op, dict(zip(names, tensors, strict=True)))


def measure(op: Op, folder: Path, seed: int = 0, program: str | None = None) -> Row | None:
    """The op's row (None: its module derives no second order). ``program``: the op's module
    text where the caller derived it already (a test's cache), else derived here."""
    graph = parse(op)
    text = module_program(op, folder) if program is None else program
    module = load_module(text, op.name, folder)
    if getattr(module, "NOT_DERIVED", None):
        return None
    generated, autograd = [], []
    for scale in SCALES:
        inputs, _ = defined_inputs(graph, seed, scale=scale)
        named = dict(zip(graph.inputs, inputs, strict=True))
        gen = torch.Generator().manual_seed(seed + 7)
        out, _ = module.forward(*inputs)
        grad_out = torch.randn(out.shape, generator=gen, dtype=out.dtype)
        v = {
            n: torch.randn(t.shape, generator=gen, dtype=t.dtype)
            for n, t in named.items()
            if t.is_floating_point()
        }

        generated.append(_widest(module.Function.apply, named, grad_out, v))
        autograd.append(_widest(_oracle(op, list(named)), named, grad_out, v))
    return Row(op.name, tuple(generated), tuple(autograd))


def table(rows: list[Row]) -> str:
    """A markdown table, the rows that outgrow autograd's first."""
    head = "| op | generated widest (1x, 2x) | autograd widest (1x, 2x) | 2x ratio | degree over"
    lines = [head + " autograd |", "|---|---:|---:|---:|---:|"]
    for r in sorted(rows, key=lambda r: (-round(r.excess_degree, 2), -r.ratio, r.name)):
        gen, ag = (", ".join(f"{n:,}" for n in w) for w in (r.generated, r.autograd))
        lines.append(f"| {r.name} | {gen} | {ag} | {r.ratio:.1f} | {r.excess_degree:+.2f} |")
    return "\n".join(lines)


def outgrows(row: Row) -> bool:
    """The generated widest tensor grows by half a power of the sizes or more beyond
    autograd's and is already wider at the doubled sizes, or is over 8x it there: a find
    (tests/modules/test_widest.py holds every op to the stricter converse). A faster growth
    still under autograd's at those sizes (256 entries against 1,024: --windows 15147) is
    left to the survey's table, not called wrong."""
    return row.excess_degree >= 0.5 and row.ratio > 1 or row.ratio > 8


def judge(op: Op, seed: int, timeout: float | None = 60.0) -> Outcome:
    """``python -m fuzz --widest``'s verdict on one op: wrong ("memory") where its widest
    tensor outgrows autograd's; skipped where it cannot be measured (no second order, no
    finite draw, over the CPU limit), since the value modes judge those."""
    start = time.perf_counter()
    try:
        with tempfile.TemporaryDirectory() as tmp, deadline(timeout):
            row = measure(op, Path(tmp))
    except CaseTimeout:
        return Outcome("skipped", "not measured", f"over {timeout:g} s of CPU")
    except Exception as exc:  # the value modes judge a failing op; this one measures
        return Outcome("skipped", "not measured", f"{type(exc).__name__}: {exc}"[:200])
    seconds = time.perf_counter() - start
    if row is None:
        return Outcome("skipped", "not measured", "no second order", seconds)
    if outgrows(row):
        detail = (
            f"widest {row.generated[-1]:,} entries against autograd's {row.autograd[-1]:,} at"
            f" doubled sizes ({row.excess_degree:+.2f} degree)"
        )
        return Outcome("wrong", "memory", detail, seconds)
    return Outcome("passed", seconds=seconds)


def _ops(args: argparse.Namespace) -> Iterator[tuple[str, Callable[[], Op | None]]]:
    """(label, a thunk making the op) for each op the command line names."""
    if args.fuzz:
        from fuzz.ops import case_op

        mode = {"affine": args.fuzz == "affine", "windows": args.fuzz == "windows"}
        for seed in range(args.first, args.first + args.n):
            yield f"{args.fuzz} {seed}", functools.partial(case_op, seed, **mode)
        return
    paths = args.paths or sorted(glob.glob(str(REPO / "ops" / "*.py"))) + sorted(
        glob.glob(str(REPO / "tests" / "cases" / "*.py"))
    )
    for path in paths:
        yield path, lambda path=path: runpy.run_path(path).get("OP")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.widest", description=__doc__)
    parser.add_argument("paths", nargs="*", help="op files (default: ops/ and tests/cases/)")
    parser.add_argument("--seed", type=int, default=0, help="the size and input draw")
    parser.add_argument(
        "--fuzz",
        choices=["value", "affine", "windows"],
        help="survey the fuzzer's ops of this mode instead (seeds --first .. --first + -n - 1)",
    )
    parser.add_argument("--first", type=int, default=0, help="first fuzz case seed")
    parser.add_argument("-n", type=int, default=100, help="number of fuzz cases")
    parser.add_argument("--timeout", type=float, default=60.0, help="CPU seconds per op")
    parser.add_argument(
        "--over",
        type=float,
        default=None,
        help="list only the rows whose degree over autograd's is at least this (0.5: outgrows)",
    )
    args = parser.parse_args(argv)
    if args.fuzz and args.paths:
        parser.error("--fuzz surveys the fuzzer's ops: name no op files with it")
    todo = list(_ops(args))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for k, (label, make) in enumerate(todo, 1):
            print(f"[{k}/{len(todo)}] {label}", file=sys.stderr, flush=True)
            try:
                with deadline(args.timeout):
                    op = make()
                    if not isinstance(op, Op):
                        continue
                    row = measure(op, Path(tmp), args.seed)
            except CaseTimeout:
                print(f"  {label}: not measured (over {args.timeout:g} s of CPU)", file=sys.stderr)
                continue
            except Exception as exc:  # a survey: one op's trouble is a line, not the end
                print(f"  {label}: not measured ({type(exc).__name__}: {exc})", file=sys.stderr)
                continue
            if row is not None and (args.over is None or row.excess_degree >= args.over):
                rows.append(row)
    print(table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
