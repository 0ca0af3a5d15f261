"""Progress on a long derivation: one line on stderr per stage, once an op has run a while.

Most ops derive and lower in a second or two and say nothing beyond ``deriving <op>``. A large
second order can take a minute (fuzz ``--windows`` 12551: 46 s, most of it the double
backward's simplification and lowering), and a command silent that long looks hung. From
:data:`QUIET_S` seconds on, each stage that starts says which it is and how long the op has
run, so a user sees where the time goes:

    deriving fuzz12551 (ops/fuzz12551.py)
      fuzz12551: the double backward, simplifying the adjoint of u (6 of 9) (11 s so far)
      ...
      fuzz12551: the double backward, lowering (31 s so far)
      fuzz12551: the tangents (44 s so far)

Wall time, as a user waits it. Only the ``generate`` command reports (``show``, the formulas
pages and the tests pass :func:`silent`); the module's text does not depend on it.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

Stage = Callable[[str], None]

QUIET_S = 5.0


def silent(stage: str) -> None:
    """No report: the default for every caller but the generate command."""


class Stages:
    """``stages("the tangents")``: say that the stage starts, once the op has run QUIET_S."""

    def __init__(
        self,
        op: str,
        out: TextIO | None = None,
        quiet_s: float = QUIET_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.op, self.out, self.quiet_s, self.clock = op, out, quiet_s, clock
        self.start = clock()

    def __call__(self, stage: str) -> None:
        elapsed = self.clock() - self.start
        if elapsed >= self.quiet_s:
            out = self.out or sys.stderr
            print(f"  {self.op}: {stage} ({elapsed:.0f} s so far)", file=out, flush=True)
