"""Batch normalisation in training mode, step by step as in the seed (Bessel's 1/(N-1) variance)."""

from derive import Op

OP = Op(
    name="batchnorm",
    doc="Training-mode batchnorm: batch mean, unbiased (N-1) variance, gain and bias.",
    inputs=["x[N, M]", "gain[M]", "bias[M]"],
    params={"eps": 1e-5},
    definitions=[
        "bnmeani[m] = Sum(x[n, m], n) / N",
        "bndiff[n, m] = x[n, m] - bnmeani[m]",
        "bndiff2[n, m] = bndiff[n, m]**2",
        "bnvar[m] = Sum(bndiff2[n, m], n) / (N - 1)",
        "bnvar_inv[m] = (bnvar[m] + eps)**(-1/2)",
        "bnraw[n, m] = bndiff[n, m] * bnvar_inv[m]",
        "out[n, m] = gain[m] * bnraw[n, m] + bias[m]",
    ],
)
