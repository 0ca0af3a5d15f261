"""An exponential moving average, ``y[t] = sum_{s <= t} a (1 - a)**(t - s) x[s]``, a a 0-d
input (found by probing, 2026-11-25): d (1 - a)**(t - s)/da at s = t is 0 * 0**(-1) = NaN
where a = 1 (torch through the recurrence: finite); d b**0 = 0 is taken as such."""

from derive import Op

OP = Op(
    name="moving_average",
    inputs=["x[N, T]", "a"],
    ranges={"t": "T"},
    definitions=["out[n, t] = Sum(where(s <= t, a * (1 - a)**(t - s) * x[n, s], 0), s)"],
)
