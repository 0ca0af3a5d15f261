"""log(1 - e^-x), a log-probability's complement (found by probing, 2026-11-26/27): the
forward was log(-expm1(-x)), 0 past x = 37 where the value is -e^-x (-4.2e-18 at 40); and its
second order, a stepwise derivation with no accuracy rows, read e^x / expm1(x) as written: inf
/ inf = nan past x = 710. Now log1p(-e^-x) past x = log 2 (the log1mexp switch), and
e^x / expm1(x) as -1 / expm1(-x) in every derivation."""

from derive import Op

OP = Op(
    name="log_one_minus_exp",
    inputs=["x[N]"],
    definitions=["out[n] = log(1 - exp(-x[n]))"],
)
