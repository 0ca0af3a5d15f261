"""exp(hid - max_t hid) where hid is a causal mask's where() over a product that reads a gather."""

from derive import Op

OP = Op(
    name="max_shifted_exp_under_its_mask",
    doc="exp(hid - max_t hid), hid = where(t <= f, logits[t]^2 y, -inf) (fuzz --range 1210288).",
    inputs=["y[T, L, F]", "tgt[T]: int64", "pos[T]: int64"],
    definitions=[
        "logits[t] = 1/sigmoid(y[t, tgt[t], pos[t]])",
        "hid[t, l, f] = where(t <= f, (logits[t] * logits[t]) * y[t, l, f], -inf)",
        "z[l, f] = Max(hid[t, l, f], t)",
        "x[t, l, f] = exp(hid[t, l, f] - z[l, f])",
    ],
)
