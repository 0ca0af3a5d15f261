"""where() whose condition compares params and numbers only (alpha <= 0): a python bool known
per call. It lowered to torch.where(alpha <= 0, ...), which takes no python bool (TypeError),
and an indicator on it to (alpha > 1).to(dtype) (fuzz seeds 270150, 270283, once the fuzzer
drew float conditions); now a python conditional, or a 0-d bool tensor beside tensors."""

from derive import Op

OP = Op(
    name="param_conditions",
    inputs=["x[N, M]"],
    params={"alpha": 0.5},
    definitions=[
        "out[n, m] = where(alpha <= 0, x[n, m], 2 * x[n, m]) + where(alpha > 1, 1, 3) * x[n, m]",
    ],
)
