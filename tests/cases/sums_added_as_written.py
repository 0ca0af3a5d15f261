"""Sums added in the order the text adds them: the k3 estimator of a KL divergence,
``expm1(d) - d`` with ``d = y - x`` written out, was ``(expm1(d) + x) - y`` to SymPy, 0 where
it is 5e-19; a margin added to a difference, ``a - b + eps``, lost eps where a and b are
large (``parse.written_sums``; probing, twenty-third session)."""

from derive import Op

OP = Op(
    name="sums_added_as_written",
    inputs=["x[N]", "y[N]", "a[N]", "b[N]"],
    params={"eps": 1e-6},
    definitions=[
        "k3[n] = expm1(y[n] - x[n]) - (y[n] - x[n])",
        "out[n] = k3[n] * (a[n] - b[n] + eps)",
    ],
)
