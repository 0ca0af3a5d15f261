"""maximum/minimum of params (found reviewing, 2026-11-25): python's ``max(beta, nan)`` is beta,
it keeps the first of two numbers that do not compare, where ``torch.maximum`` gives nan: a
param expression's nan (``log(alpha)`` at alpha < 0) was silently dropped."""

from derive import Op

OP = Op(
    name="extremes_of_params",
    inputs=["x[N]"],
    params={"alpha": 2.0, "beta": 0.5},
    definitions=[
        "out[n] = x[n] * maximum(beta, log(alpha))"
        " + minimum(x[n], beta * alpha) * minimum(beta, log(alpha))"
    ],
)
