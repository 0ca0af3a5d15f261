"""fuzz case, seed 1021352"""

# Found by `python -m fuzz` (case seed 1021352) on d7795d5, the same on ba6b0d9.
# Failed: REFUSED (second order not derived: sum over unused index [q]): a sum's body whose
# gate simplifies both branches to 0 (where(t <= q, 0, f) with f 0 wherever t > q) lowered
# to the number 0, without the summed axis.
# Fixed: a sum of a body that lowers to a number is that number times the count, a tensor
# over the sum's axes (derive/lower/reductions.py, _summed).
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz1021352",
    doc="fuzz case, seed 1021352",
    inputs=[
        "gain[T, V, Y]",
        "z[T, Y, Q]",
        "Zz",
        "ids[Q, T]: int64",
        "labels[T]: int64",
        "hid[T, Q, Q]",
        "u[2, T]",
    ],
    definitions=[
        "prob[k, d] = Sum((Zz + Zz) - hid[k, d, mm], mm) / Q",
        "res[y, kk, x] = cos(where(x <= kk, Zz * z[x, y, kk], u[0, x]) / (z[x, y, kk]**2 + 2))",
    ],
)

SEED = 1021352
