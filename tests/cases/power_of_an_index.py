"""Numbers raised to powers that read an index: a decay ``0.9**t`` and a sinusoidal position
encoding's ``10000**(2 t / T)`` (tests/cases/discounted_returns.py says why)."""

from derive import Op

OP = Op(
    name="power_of_an_index",
    inputs=["x[N, T]"],
    definitions=["out[n, t] = 0.9**t * x[n, t] + sin(x[n, t] / 10000**(2 * t / T))"],
)
