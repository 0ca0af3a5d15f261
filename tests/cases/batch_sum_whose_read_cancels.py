"""The batch axes' range read off the text where SymPy's evaluation cancels their only read
(found by probing, 2026-11-27): ``x[..., m] - (x[..., m] - y[m])`` is ``y[m]``, and the output's
``...`` had no range ("declare ranges={'batch': ...}")."""

from derive import Op

OP = Op(
    name="batch_sum_whose_read_cancels",
    inputs=["x[..., M]", "y[M]"],
    definitions=["out[...] = Sum(x[..., m] - (x[..., m] - y[m]), m)"],
)
