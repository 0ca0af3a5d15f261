"""Params whose defaults name earlier params, one after another (c defaults to b, b to a): a
window of a entries every c, scaled by b. The signatures read b=None, c=None, resolved in
order; Function.apply's binding resolves the chain in one expression (c read None where b was
defaulted, and torch.export refused it; found probing)."""

from derive import Op

OP = Op(
    name="param_defaults_chained",
    inputs=["x[N, T]"],
    params={"a": 2, "b": "a", "c": "b"},
    sizes={"K": "a", "L": "(T - a) // c + 1"},
    ranges={"k": "K", "t": "L"},
    definitions=["out[n, t] = b * Sum(x[n, c*t + k], k)"],
)
