"""where() on float values: a leaky step at a learned 0-d threshold. The condition is a step in
the data, constant wherever it is differentiated (autograd's where backward selects); the
reference interpreter evaluated only index and int64 conditions and stopped with a traceback."""

from derive import Op

OP = Op(
    name="float_conditions",
    inputs=["x[N, M]", "y[N, M]", "threshold"],
    definitions=[
        "out[n, m] = where(x[n, m] > threshold, x[n, m] - threshold, 0.01 * (x[n, m] - threshold))"
        " * where(x[n, m] <= y[n, m], y[n, m], 1)",
    ],
)
