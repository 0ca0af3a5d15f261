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


def test_a_sum_over_an_equality_with_a_number_is_the_term_it_picks(tmp_path: Path) -> None:
    """RoPE's rotate-half, ``where(j == 0, -x[.., 1, i], x[.., 0, i])`` over a pair axis j:
    its adjoint sums ``where(j == 0, 0, g[.., j, i])`` and ``where(j == 0, -g[.., j, i], 0)``
    over j, each a where() over the whole gradient and a sum, where the equality picks one
    term (``reductions._picked``): ``g[.., 1, :]`` and ``-g[.., 0, :]``, views (1.84x
    autograd's time, found surveying). Against autograd through torch.cat of the halves;
    no sum left in the backward."""
    path = tmp_path / "rotate.py"
    path.write_text(
        "from derive import Op\n\nOP = Op(name='rotate', inputs=['x[N, D]', 'w[D2]'], sizes={"
        "'D2': 'D / 2'}, definitions=['xv = view(x, N, 2, D2)', 'rv[n, j, i] = xv[n, j, i] *"
        " w[i] + where(j == 0, -xv[n, 1, i], xv[n, 0, i])', 'out = view(rv, N, D)'])\n"
    )
    module, _ = imported(path, tmp_path)
    gen = torch.Generator().manual_seed(7)
    x = torch.randn(5, 8, generator=gen, dtype=torch.float64)
    w = torch.randn(4, generator=gen, dtype=torch.float64)

    def ref(x, w):
        a, b = x[:, :4], x[:, 4:]
        return x * torch.cat([w, w]) + torch.cat([-b, a], 1)

    against_autograd(module, [x, w], ref, gen)
    _, saved = module.forward(x, w)
    with Counting() as calls:
        module.backward(torch.ones(5, 8, dtype=torch.float64), saved, needs=(True, False))
    assert not calls.calls["sum"], calls.calls
