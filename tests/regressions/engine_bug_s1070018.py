"""fuzz case, seed 1070018"""

# Found by `python -m fuzz` (case seed 1070018) on fda9140, shrunk from 3 definition(s).
# Failed: WRONG (engine bug: op 'fuzz1070018': internal error: the adjoint of gain reads ['_i6']
# outside their sums (an engine bug: please report it))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz1070018",
    doc="fuzz case, seed 1070018",
    inputs=[
        "gain[A]",
        "W1[H]",
        "labels[T]: int64",
        "idx[T]: int64",
    ],
    definitions=[
        "loss[q, o, y] = (gain[q] - gain[o]) - W1[y]",
        "Wq[t] = loss[idx[t], idx[t], labels[t]]*Sum((T + 2)*exp(loss[idx[t], kk, labels[t]]), kk)",
    ],
)

SEED = 1070018
