"""Run many cases: one line per seed, wrong ones shrunk and recorded, a summary at the end."""

from __future__ import annotations

import re
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from fuzz.check import Outcome, run_case
from fuzz.ops import case_op
from fuzz.regressions import FOLDER, write
from fuzz.shrink import shrink


@dataclass
class Summary:
    seeds: list[int] = field(default_factory=list)
    outcomes: dict[int, Outcome] = field(default_factory=dict)
    written: list[Path] = field(default_factory=list)

    def count(self, status: str) -> int:
        return sum(o.status == status for o in self.outcomes.values())

    def with_status(self, status: str) -> list[int]:
        return [s for s in self.seeds if self.outcomes[s].status == status]

    def text(self) -> str:
        n = len(self.seeds)
        refused = self.count("refused")
        lines = [
            f"cases: {n}  passed: {self.count('passed')}  refused: {refused}"
            f" ({100 * refused / max(n, 1):.1f}%)  wrong: {self.count('wrong')}"
            f"  skipped (ill-conditioned draws): {self.count('skipped')}",
            f"seeds: {_span(self.seeds)}",
            f"wrong seeds: {' '.join(map(str, self.with_status('wrong'))) or '-'}",
        ]
        for title, status in (("wrong", "wrong"), ("refused", "refused")):
            classes = Counter(
                failure_class(o) for o in self.outcomes.values() if o.status == status
            )
            lines += [f"{title} by class:"] + [f"  {c:5d}  {k}" for k, c in classes.most_common(15)]
        lines += [f"regression written: {p}" for p in self.written]
        return "\n".join(lines)


def _span(seeds: list[int]) -> str:
    if seeds and seeds == list(range(seeds[0], seeds[0] + len(seeds))):
        return f"{seeds[0]}..{seeds[-1]}" if len(seeds) > 1 else str(seeds[0])
    return " ".join(map(str, seeds))


def failure_class(o: Outcome) -> str:
    """One line per bug class: the kind, and for errors the message with names masked."""
    if o.status == "passed" or o.kind.startswith(("forward", "gradient", "intermediate")):
        return o.kind  # which tensor and by how much vary within one class
    if o.kind == "exception KeyError":
        return o.kind  # the key is the function or name the lowering lacks: one class
    first = o.detail.splitlines()[0] if o.detail else ""
    detail = re.sub(r"^op '[^']*'(, definition `[^`]*`)?: ", "", first)
    detail = re.sub(
        r"`[^`]*`|'[^']*'|\w+\[[^\]]*\]\]?|\(\d+(, \d+)*\)|\d+(\.\d+)?(e-?\d+)?", "_", detail
    )
    return f"{o.kind}: {' '.join(detail.split()[:4])}"


def fuzz(
    seeds: list[int],
    shrink_wrong: bool = True,
    max_shrinks: int = 20,
    folder: Path = FOLDER,
    timeout: float = 60.0,
    max_definitions: int = 4,
    out=sys.stdout,
) -> Summary:
    summary = Summary(seeds=list(seeds))
    shrunk: set[str] = set()
    for seed in seeds:
        op = case_op(seed, max_definitions)
        outcome = run_case(op, seed, timeout)
        summary.outcomes[seed] = outcome
        print(
            f"seed {seed}: {outcome.line()[:240]}  [{outcome.seconds:.2f} s]", file=out, flush=True
        )
        cls = failure_class(outcome)
        if outcome.status == "wrong" and shrink_wrong and cls not in shrunk:
            if len(shrunk) < max_shrinks:
                shrunk.add(cls)
                small, small_outcome = shrink(op, seed, outcome)
                path = write(small, seed, small_outcome, op, folder)
                if path is not None:
                    summary.written.append(path)
                    print(f"  shrunk to {len(small.definitions)} definition(s): {path}", file=out)
    return summary
