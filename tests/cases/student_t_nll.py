"""A Student-t negative log-likelihood with a learned log-scale. Its gradient divides by
``nu e^(2 s) + (y - mu)**2``; brought over one denominator, SymPy's cancel multiplied the
square out, ``mu**2 - 2 mu y + y**2 + ..``, which cancels catastrophically where y is near mu
(32% off at mu = 5e4, y - mu = 2**-10, s = -8; -inf at 1e5) and no factoring recovers the
square beside the other term. The powers of sums stand whole through the cancellation now
(``simplify._cancelled``; found by probing)."""

from derive import Op

OP = Op(
    name="student_t_nll",
    doc="The mean Student-t negative log-likelihood (up to a constant) of y under (mu, e^s).",
    inputs=["mu[N]", "s[N]", "y[N]"],
    params={"nu": 3.0},
    definitions=[
        "loss = Sum(s[n] + (nu + 1) / 2 * log(1 + (y[n] - mu[n])**2 * exp(-2 * s[n]) / nu), n)"
        " / N",
    ],
)
