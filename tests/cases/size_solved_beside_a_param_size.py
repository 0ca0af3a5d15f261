"""A size seen only in a product with derived sizes of params alone (found by probing,
2026-11-27): ``x[N, G*D]`` with ``H = n_head`` and ``G = 2*H`` solved D before H and G were
bound, so D was never bound, and every call of the generated module raised NameError
(`derive check` refused the shapes: its own binding had the same order)."""

from derive import Op

OP = Op(
    name="size_solved_beside_a_param_size",
    inputs=["x[N, G*D]"],
    params={"n_head": 2},
    sizes={"H": "n_head", "G": "2*H"},
    definitions=["xv = view(x, N, G, D)", "out[n, d] = Sum(xv[n, h, d]**2, h)"],
)
