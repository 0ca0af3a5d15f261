"""An exponential moving average as a causal convolution with a constant kernel, found by
probing: a constant is taken into its readers as a formula, and ``kern[t - s]`` read past
its axis (s > t) was ``gamma**(t - s)`` instead of 0, so the average added the future. The
shifted read ``c[k + 1]`` past the last k is 0 too."""

from derive import Op

OP = Op(
    name="constant_read_past_its_axis",
    inputs=["x[N, T]", "y[T]"],
    params={"gamma": 0.5},
    ranges={"k": "T", "t": "T"},
    definitions=[
        "kern[k] = gamma**k",
        "c[k] = k + 1",
        "out[n, t] = Sum(x[n, s] * kern[t - s], s) + y[t] * c[t + 1]",
    ],
)
