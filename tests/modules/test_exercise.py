"""The whole exercise graph: every intermediate's generated gradient against autograd."""

from __future__ import annotations

import torch

from generated import exercise

ORDER = [
    "logprobs", "probs", "counts_sum_inv", "counts_sum", "counts", "norm_logits", "logit_maxes",
    "logits", "h", "hpreact", "bnraw", "bnvar_inv", "bnvar", "bndiff2", "bndiff", "bnmeani",
    "hprebn", "embcat", "emb", "C", "W1", "b1", "W2", "b2", "bngain", "bnbias",
]  # fmt: skip


def _seed_forward(X, Y, C, W1, b1, bngain, bnbias, W2, b2):
    """The seed's step-by-step forward in plain torch, every intermediate kept."""
    n = X.shape[0]
    t = {}
    t["emb"] = C[X]
    t["embcat"] = t["emb"].view(n, -1)
    t["hprebn"] = t["embcat"] @ W1 + b1
    t["bnmeani"] = 1 / n * t["hprebn"].sum(0)
    t["bndiff"] = t["hprebn"] - t["bnmeani"]
    t["bndiff2"] = t["bndiff"] ** 2
    t["bnvar"] = 1 / (n - 1) * t["bndiff2"].sum(0)
    t["bnvar_inv"] = (t["bnvar"] + 1e-5) ** -0.5
    t["bnraw"] = t["bndiff"] * t["bnvar_inv"]
    t["hpreact"] = bngain * t["bnraw"] + bnbias
    t["h"] = torch.tanh(t["hpreact"])
    t["logits"] = t["h"] @ W2 + b2
    t["logit_maxes"] = t["logits"].max(1).values
    t["norm_logits"] = t["logits"] - t["logit_maxes"][:, None]
    t["counts"] = t["norm_logits"].exp()
    t["counts_sum"] = t["counts"].sum(1)
    t["counts_sum_inv"] = t["counts_sum"] ** -1
    t["probs"] = t["counts"] * t["counts_sum_inv"][:, None]
    t["logprobs"] = t["probs"].log()
    loss = -t["logprobs"][torch.arange(n), Y].mean()
    return loss, t


def _params(seed: int, n: int, vocab: int = 27, block: int = 3, n_embd: int = 10, hidden: int = 64):
    g = torch.Generator().manual_seed(seed)
    f64 = torch.float64
    X = torch.randint(0, vocab, (n, block), generator=g)
    Y = torch.randint(0, vocab, (n,), generator=g)
    params = {
        "C": torch.randn(vocab, n_embd, generator=g, dtype=f64),
        "W1": torch.randn(n_embd * block, hidden, generator=g, dtype=f64) * (5 / 3) / 30**0.5,
        "b1": torch.randn(hidden, generator=g, dtype=f64) * 0.1,
        "bngain": torch.randn(hidden, generator=g, dtype=f64) * 0.1 + 1.0,
        "bnbias": torch.randn(hidden, generator=g, dtype=f64) * 0.1,
        "W2": torch.randn(hidden, vocab, generator=g, dtype=f64) * 0.1,
        "b2": torch.randn(vocab, generator=g, dtype=f64) * 0.1,
    }
    return X, Y, params


def _table(seed: int, n: int) -> list[tuple[str, bool, bool, float]]:
    X, Y, params = _params(seed, n)
    leaves = {k: v.clone().requires_grad_() for k, v in params.items()}
    loss, inter = _seed_forward(X, Y, **leaves)
    for t in inter.values():
        t.retain_grad()
    loss.backward()
    reference = {**{k: v.grad for k, v in inter.items()}, **{k: v.grad for k, v in leaves.items()}}
    out, saved = exercise.forward(X, Y, **params)
    assert torch.allclose(out, loss.detach(), atol=1e-12, rtol=0)
    grads = exercise.backward_all(torch.ones((), dtype=torch.float64), saved)
    rows = []
    for name in ORDER:
        mine, ref = grads[name], reference[name]
        assert mine.shape == ref.shape, name
        diff = float((mine - ref).abs().max())
        rows.append((name, bool(torch.equal(mine, ref)), bool(torch.allclose(mine, ref)), diff))
    return rows


def test_every_intermediate_matches_autograd() -> None:
    for seed, n in [(2147483647, 32), (1, 2), (7, 5)]:
        rows = _table(seed, n)
        print(f"\nexercise, batch {n} (float64)")
        for name, exact, approx, diff in rows:
            print(
                f"{name:15s} | exact: {exact!s:5s} | approximate: {approx!s:5s} | maxdiff: {diff}"
            )
        assert all(diff <= 1e-10 for _, _, _, diff in rows), rows


def test_backward_contract_matches_backward_all() -> None:
    X, Y, params = _params(3, 8)
    out, saved = exercise.forward(X, Y, **params)
    grads = exercise.backward(torch.ones((), dtype=torch.float64), saved)
    assert grads[0] is None and grads[1] is None
    assert torch.equal(
        grads[2], exercise.backward_all(torch.ones((), dtype=torch.float64), saved)["C"]
    )
