"""A selection made once where terms differ by a number alone.

``where(c, k A, 0)`` is ``k where(c, A, 0)`` (``derive.lower.select.numbers_out``), and a sum
scales by a number once, outside (``reductions._factored_out``): a multiclass squared hinge's
backward holds ``where(c == y, 0, 2 relu(m))`` for dx and ``where(c == y, 0, -2 relu(m))``
summed for the scatter at y, two where()s each over (N, C) where one selection does (4.7x
autograd's time, found surveying). Against autograd through plain torch (float64); the
where() kernels counted by a dispatch mode.
"""

from __future__ import annotations

from pathlib import Path

import torch

from bench.aten_calls import Counting
from tests.modules.emitted import against_autograd, imported


def test_terms_that_differ_by_a_number_share_their_selection(tmp_path: Path) -> None:
    path = tmp_path / "hinge.py"
    path.write_text(
        "from derive import Op\n\nOP = Op(name='hinge', inputs=['x[N, C]', 'y[N]: int64'],"
        " definitions=['loss = Sum(where(c == y[n], 0, relu(1 - x[n, y[n]] + x[n, c])**2), n,"
        " c) / (N * C)'])\n"
    )
    module, _ = imported(path, tmp_path)
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(6, 5, generator=gen, dtype=torch.float64)
    y = torch.randint(0, 5, (6,), generator=gen)

    def ref(x, y):
        margin = torch.relu(1 - x.gather(1, y[:, None]) + x) ** 2
        return margin.masked_fill(torch.nn.functional.one_hot(y, 5).bool(), 0).mean()

    against_autograd(module, [x, y], ref, gen)
    _, saved = module.forward(x, y)
    with Counting() as calls:
        module.backward(torch.ones((), dtype=torch.float64), saved)
    assert calls.calls["where"] == 2, calls.calls

