"""A size seen only in a product with a derived size of params alone (found by probing,
2026-11-27): ``x[N, H*D]`` with ``H = n_head`` solved D before H was bound, so D was never
bound, and every call of the generated module raised NameError (`derive check` refused the
shapes as its own binding had the same order)."""

from derive import Op

OP = Op(
    name="size_solved_beside_a_param_size",
    inputs=["x[N, H*D]"],
    params={"n_head": 2},
    sizes={"H": "n_head"},
    definitions=["xv = view(x, N, H, D)", "out[n, d] = Sum(xv[n, h, d]**2, h)"],
)
