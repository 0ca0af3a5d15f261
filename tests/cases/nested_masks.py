"""A causal mask around a padding mask, nested where()s with -inf in each (found by probing,
2026-11-25): refused as "inf may only be a branch of where()" though every -inf is one (the
check cleared the infinite branches of the outer where() only). A query always sees itself,
so no row is masked whole."""

from derive import Op

OP = Op(
    name="nested_masks",
    inputs=["x[N, T, T]", "keep[N, T]", "v[N, T, D]"],
    definitions=[
        "s[n, t, u] = where(u <= t, where(u == t, x[n, t, u], where(keep[n, u] > 0,"
        " x[n, t, u], -inf)), -inf)",
        "m[n, t] = Max(s[n, t, u], u)",
        "e[n, t, u] = exp(s[n, t, u] - m[n, t])",
        "p[n, t, u] = e[n, t, u] / Sum(e[n, t, u2], u2)",
        "out[n, t, d] = Sum(p[n, t, u] * v[n, u, d], u)",
    ],
)
