"""The widest tensor of a generated double backward (forward, backward and second order,
reverse over reverse) grows with the sizes as autograd's through the definitions does
(``bench.widest``): the fuzz finds whose temporaries outgrew the problem, each correct.

``bench.widest --fuzz`` found them (docs/fuzzing.md); a value check cannot: a mask over one
axis too many is exact, and at the fuzzer's sizes it fits in memory (--windows 15070's did
not: 43.8 GB)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.widest import measure
from fuzz.regressions import load

ROOT = Path(__file__).resolve().parents[2]
FOUND = sorted((ROOT / "tests" / "regressions").glob("memory_s*.py"))


@pytest.mark.parametrize("path", FOUND, ids=lambda p: p.stem)
def test_the_widest_tensor_grows_as_autograds(path: Path, tmp_path: Path) -> None:
    op, _ = load(path)
    row = measure(op, tmp_path)
    assert row is not None, f"{op.name}: no second order derived"
    # the sizes doubled: the generated widest grows by no more of a power than autograd's
    # and stays within a few times it
    assert row.excess_degree < 0.5 and row.ratio <= 8, row
