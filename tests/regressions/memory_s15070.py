"""fuzz case, seed 15070 (--windows)"""

# Found by `python -m fuzz --windows` (case seed 15070) on 4675618, the same on ba6b0d9;
# shrunk from 8 definitions.
# Failed: WRONG (exception RuntimeError: [enforce fail at alloc_cpu.cpp:127] err == 0.
# DefaultCPUAllocator: can't allocate memory: you tried to allocate 43807744512 bytes. Error code
# 12 (Cannot allocate memory) (in the generated module, line 392))
# Fixed: a delta over an outer sum's index nested two sums deep is solved through both
# (derive/symbolic/inversion.py, delta_through_sum); left, the lowering broadcast every factor
# over an N x N identity (an N x G x J x F x N tensor in the double backward).
# Check: fuzz.check.run_case(OP, SEED) must say PASSED (tests/modules/test_fuzz.py runs it).
from derive import Op

OP = Op(
    name="fuzz15070",
    doc="fuzz case, seed 15070 (--windows)",
    inputs=[
        "h[N, G]",
        "a1[N, M, L]",
        "z[N, J, F]",
        "idx[I]: int64",
    ],
    definitions=[
        "W[kk, n, n1] = Sum(h[bb*pad + 2*kk, idx[kk]]*z[bb*pad + 2*kk, n, n1], bb)",
    ],
    params={"dil": 1, "groups": 3, "grp": 3, "off": 2, "pad": 2, "stride": 1},
    sizes={
        "Z": "grp",
        "M": "N / grp",
        "L": "stride",
        "Q": "N / grp",
        "A": "groups",
        "J": "N / groups",
        "F": "groups",
        "H": "N / groups",
        "V": "off",
        "I": "(N - pad*((off) - 1) - 1) // 2 + 1",
    },
    ranges={"bb": "V"},
)

SEED = 15070
