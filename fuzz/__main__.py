"""``python -m fuzz -n 500 --seed 0``: fuzz the engine; exit 1 on any wrong result.

``--range`` judges the same ops at inputs scaled by 30 and 300 instead (fuzz/range.py): exit 1
on any finite forward whose backward is not. ``--affine`` draws ops with affine subscripts,
strides, padding and windows (fuzz/affine.py, fuzz/windows.py), a mode of its own; ``--windows``
draws them wider (offsets to 4, strides, dilations and paddings of 3, kernels given by int params,
grouped convolutions whose derived sizes name an input's dimension), another mode again.
``--widest`` judges memory instead of values, in any draw mode (bench/widest.py);
``--compiled`` judges the module under torch.compile (fuzz/compiled.py), in any draw mode."""

from __future__ import annotations

import argparse
import math
import signal
import sys
import threading

from fuzz.regressions import FOLDER
from fuzz.run import fuzz

MAX_DEFINITIONS = 12  # the draw of a million definitions ran for minutes before its first case


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fuzz", description=__doc__)
    parser.add_argument("-n", type=int, default=200, help="number of cases (default 200)")
    parser.add_argument("--seed", type=int, default=0, help="first case seed (default 0)")
    parser.add_argument("--no-shrink", action="store_true", help="do not shrink or record")
    parser.add_argument("--max-shrinks", type=int, default=20, help="failure classes to shrink")
    parser.add_argument("--out", default=str(FOLDER), help="folder for regression op files")
    parser.add_argument("--timeout", type=float, default=60.0, help="CPU seconds per case")
    parser.add_argument("--max-definitions", type=int, default=4)
    parser.add_argument(
        "--jobs",
        type=int,
        default=0,
        help="worker processes judging seeds side by side (default: one per core this process"
        " may run on); the output is the same lines in the same order",
    )
    parser.add_argument(
        "--range",
        action="store_true",
        help="check range instead of values: inputs x30 and x300, a finite forward's backward"
        " must be finite (findings are shrunk and printed, not recorded)",
    )
    parser.add_argument(
        "--affine",
        action="store_true",
        help="draw affine subscripts, windows (convolutions, pools, cumulative sums) and declared"
        " ranges too: another op for each seed (without it, every seed draws the op it always did)",
    )
    parser.add_argument(
        "--windows",
        action="store_true",
        help="--affine, wider: offsets up to 4, strides, dilations, paddings and int params up to"
        " 3, a weight's kernel given by an int param, grouped convolutions (C / groups: derived"
        " sizes naming an input's dimension); another op for each seed again",
    )
    parser.add_argument(
        "--powers",
        action="store_true",
        help="draw powers whose exponent is not a number too (relu(a)**alpha, alpha**(a), alpha"
        " a param): another op for each seed; combines with --affine and --windows",
    )
    parser.add_argument(
        "--constants",
        action="store_true",
        help="draw some leaves as decimals far from 1 (-10000.0, 1000.5, -1e9, as masks and"
        " shifts are written): another op for each seed; combines with the others",
    )
    parser.add_argument(
        "--entries",
        action="store_true",
        help="read some axes of run-time length at one entry (x[n, 0], x[n, M - 1], a first or"
        " last token): another op for the seeds where it fires; combines with the others",
    )
    parser.add_argument(
        "--segments",
        action="store_true",
        help="put some Sums' bodies under an equality of int data and an index (where(k[n] =="
        " g, .., 0): a segment sum, a pick), the data compared only and drawn past the axis"
        " too: another op for the seeds where it fires; combines with the others",
    )
    parser.add_argument(
        "--widest",
        action="store_true",
        help="judge memory instead of values: wrong where the widest tensor of the forward,"
        " backward and second order outgrows autograd's through the definitions (half a degree"
        " of the sizes and wider at doubled sizes, or 8x there); recorded as memory_s<seed>.py",
    )
    parser.add_argument(
        "--compiled",
        action="store_true",
        help="judge each module under torch.compile (Inductor, fullgraph; static shapes on even"
        " seeds, dynamic on odd) against the reference: seconds a case; recorded as"
        " compiled_*_s<seed>.py",
    )
    args = parser.parse_args(argv)
    if args.range + args.widest + args.compiled > 1:
        parser.error("--range, --widest and --compiled are three verdicts: choose one")
    if args.n < 1 or not 0 < args.timeout < math.inf or args.max_definitions < 1:
        parser.error("-n, --timeout and --max-definitions must be positive (and finite)")
    if args.seed < 0 or args.max_shrinks < 0 or args.jobs < 0:
        parser.error("--seed, --max-shrinks and --jobs must be 0 or more")
    if args.max_definitions > MAX_DEFINITIONS:
        parser.error(f"--max-definitions {args.max_definitions}: at most {MAX_DEFINITIONS}")
    from pathlib import Path

    from derive.parallel import cores

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _stopped)  # as Ctrl-C: the summary, workers terminated
    summary = fuzz(
        list(range(args.seed, args.seed + args.n)),
        shrink_wrong=not args.no_shrink,
        max_shrinks=args.max_shrinks,
        folder=Path(args.out),
        timeout=args.timeout,
        max_definitions=args.max_definitions,
        range_mode=args.range,
        affine=args.affine,
        windows=args.windows,
        widest=args.widest,
        compiled=args.compiled,
        powers=args.powers,
        constants=args.constants,
        entries=args.entries,
        segments=args.segments,
        jobs=min(args.jobs or cores(), args.n),
    )
    print(summary.text())
    if summary.interrupted:
        print(f"interrupted after {len(summary.seeds)} of {args.n} cases", file=sys.stderr)
        return 130
    return 1 if summary.count("wrong") or summary.count("nonfinite") else 0


def _stopped(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


if __name__ == "__main__":
    sys.exit(main())
