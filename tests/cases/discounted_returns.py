"""Discounted returns, ``sum_{s >= t} gamma**(s - t) r[s]``, gamma a 0-d input: a number
raised to a power that reads indices. Found by probing (2026-11-25): the lowering took every
exponent for a python number, and ``gamma**(s - t)`` (or ``0.9**t``, or a sinusoidal
encoding's ``10000**(2 t / T)``) was refused as an engine bug, "lost its free index"."""

from derive import Op

OP = Op(
    name="discounted_returns",
    inputs=["r[N, T]", "gamma"],
    ranges={"t": "T"},
    definitions=["out[n, t] = Sum(where(s >= t, gamma**(s - t) * r[n, s], 0), s)"],
)
