"""exp(f - max f) where f reads its input through a gather, ``s[a, labels[n], h]``."""

from derive import Op

OP = Op(
    name="max_shifted_exp_of_a_gather",
    doc="exp(gain - max_h gain), gain = 1.25 exp(s) read at labels (fuzz --range 730268).",
    inputs=["s[N, Z, B]", "labels[M]: int64"],
    definitions=[
        "gain[a, h, n] = 1.25*exp(s[a, labels[n], h])",
        "top[a, n] = Max(gain[a, h, n], h)",
        "out[a, h, n] = exp(gain[a, h, n] - top[a, n])",
    ],
)
