"""Affine layer in the seeds' layout: out = x @ W + b (W is [in, out], not F.linear's [out, in])."""

from derive import Op

OP = Op(
    name="linear",
    doc="Affine layer in the seeds' layout: out = x @ W + b.",
    inputs=["x[N, D]", "W[D, M]", "b[M]"],
    definitions=["out[n, m] = Sum(x[n, k] * W[k, m], k) + b[m]"],
)
