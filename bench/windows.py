"""``python -m bench.windows``: a derived convolution, max pool and average pool, forward +
backward, timed against autograd through ``torch.nn.functional`` (issue 25 item 7).

The ops are written here as a user writes them (a conv2d with bias, stride and padding; a max
pool and an average pool over a K x K window), derived and emitted at start-up, so the numbers
measure the lowering (derive/lower/windows.py, scans.py, assign.py's scatter) and nothing typed
by hand. Each size runs one step of each side, ``forward`` then ``backward`` of the generated
module (as a model chains them) and ``F.conv2d`` / ``F.max_pool2d`` / ``F.avg_pool2d`` then
``torch.autograd.grad``, with the same inputs and output gradient; both sides' gradients must
agree (float32, 1e-4 relative) before anything is timed. One process, rounds interleaved
(bench/timing.py), the ratio taken round by round, its median and quartiles reported with the
load average: on a shared machine the ratios hold better than the times, and numbers under load
are indicative only.

Sizes: LeNet's two convolutions (batch 64, 1 -> 6 channels 28 x 28, 6 -> 16 at 14 x 14, 5 x 5),
a ResNet basic block's (batch 32, 64 -> 64, 56 x 56, 3 x 3, padding 1), LeNet's pools (2 x 2,
stride 2) and a ResNet-sized one (batch 32, 64 channels, 112 x 112, 3 x 3, stride 2); average
pools at LeNet's size and a ResNet-sized one with zero padding (56 x 56, 3 x 3, stride 2,
padding 1, the padding counted as F.avg_pool2d's default).
"""

from __future__ import annotations

import argparse
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from bench.machine import load_average
from bench.timing import paired_ratio, time_interleaved
from derive import Op
from derive.emit.generate import module_source
from derive.verify.check import load_module

CONV2D = Op(
    name="bench_conv2d",
    doc="F.conv2d(x, w, b, stride, padding).",
    inputs=["x[N, C, H, W]", "w[O, C, KH, KW]", "b[O]"],
    params={"stride": 1, "padding": 0},
    sizes={
        "HO": "(H + 2*padding - KH) // stride + 1",
        "WO": "(W + 2*padding - KW) // stride + 1",
    },
    ranges={"i": "HO", "j": "WO"},
    definitions=[
        "out[n, o, i, j] = Sum(x[n, c, stride*i + p - padding, stride*j + q - padding]"
        " * w[o, c, p, q], c, p, q) + b[o]"
    ],
)
MAX_POOL2D = Op(
    name="bench_max_pool2d",
    doc="F.max_pool2d(x, kernel, stride).",
    inputs=["x[N, C, H, W]"],
    params={"kernel": 2, "stride": 2},
    sizes={"K": "kernel", "HO": "(H - kernel) // stride + 1", "WO": "(W - kernel) // stride + 1"},
    ranges={"p": "K", "q": "K", "i": "HO", "j": "WO"},
    definitions=["out[n, c, i, j] = Max(x[n, c, stride*i + p, stride*j + q], p, q)"],
)
AVG_POOL2D = Op(
    name="bench_avg_pool2d",
    doc="F.avg_pool2d(x, kernel, stride, padding).",
    inputs=["x[N, C, H, W]"],
    params={"kernel": 2, "stride": 2, "padding": 0},
    sizes={
        "K": "kernel",
        "HO": "(H + 2*padding - kernel) // stride + 1",
        "WO": "(W + 2*padding - kernel) // stride + 1",
    },
    ranges={"p": "K", "q": "K", "i": "HO", "j": "WO"},
    definitions=[
        "out[n, c, i, j] = Sum(x[n, c, stride*i + p - padding, stride*j + q - padding], p, q)"
        " / (K*K)"
    ],
)


@dataclass(frozen=True)
class Case:
    name: str
    op: str  # "conv", "pool" (max) or "avg"
    shape: tuple[int, ...]  # conv: N, C, O, H, K, padding; pool: N, C, H, K, stride[, padding]


CASES = [
    Case("conv lenet 1->6 28x28 5x5", "conv", (64, 1, 6, 28, 5, 0)),
    Case("conv lenet 6->16 14x14 5x5", "conv", (64, 6, 16, 14, 5, 0)),
    Case("conv resnet 64->64 56x56 3x3", "conv", (32, 64, 64, 56, 3, 1)),
    Case("max_pool lenet 6x24x24 2x2", "pool", (64, 6, 24, 2, 2)),
    Case("max_pool lenet 16x10x10 2x2", "pool", (64, 16, 10, 2, 2)),
    Case("max_pool resnet 64x112x112 3x3/2", "pool", (32, 64, 112, 3, 2)),
    Case("avg_pool lenet 6x24x24 2x2", "avg", (64, 6, 24, 2, 2, 0)),
    Case("avg_pool resnet 64x56x56 3x3/2 pad 1", "avg", (32, 64, 56, 3, 2, 1)),
]


def _module(op: Op, folder: Path):
    path = folder / f"{op.name}.py"
    path.write_text(module_source(op, str(folder)))
    return load_module(path)


def _steps(case: Case, modules: dict, seed: int) -> tuple[Callable, Callable, Callable]:
    """(generated step, autograd step, check) for one size, float32, fixed inputs."""
    gen = torch.Generator().manual_seed(seed)
    if case.op == "conv":
        n, c, o, h, k, pad = case.shape
        x, w = torch.randn(n, c, h, h, generator=gen), torch.randn(o, c, k, k, generator=gen)
        inputs, params = (x, w, torch.randn(o, generator=gen)), {"padding": pad}
        module = modules["conv"]
        reference = lambda x, w, b: F.conv2d(x, w, b, padding=pad)  # noqa: E731
    elif case.op == "pool":
        n, c, h, k, stride = case.shape
        inputs, params = (torch.randn(n, c, h, h, generator=gen),), {"kernel": k, "stride": stride}
        module = modules["pool"]
        reference = lambda x: F.max_pool2d(x, k, stride)  # noqa: E731
    else:
        n, c, h, k, stride, pad = case.shape
        inputs = (torch.randn(n, c, h, h, generator=gen),)
        params = {"kernel": k, "stride": stride, "padding": pad}
        module = modules["avg"]
        reference = lambda x: F.avg_pool2d(x, k, stride, pad)  # noqa: E731
    leaves = [t.clone().requires_grad_(True) for t in inputs]
    grad_out = torch.randn(reference(*inputs).shape, generator=gen)

    def generated(_round: int = 0):
        out, saved = module.forward(*inputs, **params)
        return module.backward(grad_out, saved)

    def autograd(_round: int = 0):
        return torch.autograd.grad(reference(*leaves), leaves, grad_out)

    def check() -> None:
        for mine, theirs in zip(generated(), autograd(), strict=True):
            scale = theirs.abs().max().clamp(min=1)
            if not torch.allclose(mine, theirs, rtol=0, atol=1e-4 * float(scale)):
                raise SystemExit(f"{case.name}: the generated gradient differs from autograd's")

    return generated, autograd, check


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.windows", description=__doc__)
    parser.add_argument("--rounds", type=int, default=15, help="timed rounds per size (15)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed rounds first (2)")
    parser.add_argument("--block-s", type=float, default=0.2, help="seconds a block runs (0.2)")
    parser.add_argument("--only", default="", help="sizes whose name contains this text")
    parser.add_argument("--threads", type=int, help="torch threads (default: torch's own)")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as folder:
        modules = {
            name: _module(op, Path(folder))
            for name, op in (("conv", CONV2D), ("pool", MAX_POOL2D), ("avg", AVG_POOL2D))
        }
        print(
            f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
            f"{os.cpu_count()} cores; load average at start {load_average()}"
        )
        print("| size | generated ms | autograd ms | ratio median [q1, q3] |")
        print("| --- | --- | --- | --- |")
        for case in CASES:
            if args.only not in case.name:
                continue
            generated, autograd, check = _steps(case, modules, seed=0)
            check()
            runs = {"G": generated, "A": autograd}
            t = time_interleaved(runs, args.rounds, args.warmup, args.block_s, "cpu")
            r = paired_ratio(t["G"], t["A"])
            print(
                f"| {case.name} | {t['G'].spread.median * 1e3:.2f} | "
                f"{t['A'].spread.median * 1e3:.2f} | {r.median:.2f} [{r.q1:.2f}, {r.q3:.2f}] |",
                flush=True,
            )
    print(f"load average at end {load_average()} (numbers under load are indicative only)")


if __name__ == "__main__":
    main()
