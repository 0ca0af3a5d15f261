"""A batched input (``...``) whose output sums over the batch: a mean of per-position losses.
The backward reshaped dx to the batch shape it read from grad_out, which has none here
(NameError: batch_shape); the forward now saves it."""

from derive import Op

OP = Op(
    name="summed_over_the_batch",
    inputs=["x[..., C]", "w[C]"],
    definitions=[
        "loss[...] = log(1 + exp(-Sum(x[..., c] * w[c], c)))",
        "mean = Sum(loss[...], batch) / Batch",
    ],
)
