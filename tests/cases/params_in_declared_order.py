"""Two params declared out of alphabetical order, ``lo`` before ``hi``: ``Function.apply``
takes them in the order declared (hardtanh's ``F.hardtanh(x, min_val, max_val)``). They were
taken sorted by name, so ``Function.apply(x, -0.5, 0.8)`` clamped to [0.8, -0.5] (found by
probing; tests/modules/test_user_op.py)."""

from derive import Op

OP = Op(
    name="params_in_declared_order",
    inputs=["x[N, M]"],
    params={"lo": -1.0, "hi": 1.0},
    definitions=["out[n, m] = minimum(maximum(x[n, m], lo), hi)"],
)
