"""fuzz case, seed 1260227 (--constants)"""

# Found by `python -m fuzz --constants` (case seed 1260227) on c6035c2, shrunk from 6
# definition(s).
# Failed: WRONG (second order value: d2/dgrad_out off by inf (relative))
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz1260227",
    doc="fuzz case, seed 1260227 (--constants)",
    inputs=[
        "W1",
        "s[K, Y, P]",
    ],
    definitions=[
        "b2[b, m, v] = where(v <= m, (exp(W1) * exp(s[v, b, m]))**(-1), -inf)",
        "u[b, m, v] = exp(b2[b, m, v] - 1)",
    ],
)

SEED = 1260227
