"""A cumulative sum along the last axis, torch.cumsum(x, -1) (issue 25), written as the
triangular sum it is,

    out[..., t] = sum_s [s <= t] x[..., s],

the output's t declared to range over T (no tensor is read at a plain t). The backward is
derived: dx[s] = sum_{t >= s} grad_out[t], the reversed cumulative sum of grad_out."""

from derive import Op

OP = Op(
    name="cumsum",
    doc="torch.cumsum(x, -1): the running sum along the last axis.",
    inputs=["x[..., T]"],
    ranges={"t": "T"},
    definitions=["out[batch, t] = Sum(where(s <= t, x[batch, s], 0), s)"],
)
