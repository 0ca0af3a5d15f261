"""A "same" convolution with its padding a derived size that the output's size reads, and a
param's square in a subscript and in a size (found by probing, 2026-11-27): sizes were parsed
in alphabetical order, so ``L`` reading ``P`` was refused as an unknown name; ``pad**2`` in a
size was refused as a power, and in a subscript `derive check`'s interpreters refused it or
read it as a float (the generated module was right)."""

from derive import Op

OP = Op(
    name="sizes_read_before_their_name",
    inputs=["x[N, C, T]", "w[O, C, K]"],
    params={"pad": 1},
    sizes={"P": "(K - 1) // 2", "L": "T + 2*P - K + 1", "W": "T + pad**2 - 1"},
    ranges={"t": "L", "u": "W"},
    definitions=[
        "y[n, o, t] = Sum(x[n, c, t + k - P] * w[o, c, k], c, k)",
        "z[n, c, u] = x[n, c, u - pad**2 + 1] * W",
        "out[n, o] = Sum(y[n, o, t]**2, t) + Sum(z[n, c, u] * w[o, c, k], c, u, k)",
    ],
)
