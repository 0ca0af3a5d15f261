"""Layer normalisation over the last dimension (torch's: biased 1/C variance, eps 1e-5)."""

from derive import Op

OP = Op(
    name="layernorm",
    doc="gain * (x - mean) / sqrt(var + eps) + bias over the last dimension of x[..., C].",
    inputs=["x[..., C]", "gain[C]", "bias[C]"],
    params={"eps": 1e-5},
    definitions=[
        "mean[...] = Sum(x[..., c], c) / C",
        "diff[..., c] = x[..., c] - mean[...]",
        "var[...] = Sum(diff[..., c]**2, c) / C",
        "rstd[...] = (var[...] + eps)**(-1/2)",
        "xhat[..., c] = diff[..., c] * rstd[...]",
        "out[..., c] = gain[c] * xhat[..., c] + bias[c]",
    ],
)
