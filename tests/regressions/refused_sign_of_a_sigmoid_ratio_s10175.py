"""fuzz case, seed 10175"""

# Found by `python -m fuzz` (case seed 10175) on a8e8707, written by hand from the case.
# Failed: REFUSED (SymPy cannot differentiate sign): the sigmoid-ratio identity rewrote
# 2 act / exp(w) as 2 act sigma(-w) / sigma(w), which SymPy could not prove real.
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz10175",
    doc="fuzz case, seed 10175",
    inputs=["Wq[D]", "idx[D]: int64", "w[D, A, D]"],
    definitions=[
        "act[x] = Wq[idx[x]]",
        "y[j, kk, u] = sign(log(A * exp(w[j, kk, u])) - (act[u] / ((1/2) * exp(w[u, kk, j]))))",
    ],
)

SEED = 10175
