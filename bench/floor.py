"""The roofline floor of one MLP step: its GEMMs timed alone, plus one pass over its minimal
memory traffic (issue 27: "the large MLP step <= 1.25x its floor").

No implementation of the step can skip its six matrix products, and none can move fewer bytes
than the element-wise work must read and write once. With B the batch, K = block * n_embd the
concatenated embedding, H the hidden width, V the vocabulary and P the parameter count:

- GEMMs, forward ``embcat @ W1`` (B K H), ``h @ W2`` (B H V); backward ``h^T @ dlogits``
  (H B V), ``dlogits @ W2^T`` (B V H), ``embcat^T @ dhprebn`` (K B H), ``dhprebn @ W1^T``
  (B H K): timed as ``torch.mm`` into preallocated outputs, each operand laid out as the step
  has it (``h^T``, ``W2^T``: transposed views, read in place by BLAS);
- traffic, in elements, each touched once: batchnorm and tanh forward read hprebn and write h
  (2 B H); their backward reads dh, h and hprebn and writes dhprebn (4 B H); cross-entropy
  reads logits and writes dlogits (2 B V); the embedding gathers embcat and scatters dembcat
  (4 B K); the update reads each parameter and its gradient and writes the parameter (3 P).
  One pass over T elements is timed as ``copy_`` of T / 2 elements (it reads T / 2 and writes
  T / 2): the machine's own bandwidth, measured in the same rounds as the step.

The floor is a lower bound for this machine and these kernels, not a promise: a step that
fused its element-wise work into the GEMMs' epilogues could go below it.
"""

from __future__ import annotations

import torch

from bench.problem import BLOCK, N_EMBD, VOCAB, Problem
from bench.timing import Runner


def gemm_shapes(batch: int, n_hidden: int) -> list[tuple[int, int, int, bool, bool]]:
    """(m, k, n, left transposed, right transposed) of each ``(m, k) @ (k, n)`` the step must
    run, forward then backward."""
    B, K, H, V = batch, BLOCK * N_EMBD, n_hidden, VOCAB
    forward = [(B, K, H, False, False), (B, H, V, False, False)]
    backward = [(H, B, V, True, False), (B, V, H, False, True)]
    backward += [(K, B, H, True, False), (B, H, K, False, True)]
    return forward + backward


def traffic_elements(batch: int, n_hidden: int, n_params: int) -> int:
    """The elements the step's element-wise work must read or write at least once."""
    B, K, H, V = batch, BLOCK * N_EMBD, n_hidden, VOCAB
    return 6 * B * H + 2 * B * V + 4 * B * K + 3 * n_params


def floor_runner(problem: Problem) -> Runner:
    """runner(r): the GEMMs of one step, then one pass over its minimal traffic."""
    params = problem.params
    like = next(iter(params.values()))
    batch = problem.batches[0][0].shape[0]
    n_hidden = params["W1"].shape[1]
    dtype, device = like.dtype, like.device

    def laid(rows: int, cols: int, transposed: bool) -> torch.Tensor:
        if transposed:  # a transposed view, as h.T is in the step
            return torch.randn(cols, rows, dtype=dtype, device=device).T
        return torch.randn(rows, cols, dtype=dtype, device=device)

    products = []
    for m, k, n, left_t, right_t in gemm_shapes(batch, n_hidden):
        out = torch.empty(m, n, dtype=dtype, device=device)
        products.append((laid(m, k, left_t), laid(k, n, right_t), out))
    n_params = sum(p.numel() for p in params.values())
    half = traffic_elements(batch, n_hidden, n_params) // 2
    source = torch.randn(half, dtype=dtype, device=device)
    target = torch.empty_like(source)

    def run(r: int) -> None:
        for left, right, out in products:
            torch.mm(left, right, out=out)
        target.copy_(source)

    return run
