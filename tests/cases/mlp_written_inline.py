"""A two-layer ReLU MLP written as one definition, the hidden layer a sum inside the relu.
Its input's adjoint, ``sum_m g[n, m] sum_f H[n, f] W1[d, f] W2[f, m]`` (H the relu's mask),
was contracted as nested: the mask with both weights first, an N x D x M product (found
probing: 58x autograd's time, 52x its memory); flattened into one contraction it is
``g @ W2.T * H @ W1.T``."""

from derive import Op

OP = Op(
    name="mlp_written_inline",
    inputs=["x[N, D]", "W1[D, F]", "W2[F, M]"],
    definitions=["out[n, m] = Sum(relu(Sum(x[n, d] * W1[d, f], d)) * W2[f, m], f)"],
)
