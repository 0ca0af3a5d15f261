"""fuzz case, seed 6500062 (--windows)"""

# Found by `python -m fuzz --windows` (case seed 6500062) on 572e46c: refused, "emitted code is
# not valid Python" (an align of an aligned value printed `x[]`). Shrunk on that engine with `x[]`
# read as no broadcast: WRONG (exception RuntimeError: shape '[2, 2]' is invalid for input of size
# 20). An aligned value's rank counted only its kept flags, not its own axes (value.align,
# orders.rank).
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz6500062",
    doc="fuzz case, seed 6500062 (--windows)",
    inputs=[
        "a1[M, V, B, M]",
        "Kx[P, B]",
    ],
    definitions=[
        "prob[d, x, v] = Sum(a1[v, t, d, x], t)",
        "w[a, i, t2, g, ij] = Sum(Kx[k, ij]*a1[a, i, k*off + 3*t2, g]*prob[k*off + 3*t2, g, a]/(Kx[2*i + k*stride - step, k*off + 3*t2] + 1), k)",
    ],
    params={"off": 3, "step": 3, "stride": 1},
    sizes={"T": "(B - off*(P - 1) - 1) // 3 + 1"},
    ranges={"t2": "T"},
)

SEED = 6500062
