"""Every function of the registry in one op, params and constants included."""

from derive import Op

OP = Op(
    name="functions_all",
    inputs=["x[N, M]", "y[M]"],
    params={"eps": 0.5},
    definitions=[
        "a[n, m] = sign(x[n, m]) * x[n, m] + abs(x[n, m]) * sin(eps) + erf(x[n, m])",
        "b[n, m] = log1p(x[n, m]**2) + expm1(y[m]) + softplus(x[n, m]) + cosh(y[m])*sinh(x[n, m])",
        "c[n, m] = maximum(x[n, m], y[m]) + minimum(x[n, m], 0.3) + pi * e * relu(y[m])",
        "out[n, m] = sigmoid(a[n, m] * y[m]) + cos(b[n, m]) + tanh(c[n, m]) * exp(-x[n, m]**2)",
    ],
)
