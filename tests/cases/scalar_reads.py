"""0-d tensors read whole: a standardisation over the whole input (two scalar statistics read
by the next definitions), scaled by a 0-d input; each scalar's adjoint sums over every entry
that reads it. Refused before ('s' has no index) though the definitions are the natural ones."""

from derive import Op

OP = Op(
    name="scalar_reads",
    inputs=["x[N, M]", "gain"],
    definitions=[
        "mean = Sum(x[n, m], n, m) / (N * M)",
        "var = Sum((x[n, m] - mean)**2, n, m) / (N * M)",
        "out[n, m] = gain * (x[n, m] - mean) / sqrt(var + 1e-5)",
    ],
)
