"""The whole backprop-ninja exercise as one graph: every intermediate named as in the seed.

Stepwise: the generated ``backward_all`` returns the gradient of every intermediate and
parameter (dlogprobs ... dC), each derived from its consumers' gradients, as the seed does it
by hand.
"""

from derive import Op

OP = Op(
    name="exercise",
    doc="The makemore MLP of the manual-backprop exercise, fully decomposed.",
    inputs=[
        "X[N, T]: int64",
        "Y[N]: int64",
        "C[V, E]",
        "W1[T*E, H]",
        "b1[H]",
        "bngain[H]",
        "bnbias[H]",
        "W2[H, V]",
        "b2[V]",
    ],
    params={"eps": 1e-5},
    stepwise=True,
    definitions=[
        "emb[n, t, e] = C[X[n, t], e]",
        "embcat = view(emb, N, T*E)",
        "hprebn[n, j] = Sum(embcat[n, k] * W1[k, j], k) + b1[j]",
        "bnmeani[j] = Sum(hprebn[n, j], n) / N",
        "bndiff[n, j] = hprebn[n, j] - bnmeani[j]",
        "bndiff2[n, j] = bndiff[n, j]**2",
        "bnvar[j] = Sum(bndiff2[n, j], n) / (N - 1)",
        "bnvar_inv[j] = (bnvar[j] + eps)**(-1/2)",
        "bnraw[n, j] = bndiff[n, j] * bnvar_inv[j]",
        "hpreact[n, j] = bngain[j] * bnraw[n, j] + bnbias[j]",
        "h[n, j] = tanh(hpreact[n, j])",
        "logits[n, c] = Sum(h[n, j] * W2[j, c], j) + b2[c]",
        "logit_maxes[n] = Max(logits[n, c], c)",
        "norm_logits[n, c] = logits[n, c] - logit_maxes[n]",
        "counts[n, c] = exp(norm_logits[n, c])",
        "counts_sum[n] = Sum(counts[n, c], c)",
        "counts_sum_inv[n] = counts_sum[n]**-1",
        "probs[n, c] = counts[n, c] * counts_sum_inv[n]",
        "logprobs[n, c] = log(probs[n, c])",
        "loss = -Sum(logprobs[n, Y[n]], n) / N",
    ],
)
