"""log(a + c e^x) as written: log1p(2 exp(p)) and a logsumexp of two, log(e^x + e^y). The
definition rules rewrite both into softplus (log(a) + softplus(x + log c - log a)), so the
forward and the backward stay finite at p = 800 (the backward's 2 e^p / (1 + 2 e^p) read as two
overflowing exps was inf there; fuzz range probe, seed 120033)."""

from derive import Op

OP = Op(
    name="shifted_softplus",
    doc="y[n] = log1p(2 exp(p[n])) + log(exp(p[n]) + exp(q[n]))",
    inputs=["p[N]", "q[N]"],
    definitions=["y[n] = log1p(2 * exp(p[n])) + log(exp(p[n]) + exp(q[n]))"],
)
