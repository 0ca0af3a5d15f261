"""Run many cases: one line per seed, wrong ones shrunk and recorded, a summary at the end."""

from __future__ import annotations

import functools
import re
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from derive.language import Op
from fuzz.check import DEGENERATE, Outcome, run_case
from fuzz.ops import case_op
from fuzz.range import run_range_case
from fuzz.regressions import FOLDER, write
from fuzz.shrink import shrink
from fuzz.workers import Crashed, isolated, judged

FAILING = ("wrong", "nonfinite")  # the statuses a case is shrunk for and the exit code counts
SHRINK_BUDGET = 90.0  # seconds to shrink one failing class
SHRINK_COMPILED = 900.0  # the same under --compiled: each candidate compiles, seconds apiece


@dataclass
class Summary:
    seeds: list[int] = field(default_factory=list)
    outcomes: dict[int, Outcome] = field(default_factory=dict)
    written: list[Path] = field(default_factory=list)
    range_mode: bool = False  # --range: the statuses include nonfinite (fuzz/range.py)
    widest: bool = False  # --widest: skipped is "not measured" (bench/widest.py)
    timeout: float = 60.0  # CPU seconds per case
    interrupted: bool = False  # stopped by Ctrl-C: seeds holds the cases judged

    def count(self, status: str) -> int:
        return sum(o.status == status for o in self.outcomes.values())

    def with_status(self, status: str) -> list[int]:
        return [s for s in self.seeds if self.outcomes[s].status == status]

    def naming(self) -> int:
        """Refusals whose message names the definition as well as the op (issue 9 asks both)."""
        return sum(
            o.status == "refused" and ", definition `" in o.detail for o in self.outcomes.values()
        )

    def degenerate(self) -> int:
        """Passes that are a refusal: sizes no draw makes positive, refused in one line."""
        return sum(o.status == "passed" and o.kind == DEGENERATE for o in self.outcomes.values())

    def text(self) -> str:
        n = len(self.seeds)
        refused = self.count("refused")
        failing = FAILING if self.range_mode else FAILING[:1]
        counts = "".join(f"  {status}: {self.count(status)}" for status in failing)
        skipped = (
            "forward not finite"
            if self.range_mode
            else "not measured" if self.widest else "ill-conditioned draws"
        )
        lines = [
            f"cases: {n}  passed: {self.count('passed')}  refused: {refused}"
            f" ({100 * refused / max(n, 1):.1f}%){counts}"
            f"  skipped ({skipped}): {self.count('skipped')}",
            f"refusals naming a definition: {self.naming()} of {refused}"
            f"  passed by refusing sizes no draw makes positive: {self.degenerate()}",
            f"seeds: {_span(self.seeds)}",
        ]
        for status in failing:
            lines.append(f"{status} seeds: {' '.join(map(str, self.with_status(status))) or '-'}")
        for status in (*failing, "refused", "skipped"):
            found = [failure_class(o) for o in self.outcomes.values() if o.status == status]
            classes = Counter(found).most_common(15)
            lines += [f"{status} by class:"] + [f"  {c:5d}  {k}" for k, c in classes]
        lines += [f"regression written: {p}" for p in self.written]
        return "\n".join(lines)


def _span(seeds: list[int]) -> str:
    if seeds and seeds == list(range(seeds[0], seeds[0] + len(seeds))):
        return f"{seeds[0]}..{seeds[-1]}" if len(seeds) > 1 else str(seeds[0])
    return " ".join(map(str, seeds))


def failure_class(o: Outcome) -> str:
    """One line per bug class: the kind, and for errors the message with names masked."""
    measured = ("forward", "gradient", "intermediate", "backward", "memory")
    if o.status == "passed" or o.kind.startswith(measured):
        return o.kind  # which tensor and by how much vary within one class
    if o.kind == "exception KeyError":
        return o.kind  # the key is the function or name the lowering lacks: one class
    first = o.detail.splitlines()[0] if o.detail else ""
    detail = re.sub(r"^op '[^']*'(, definition `[^`]*`)?: ", "", first)
    detail = re.sub(
        r"`[^`]*`|'[^']*'|\w+\[[^\]]*\]\]?|\(\d+(, \d+)*\)|\d+(\.\d+)?(e-?\d+)?", "_", detail
    )
    return f"{o.kind}: {' '.join(detail.split()[:3])}"


def fuzz(
    seeds: list[int],
    shrink_wrong: bool = True,
    max_shrinks: int = 20,
    folder: Path = FOLDER,
    timeout: float = 60.0,
    max_definitions: int = 4,
    out=sys.stdout,
    range_mode: bool = False,
    affine: bool = False,
    windows: bool = False,
    widest: bool = False,
    compiled: bool = False,
    powers: bool = False,
    constants: bool = False,
    entries: bool = False,
    segments: bool = False,
    jobs: int = 1,
) -> Summary:
    """Judge each seed's op: by value (:func:`~fuzz.check.run_case`), or with ``range_mode`` at
    scaled inputs (:func:`~fuzz.range.run_range_case`). The first case of each failing class
    is shrunk; a wrong one is recorded in ``folder``, a nonfinite one printed (the regression
    tests replay the value check, which it passes). ``affine`` draws the ops with affine
    subscripts and windows (``fuzz.affine``), a mode of its own: the same seed, another op;
    ``windows`` draws them wider (``fuzz.ops.random_op``), a mode of its own again, as is
    ``powers`` (exponents that are not numbers, with any of the others); ``constants``
    (leaves that are decimals far from 1) and ``entries`` (one entry of an axis of run-time
    length, ``x[n, M - 1]``) and ``segments`` (equalities of compared-only int data and an
    index, ``where(k[n] == g, .., 0)``) too. With
    ``widest`` the verdict is the memory oracle's (``bench.widest.judge``): wrong where the
    widest tensor of the forward, backward and second order outgrows autograd's through the
    definitions, recorded as ``memory_s<seed>.py``; with ``compiled`` it is the module's under
    torch.compile (``fuzz.compiled``), recorded as ``compiled_*_s<seed>.py``. ``jobs``: worker
    processes judging seeds side by side (:func:`fuzz.workers.judged`); the output is the same
    lines in the same order. A case whose process dies is wrong (``crash``); compiled cases
    always run in workers, and their finds shrink in a process of their own, for Inductor
    can corrupt the heap."""
    judge: Callable[..., Outcome] = run_range_case if range_mode else run_case
    if widest:  # the memory oracle measures through the generated modules (bench/widest.py)
        from bench.widest import judge as memory

        judge = memory
    if compiled:  # Inductor, one graph, against the reference (fuzz/compiled.py)
        from fuzz.compiled import run_compiled_case

        judge = run_compiled_case
    summary = Summary(seeds=list(seeds), range_mode=range_mode, widest=widest, timeout=timeout)
    modes = (affine, windows, powers, constants, entries, segments)
    shrinking = Shrinking(shrink_wrong, max_shrinks, SHRINK_BUDGET, "crash", False)
    if compiled:
        shrinking = Shrinking(shrink_wrong, max_shrinks, SHRINK_COMPILED, "compiled crash", True)
    try:
        _judge_each(summary, judge, out, folder, shrinking, max_definitions, modes, jobs)
    except KeyboardInterrupt:  # Ctrl-C: the summary of the cases judged, not a traceback
        summary.seeds = [s for s in summary.seeds if s in summary.outcomes]
        summary.interrupted = True
    return summary


@dataclass(frozen=True)
class Shrinking:
    """How failing cases are shrunk, and how a case that kills its process is named."""

    wrong: bool  # shrink and record at all
    most: int  # failure classes shrunk
    budget: float  # seconds for one
    crash: str  # the kind of a case whose process died
    isolated: bool  # judge every case in a worker, and shrink in a process of its own


def _judge_each(
    summary: Summary,
    judge: Callable[..., Outcome],
    out,
    folder: Path,
    shrinking: Shrinking,
    max_definitions: int,
    modes: tuple[bool, bool, bool, bool, bool, bool],
    jobs: int,
) -> None:
    shrunk: set[str] = set()
    one = functools.partial(_one, judge, summary.timeout, max_definitions, modes)
    outcomes = judged(one, summary.seeds, jobs, shrinking.crash, shrinking.isolated)
    for seed, outcome in zip(summary.seeds, outcomes):
        summary.outcomes[seed] = outcome
        print(
            f"seed {seed}: {outcome.line()[:240]}  [{outcome.seconds:.2f} s]", file=out, flush=True
        )
        cls = failure_class(outcome)
        if outcome.status not in FAILING or not shrinking.wrong or cls in shrunk:
            continue
        if len(shrunk) < shrinking.most:
            shrunk.add(cls)
            op = case_op(seed, max_definitions, *modes)  # drawn again: a worker judged it
            small, small_outcome = _shrunk(op, seed, outcome, judge, shrinking)
            if outcome.status == "nonfinite":
                print(f"  shrunk to: {small.definitions} ({small_outcome.detail})", file=out)
                continue
            try:
                path = write(small, seed, small_outcome, op, folder)
            except OSError as exc:  # the finding stands in this output; the run goes on
                print(f"  shrunk, not recorded in {folder}: {exc.strerror or exc}", file=out)
                continue
            if path is not None:
                summary.written.append(path)
                print(f"  shrunk to {len(small.definitions)} definition(s): {path}", file=out)


def _one(
    judge: Callable[..., Outcome],
    timeout: float,
    max_definitions: int,
    modes: tuple[bool, ...],
    seed: int,
) -> Outcome:
    """One seed's op drawn and judged (in a worker, or here)."""
    return judge(case_op(seed, max_definitions, *modes), seed, timeout)


def _shrunk(
    op: Op, seed: int, outcome: Outcome, judge: Callable[..., Outcome], shrinking: Shrinking
) -> tuple[Op, Outcome]:
    """The smallest op failing as ``outcome`` did (:func:`fuzz.shrink.shrink`); in a process
    of its own where ``shrinking.isolated``, and a case that crashes is kept as it is (its
    candidates would each have to run alone)."""
    if outcome.kind == shrinking.crash:
        return op, outcome
    if not shrinking.isolated:
        return shrink(op, seed, outcome, shrinking.budget, judge=judge)
    try:
        return isolated(functools.partial(shrink, judge=judge), op, seed, outcome, shrinking.budget)
    except Crashed:  # a candidate took the process down: the find as it was drawn
        return op, outcome
