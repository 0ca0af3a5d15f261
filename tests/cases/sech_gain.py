"""A gain over a hyperbolic secant: out = exp(g) / cosh(e) summed over g's axes.

1/cosh's derivative is -sinh/cosh**2, and at |e| ~ 450 cosh(e)**2 overflows while the product
with exp(g) does too: inf / inf. Written as tanh(e)/cosh(e) it stays finite (fuzz --range
seed 180141, shrunk)."""

from derive import Op

OP = Op(
    name="sech_gain",
    doc="exp(g) / cosh(e), summed over g's axes",
    inputs=["g[A, P]", "e[W]"],
    definitions=["out[w, p, a] = exp(g[a, p]) / cosh(e[w])"],
)
