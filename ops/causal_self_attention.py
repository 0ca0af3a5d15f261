"""Causal multi-head self-attention (makemore's CausalSelfAttention), derived as one op.

makemore writes ``q, k, v = c_attn(x).split(C, dim=2)``, a view to (B, T, n_head, D) per head,
``softmax(q k^T / sqrt(D))`` with the future masked, ``@ v``, heads merged, ``c_proj``. Here:

- the three column blocks of Wqkv and the heads inside each are a view of the weight,
  ``Wh[c, s, h, d] = Wqkv[c, s*C + h*D + d]``, and q, k, v read blocks s = 0, 1, 2; merging
  the heads side by side and multiplying by Wo is one contraction with ``Woh[h, d, m] =
  Wo[h*D + d, m]`` over (h, d), so no intermediate is reshaped;
- the causal mask is an index comparison, ``where(t2 <= t1, s, -inf)``: it is a fact about
  positions, so it belongs in the definition (a mask input could be passed wrong), and it keeps
  every Sum over whole axes, where the simplifier's rules hold as they are (a bounded range
  ``Sum(e, (t2, 0, t1))`` would need each rule to reason about its bounds);
- the softmax is the seed's (max subtracted, exp, row sum, divide), so the derivation finds
  ``dS = P * (dP - rowsum(dP * P))`` and the max's adjoint 0 by its general rules.
"""

from derive import Op

OP = Op(
    name="causal_self_attention",
    doc="Causal multi-head self-attention of x[B, T, C]: x @ Wqkv + bqkv split into q, k, v, "
    "softmax(q k^T / sqrt(D)) over past keys, heads merged, then @ Wo + bo.",
    inputs=["x[B, T, C]", "Wqkv[C, 3*C]", "bqkv[3*C]", "Wo[C, C]", "bo[C]"],
    params={"n_head": 4},
    sizes={"H": "n_head", "D": "C / n_head"},
    definitions=[
        "Wh = view(Wqkv, C, 3, H, D)",
        "bh = view(bqkv, 3, H, D)",
        "Woh = view(Wo, H, D, C)",
        "q[b, h, t, d] = Sum(x[b, t, c] * Wh[c, 0, h, d], c) + bh[0, h, d]",
        "k[b, h, t, d] = Sum(x[b, t, c] * Wh[c, 1, h, d], c) + bh[1, h, d]",
        "v[b, h, t, d] = Sum(x[b, t, c] * Wh[c, 2, h, d], c) + bh[2, h, d]",
        "scores[b, h, t1, t2] = where(t2 <= t1, Sum(q[b, h, t1, d] * k[b, h, t2, d], d) / sqrt(D),"
        " -inf)",
        "maxes[b, h, t1] = Max(scores[b, h, t1, t2], t2)",
        "counts[b, h, t1, t2] = exp(scores[b, h, t1, t2] - maxes[b, h, t1])",
        "counts_sum[b, h, t1] = Sum(counts[b, h, t1, t2], t2)",
        "probs[b, h, t1, t2] = counts[b, h, t1, t2] / counts_sum[b, h, t1]",
        "y[b, h, t, d] = Sum(probs[b, h, t, t2] * v[b, h, t2, d], t2)",
        "out[b, t, m] = Sum(y[b, h, t, d] * Woh[h, d, m], h, d) + bo[m]",
    ],
)
